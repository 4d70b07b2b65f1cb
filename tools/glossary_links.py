"""Link the first use of every glossary term on a page to its row in the glossary.

The glossary (``docs/glossary.md`` and its zh-TW twin) is a table: English term, zh-TW term,
meaning. Each row gets an anchor named after the English term (the same in both languages), and
every other page links the first place its prose uses a term, in the page's language, to that
anchor, with the meaning as a tooltip. Only prose is touched: never code, math, headings,
existing links or buttons, so a page reads the same with or without the links.

This works on the HTML a page renders to (mkdocs' ``on_page_content``), where code, math and
links are already marked up, instead of guessing at Markdown syntax.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import Path

# Elements whose text is never linked: code, math, headings, links, and page furniture.
SKIP_TAGS = {
    "a",
    "code",
    "pre",
    "kbd",
    "script",
    "style",
    "svg",
    "button",
    "textarea",
    "title",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "summary",
    "label",
    "select",
    "option",
}
# Elements whose class marks text that is not prose (arithmatex wraps math; calculators are UI).
SKIP_CLASSES = ("arithmatex", "calc", "admonition-title", "md-", "headerlink", "glossary-term")
VOID_TAGS = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
TAG = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9-]*)([^>]*?)(/?)>|<!--.*?-->", re.DOTALL)


@dataclass(frozen=True)
class Term:
    english: str  # the anchor's name comes from this, so both languages share anchors
    text: str  # what the page's language writes
    meaning: str  # shown as the link's tooltip

    @property
    def anchor(self) -> str:
        return anchor_for(self.english)


def anchor_for(english: str) -> str:
    """Return the glossary anchor of an English term: 'KV cache' -> 'term-kv-cache'."""
    return "term-" + re.sub(r"[^a-z0-9]+", "-", english.lower()).strip("-")


def table_rows(glossary: Path) -> list[list[str]]:
    """Return the cells of every body row of the glossary's Markdown table."""
    rows = []
    for line in glossary.read_text(encoding="utf-8").splitlines():
        if not line.startswith("|"):
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0] != "English" and not set(cells[0]) <= set("-: "):
            rows.append(cells)
    return rows


def glossary_terms(glossary: Path, language: str) -> list[Term]:
    """Return the glossary's terms as the page's language writes them; refuse a row with an empty term.

    An empty term would match the empty string at every position of every page, so it is an error
    in the glossary, not something to link.
    """
    rows = table_rows(glossary)
    for cells in rows:
        if not cells[0] or not cells[1]:
            raise ValueError(
                f"{glossary}: the glossary row {' | '.join(cells)!r} needs both an English and a zh-TW term"
            )
    return [
        Term(english=cells[0], text=cells[1] if language == "zh-TW" else cells[0], meaning=plain_meaning(cells[2]))
        for cells in rows
    ]


def plain_meaning(cell: str) -> str:
    """Return a glossary meaning as plain text for a tooltip (no math delimiters or Markdown)."""
    text = re.sub(r"\\[()\[\]]", "", cell)
    return re.sub(r"[`*]", "", text).strip()


def term_pattern(term: Term) -> re.Pattern:
    """Match a term as a whole word (English: any case, plural 's'/'es' allowed)."""
    if re.search(r"[A-Za-z]", term.text) and term.text.isascii():
        return re.compile(r"(?<![\w-])" + re.escape(term.text) + r"(?:s|es)?(?![\w-])", re.IGNORECASE)
    # Chinese has no spaces between words; a longer term that contains this one is matched first.
    return re.compile(re.escape(term.text))


def skipped(tag: str, attributes: str) -> bool:
    classes = re.search(r'class="([^"]*)"', attributes)
    return tag in SKIP_TAGS or bool(classes and any(c in classes.group(1) for c in SKIP_CLASSES))


def link_terms(content: str, terms: list[Term], glossary_url: str) -> str:
    """Return ``content`` with the first prose use of each term linked to ``glossary_url#anchor``."""
    patterns = [(term, term_pattern(term)) for term in sorted(terms, key=lambda t: -len(t.text))]
    linked: set[str] = set()
    stack: list[tuple[str, bool]] = []  # open elements and whether each hides its text
    pieces, position = [], 0
    for match in TAG.finditer(content):
        text = content[position : match.start()]
        inside_skip = any(skip for _, skip in stack)
        pieces.append(text if inside_skip else link_in_text(text, patterns, linked, glossary_url))
        pieces.append(match.group(0))
        position = match.end()
        closing, tag, attributes, self_closing = (
            match.group(1),
            (match.group(2) or "").lower(),
            match.group(3),
            match.group(4),
        )
        if not tag or tag in VOID_TAGS or self_closing:
            continue
        if closing:
            while stack and stack.pop()[0] != tag:  # tolerate unclosed elements such as <p> or <li>
                pass
        else:
            stack.append((tag, skipped(tag, attributes or "")))
    pieces.append(link_in_text(content[position:], patterns, linked, glossary_url))
    return "".join(pieces)


def link_in_text(text: str, patterns: list[tuple[Term, re.Pattern]], linked: set[str], glossary_url: str) -> str:
    """Link, in one run of text, each term not linked yet on this page; longer terms win overlaps."""
    if not text.strip():
        return text
    taken: list[tuple[int, int, Term | None]] = []  # spans already claimed, with the term to link
    for term, pattern in patterns:  # longest first: '推測解碼' claims its '解碼' before 'decode' looks
        for match in pattern.finditer(text):
            if any(start < match.end() and match.start() < end for start, end, _ in taken):
                continue
            # A term linked earlier on the page still claims its span (so its parts stay plain).
            taken.append((match.start(), match.end(), None if term.english in linked else term))
            if term.english not in linked:
                linked.add(term.english)
    pieces, position = [], 0
    for start, end, term in sorted(taken, key=lambda span: span[0]):
        if term is None:
            continue
        pieces.append(text[position:start])
        pieces.append(
            f'<a class="glossary-term" href="{glossary_url}#{term.anchor}" '
            f'title="{html.escape(term.meaning, quote=True)}">{text[start:end]}</a>'
        )
        position = end
    pieces.append(text[position:])
    return "".join(pieces)


def anchor_rows(content: str) -> str:
    """Return the glossary page's HTML with an id on every table row, named after its English term."""

    def add_id(match: re.Match) -> str:
        english = re.sub(r"<[^>]+>", "", match.group(2)).strip()
        return f'<tr id="{anchor_for(html.unescape(english))}">{match.group(1)}'

    return re.sub(r"<tr>(\s*<td[^>]*>(.*?)</td>)", add_id, content, flags=re.DOTALL)
