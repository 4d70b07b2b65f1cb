"""Structural checks that keep the two languages and the included code honest.

Used by ``tests/test_site_checks.py``; each function returns a list of problems (strings naming
the file), so a test can show that a deliberately broken page is caught.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import glossary_links  # noqa: E402  (a sibling module; the tests import this file by path)

ZH_SUFFIX = ".zh-TW.md"
FENCE = re.compile(r"^(\s*)(```|~~~)")
SNIPPET = re.compile(r"""--8<--\s+["']([^"']+)["']""")
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)[^)]*\)")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)[^)]*\)")
ADMONITION = re.compile(r"^\s*(!!!|\?\?\?\+?)\s+\w+")
HEADING = re.compile(r"^#{1,6}\s")
RESULT_MARKER = re.compile(r"\{\{(?:result|table|provenance)\s+[^}]*\}\}")
# A value stored twice, KEY (English) and KEY_zh (its zh-TW wording), is one marker for parity.
LANGUAGE_VARIANT = re.compile(r"_zh(?=[\s}])")
SECTION_START = "--8<-- [start:{}]"
SECTION_END = "--8<-- [end:{}]"


def page_pairs(docs: Path) -> tuple[list[tuple[Path, Path]], list[str]]:
    """Return (en, zh-TW) page pairs under ``docs`` and the problems of pages missing a twin."""
    pairs, problems = [], []
    for en in sorted(docs.rglob("*.md")):
        if en.name.endswith(ZH_SUFFIX):
            twin = en.with_name(en.name[: -len(ZH_SUFFIX)] + ".md")
            if not twin.exists():
                problems.append(f"{en.relative_to(docs)}: no English page {twin.name} beside it")
            continue
        zh = en.with_name(en.stem + ZH_SUFFIX)
        if zh.exists():
            pairs.append((en, zh))
        else:
            problems.append(f"{en.relative_to(docs)}: missing translation {zh.name}")
    return pairs, problems


def split_code(markdown: str) -> tuple[str, list[str]]:
    """Return (prose outside fenced code, list of fenced code block bodies)."""
    prose, blocks, current = [], [], None
    for line in markdown.splitlines():
        if FENCE.match(line):
            if current is None:
                current = []
            else:
                blocks.append("\n".join(current))
                current = None
            continue
        (prose if current is None else current).append(line)
    return "\n".join(prose), blocks


def structure(markdown: str) -> dict[str, object]:
    """Return the language-independent features a page and its translation must share."""
    prose, blocks = split_code(markdown)
    return {
        "headings": sum(bool(HEADING.match(line)) for line in prose.splitlines()),
        "code blocks": len(blocks),
        "snippet includes": sorted(SNIPPET.findall(markdown)),
        "images": sorted(IMAGE.findall(prose)),
        "admonitions": sum(bool(ADMONITION.match(line)) for line in prose.splitlines()),
        "links": sorted(LINK.findall(prose)),
        "result markers": sorted(LANGUAGE_VARIANT.sub("", marker) for marker in RESULT_MARKER.findall(markdown)),
    }


def parity_problems(en: Path, zh: Path) -> list[str]:
    """Return how a zh-TW page's structure differs from its English twin (empty when identical)."""
    en_features = structure(en.read_text(encoding="utf-8"))
    zh_features = structure(zh.read_text(encoding="utf-8"))
    return [
        f"{zh}: {feature} differ from {en.name}: {en_features[feature]!r} vs {zh_features[feature]!r}"
        for feature in en_features
        if en_features[feature] != zh_features[feature]
    ]


def glossary_terms(glossary: Path) -> list[tuple[str, str]]:
    """Return (English term, zh-TW term) rows of the glossary table."""
    return [(cells[0], cells[1]) for cells in glossary_links.table_rows(glossary)]


def plain_prose(markdown: str) -> str:
    """Return prose without code, inline code, link targets, result markers or math."""
    prose, _ = split_code(markdown)
    prose = re.sub(r"`[^`]*`", " ", prose)
    prose = re.sub(r"\]\([^)]*\)", "]", prose)
    prose = RESULT_MARKER.sub(" ", prose)
    prose = re.sub(r"\\\(.*?\\\)|\\\[.*?\\\]", " ", prose, flags=re.DOTALL)
    return prose


def glossary_problems(en: Path, zh: Path, terms: list[tuple[str, str]]) -> list[str]:
    """Return glossary terms the English page uses whose zh-TW term its twin never uses."""
    en_prose, zh_prose = plain_prose(en.read_text(encoding="utf-8")), plain_prose(zh.read_text(encoding="utf-8"))
    problems = []
    for english, chinese in terms:
        if english == chinese:
            continue
        if re.search(rf"(?<![\w-]){re.escape(english)}(?![\w-])", en_prose, re.IGNORECASE) and chinese not in zh_prose:
            problems.append(
                f"{zh}: {en.name} uses '{english}' but the translation never uses the glossary term '{chinese}'"
            )
    return problems


def snippet_problems(page: Path, base_paths: list[Path]) -> list[str]:
    """Return includes on a page whose file, or named section with both its markers, does not exist."""
    return [
        f"{page}: {problem}"
        for target in SNIPPET.findall(page.read_text(encoding="utf-8"))
        if (problem := include_problem(target, base_paths))
    ]


def include_problem(target: str, base_paths: list[Path]) -> str | None:
    """Return what is wrong with one include target ``file`` or ``file:section``, or None if nothing.

    A section needs exactly one start marker and one end marker after it: without its end marker,
    pymdown-extensions silently includes the rest of the file.
    """
    file_part, _, section = target.partition(":")
    found = next((base / file_part for base in base_paths if (base / file_part).is_file()), None)
    if found is None:
        return f"included file {file_part!r} not found under {[str(b) for b in base_paths]}"
    if not section or section.replace(":", "").isdigit():  # the whole file, or a line range
        return None
    lines = found.read_text(encoding="utf-8").splitlines()
    starts = [n for n, line in enumerate(lines) if SECTION_START.format(section) in line]
    ends = [n for n, line in enumerate(lines) if SECTION_END.format(section) in line]
    if not starts:
        return f"{file_part} has no section {section!r} (no line with {SECTION_START.format(section)!r})"
    if len(starts) > 1 or len(ends) > 1:
        return f"{file_part} marks section {section!r} more than once (start lines {starts}, end lines {ends})"
    if not ends or ends[0] < starts[0]:
        return (
            f"{file_part} section {section!r} has no {SECTION_END.format(section)!r} after its start "
            "marker; the page would silently include the rest of the file"
        )
    return None


# One term per concept (docs/glossary.md): words a page must not use, and what to write instead.
TERM_RULES = {
    "en": [(re.compile(r"\bCheck yourself\b", re.IGNORECASE), "Self-check")],
    "zh-TW": [
        (re.compile("自我檢測"), "自我檢查"),
        (re.compile("佔"), "占"),
        (re.compile(r"\b(?:memory|compute)[- ]bound\b|-bound\b", re.IGNORECASE), "受限於記憶體 / 受限於計算"),
        (re.compile("預填與解碼(?!階段)"), "預填與解碼階段 (the decode phase is 解碼階段; 解碼 alone is decoding)"),
    ],
}


def notebook_prose(source: str) -> str:
    """Return the Markdown cells of a jupytext percent script (``# %% [markdown]`` then ``# `` lines)."""
    lines, in_markdown = [], False
    for line in source.splitlines():
        if line.startswith("# %%"):
            in_markdown = "[markdown]" in line
        elif in_markdown:
            lines.append(line.removeprefix("#").removeprefix(" "))
    return plain_prose("\n".join(lines))


def term_problems(path: Path) -> list[str]:
    """Return the places a page or notebook source uses a term the glossary replaced with another."""
    language = "zh-TW" if path.name.endswith((".zh-TW.md", ".zh-TW.py")) else "en"
    text = path.read_text(encoding="utf-8")
    if path.name.startswith("glossary"):  # its first column is the English term itself
        text = re.sub(r"^\|[^|\n]*\|", "|", text, flags=re.MULTILINE)
    prose = notebook_prose(text) if path.suffix == ".py" else plain_prose(text)
    problems = []
    for pattern, instead in TERM_RULES[language]:
        for match in pattern.finditer(prose):
            problems.append(f"{path}: writes {match.group(0)!r}; use {instead}")
    return problems
