"""Checks that keep graded answers and this machine's paths off the site.

Used by ``tests/test_honesty.py``; each function returns a list of problems (strings naming the
file), so a test can show that a deliberately broken copy is caught.

- ``leaked_table_problems``: the site teaches greedy vs MAP with its own example. CS181 HW6
  Problem 4's probability table must not come back as an example: its first-token distribution
  (0.6, 0.4), its conditional (0.6, 0.4) after "A A", its branch 0.4 * 0.95 * 0.9, its greedy
  sequence A A A and its MAP probability 0.342. The fingerprints below are those numbers; the
  patterns are written so that none of them appears in this file literally.
- ``absolute_path_problems``: result files record the command as a reader types it
  (``python -m inferlab.... --flags``); no page, notebook or result file may show a path that only
  exists on the machine that produced it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

NUMBER = r"(\d*\.\d+)"
PAIR = re.compile(r"[\[(]\s*" + NUMBER + r"\s*,\s*" + NUMBER + r"\s*[\])]")
PRODUCT = re.compile(NUMBER + r"\s*[·*×]\s*" + NUMBER + r"\s*[·*×]\s*" + NUMBER)
GREEDY_SEQUENCE = re.compile(r"(?<![\w/+])A ?A ?A(?![\w/+=])")  # A A A, or AAA as a snippet prints it
MAP_SEQUENCE = re.compile(r"(?<![\w/+])B ?A ?A(?![\w/+=])")
MAP_PROBABILITY = re.compile(r"(?<![\d.])0\.342(?!\d)")
BRANCH = sorted([0.4, 0.95, 0.9])
TABLE_ROWS = [{0.6, 0.4}, {0.95, 0.05}, {0.9, 0.1}]

# A POSIX path from the root with at least two parts (/home/me/x, /work/repo/code), or a Windows
# drive path. Relative links (../x/y.md), URLs (https://a/b) and ratios (TB/s) do not match.
POSIX_ABSOLUTE = re.compile(r"(?<![\w.:/~\\+=-])/(?:[\w.-]+/)+[\w.-]+")
WINDOWS_ABSOLUTE = re.compile(r"\b[A-Za-z]:\\\\?[\w.-]+")


def readable_text(path: Path) -> str:
    """Return the text a reader sees in a file: for a notebook, its cells and text outputs, not images."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".ipynb":
        return text
    pieces = []
    for cell in json.loads(text).get("cells", []):
        pieces.append("".join(cell.get("source", [])))
        for output in cell.get("outputs", []):
            pieces.append("".join(output.get("text", [])))
            data = output.get("data", {})
            for kind in ("text/plain", "text/markdown", "text/html"):
                pieces.append("".join(data.get(kind, [])))
            pieces.append("\n".join(output.get("traceback", [])))
    return "\n".join(pieces)


def leaked_table_problems(path: Path) -> list[str]:
    """Return the fingerprints of CS181 HW6 P4's table found in one file."""
    text = readable_text(path)
    problems = []
    if GREEDY_SEQUENCE.search(text):
        problems.append(f"{path}: prints the assignment's greedy sequence {GREEDY_SEQUENCE.search(text).group(0)!r}")
    if MAP_PROBABILITY.search(text) and (MAP_SEQUENCE.search(text) or "MAP" in text):
        problems.append(f"{path}: prints the assignment's MAP probability next to a MAP sequence")
    for match in PRODUCT.finditer(text):
        if sorted(float(x) for x in match.groups()) == BRANCH:
            problems.append(f"{path}: multiplies the assignment's branch {match.group(0)!r}")
    pairs = [{float(a), float(b)} for a, b in PAIR.findall(text)]
    if all(row in pairs for row in TABLE_ROWS):
        problems.append(f"{path}: holds the rows of the assignment's table: {[sorted(r) for r in TABLE_ROWS]}")
    return problems


def absolute_path_problems(path: Path) -> list[str]:
    """Return the absolute paths of some machine that a page, notebook or result file shows."""
    text = readable_text(path)
    found = POSIX_ABSOLUTE.findall(text) + WINDOWS_ABSOLUTE.findall(text)
    return [f"{path}: shows the absolute path {p!r}; record what a reader types instead" for p in found]


def files_to_scan(root: Path) -> dict[str, list[Path]]:
    """Return, by kind, the files a reader sees: pages, result files, notebooks, snippets and modules."""
    docs = root / "docs"
    return {
        "pages": sorted(docs.rglob("*.md")),
        "results": sorted((docs / "results").glob("*.json")),
        "notebooks": sorted((docs / "labs").glob("*.ipynb")) + sorted((root / "notebooks").glob("*.py")),
        "snippets": sorted((root / "snippets").rglob("*.py")),
        "modules": sorted((root / "code").rglob("*.py")),
    }
