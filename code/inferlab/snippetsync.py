"""Keep the package code that reader snippets carry in sync with the package: the single source.

A snippet in ``snippets/`` must run in a fresh Python with only torch, transformers and matplotlib,
so it cannot ``import inferlab``. When it needs package code, it carries a *generated copy*:

    # >>> generated from inferlab/decoding/sampling.py:top_p (python -m inferlab.snippetsync)
    ...lines copied from the named section...
    # <<< generated

The named section is marked in the package source with pymdown's own markers,
``# --8<-- [start:top_p]`` and ``# --8<-- [end:top_p]`` (the same markers the pages include).
``python -m inferlab.snippetsync`` rewrites every generated block; ``--check`` only reports stale
ones (the tests run it, so a stale copy fails CI).
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from pathlib import Path

BLOCK = re.compile(
    r"(?P<head>^[ \t]*# >>> generated from (?P<file>\S+):(?P<section>\S+)[^\n]*\n)"
    r"(?P<body>.*?)"
    r"(?P<tail>^[ \t]*# <<< generated[^\n]*$)",
    re.MULTILINE | re.DOTALL,
)
CODE_ROOT = Path(__file__).resolve().parent.parent


def section_text(source_file: Path, section: str) -> str:
    """Return the dedented lines between ``[start:section]`` and ``[end:section]`` in a source file."""
    lines = source_file.read_text(encoding="utf-8").splitlines(keepends=True)
    start = end = None
    for number, line in enumerate(lines):
        if re.search(rf"--8<-- \[start:{re.escape(section)}\]", line):
            start = number + 1
        elif re.search(rf"--8<-- \[end:{re.escape(section)}\]", line) and start is not None:
            end = number
            break
    if start is None or end is None:
        raise ValueError(
            f"{source_file}: no section named {section!r} (markers --8<-- [start:{section}] / [end:{section}])"
        )
    kept = [line for line in lines[start:end] if "--8<--" not in line]
    return textwrap.dedent("".join(kept))


def synced(snippet_text: str, code_root: Path = CODE_ROOT) -> str:
    """Return the snippet text with every generated block refreshed from the package source."""

    def refresh(match: re.Match) -> str:
        indent = re.match(r"[ \t]*", match.group("head")).group(0)
        body = section_text(code_root / match.group("file"), match.group("section"))
        body = textwrap.indent(body, indent, lambda line: line.strip() != "")
        return match.group("head") + body + match.group("tail")

    return BLOCK.sub(refresh, snippet_text)


def stale_snippets(snippet_dir: Path, code_root: Path = CODE_ROOT) -> list[Path]:
    """Return the snippet files whose generated blocks differ from the package source."""
    return [
        path
        for path in sorted(snippet_dir.rglob("*.py"))
        if synced(path.read_text(encoding="utf-8"), code_root) != path.read_text(encoding="utf-8")
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Refresh generated package code inside snippets/.")
    parser.add_argument("snippet_dir", nargs="?", default="snippets", type=Path)
    parser.add_argument("--check", action="store_true", help="only report stale snippets; exit 1 if any")
    args = parser.parse_args(argv)
    stale = stale_snippets(args.snippet_dir)
    if args.check:
        for path in stale:
            print(f"stale generated code in {path}; run python -m inferlab.snippetsync")
        return 1 if stale else 0
    for path in stale:
        path.write_text(synced(path.read_text(encoding="utf-8")), encoding="utf-8")
        print(f"updated {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
