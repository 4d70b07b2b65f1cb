"""Glossary links, piece by piece: anchors, the glossary table, term matching and the exact HTML written."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import glossary_links  # noqa: E402
from glossary_links import Term  # noqa: E402

KV_CACHE = Term("KV cache", "KV cache", "stored keys and values")
TOKEN = Term("token", "token", "a unit of text")
DECODE = Term("decode", "解碼", "one token per step")
CACHE = Term("cache", "快取", "kept for reuse")


def link(text: str, term: Term, url: str = "g/") -> str:
    """The link a term's first use becomes, written out by hand (the terms here need no escaping)."""
    anchor = "term-" + term.english.lower().replace(" ", "-")
    return f'<a class="glossary-term" href="{url}#{anchor}" title="{term.meaning}">{text}</a>'


# ----------------------------------------------------------------------------------------------
# Anchors and the glossary table


@pytest.mark.parametrize(
    ("english", "anchor"),
    [
        ("KV cache", "term-kv-cache"),
        ("(KV) cache", "term-kv-cache"),  # punctuation at either end leaves no dash behind
        ("top-k!", "term-top-k"),
        ("FlashAttention 2", "term-flashattention-2"),
    ],
)
def test_anchor_is_the_lower_case_english_term_with_dashes(english, anchor):
    assert glossary_links.anchor_for(english) == anchor


GLOSSARY = """\
# Glossary

| English | 繁體中文 | Meaning |
|---|:-:|---|
| KV cache | KV 快取 | stored keys and values |
|X|未知數|the unknown|
| only two | cells |
| :- -: | --- | --- |
| top-k |  | not translated yet |
Not a table line | even with a bar
"""


def test_table_rows_are_the_body_rows_of_the_glossary_table(tmp_path):
    glossary = tmp_path / "glossary.md"
    glossary.write_text(GLOSSARY, encoding="utf-8")
    # Skipped: the header (first cell "English"), the separator rows (first cell made only of dashes,
    # colons and spaces, even all three together), a row of two cells and a line that is no table row.
    # Kept, cells as written: a row without spaces round its bars (its cell "X" is a term, not a
    # separator), and a row whose zh-TW cell is empty (only the first cell decides what is a separator).
    assert glossary_links.table_rows(glossary) == [
        ["KV cache", "KV 快取", "stored keys and values"],
        ["X", "未知數", "the unknown"],
        ["top-k", "", "not translated yet"],
    ]


def test_meaning_loses_math_delimiters_and_markdown_for_the_tooltip():
    cell = r"  the \(k\) most **likely** `token`s, \[x\]  "
    assert glossary_links.plain_meaning(cell) == "the k most likely tokens, x"


# ----------------------------------------------------------------------------------------------
# Which words are a term


def found(term: Term, text: str) -> list[str]:
    return [match.group(0) for match in glossary_links.term_pattern(term).finditer(text)]


def test_english_terms_match_any_case_and_plurals():
    assert found(KV_CACHE, "The kv caches and the KV CACHE.") == ["kv caches", "KV CACHE"]


def test_an_all_capitals_term_matches_only_as_a_whole_word():
    # "GPU" has no lower-case letter but is still English: not inside "eGPU" or "GPU-bound".
    gpu = Term("GPU", "GPU", "a graphics processor")
    assert found(gpu, "an eGPU, two GPUs, a GPU-bound gpu") == ["GPUs", "gpu"]


def test_chinese_terms_match_inside_a_run_of_characters():
    assert found(DECODE, "推測解碼與逐一解碼") == ["解碼", "解碼"]


@pytest.mark.parametrize(
    ("tag", "attributes", "hidden"),
    [
        ("code", "", True),
        ("span", ' class="arithmatex"', True),
        ("div", ' id="x" class="md-typeset__table"', True),
        ("span", ' class="note"', False),  # a class, but not one that marks code, math or furniture
        ("p", "", False),
    ],
)
def test_skipped_elements_are_code_math_and_page_furniture(tag, attributes, hidden):
    assert glossary_links.skipped(tag, attributes) is hidden


# ----------------------------------------------------------------------------------------------
# The HTML written


def test_text_before_the_first_tag_and_after_the_last_is_linked_whole():
    html = "The KV cache grows.<br>Every token counts."
    expected = f"The {link('KV cache', KV_CACHE)} grows.<br>Every {link('token', TOKEN)} counts."
    assert glossary_links.link_terms(html, [KV_CACHE, TOKEN], "g/") == expected


def test_a_void_element_with_a_skipped_class_hides_nothing_after_it():
    # <input> has no closing tag: the calculator's class must not hide the prose that follows it.
    html = '<p><input class="calc"> The KV cache</p>'
    expected = f'<p><input class="calc"> The {link("KV cache", KV_CACHE)}</p>'
    assert glossary_links.link_terms(html, [KV_CACHE], "g/") == expected


def test_closing_an_element_inside_code_leaves_the_code_unlinked():
    html = "<p><code><span>x</span> KV cache</code> then KV cache</p>"
    expected = f"<p><code><span>x</span> KV cache</code> then {link('KV cache', KV_CACHE)}</p>"
    assert glossary_links.link_terms(html, [KV_CACHE], "g/") == expected


def test_code_after_a_void_element_stays_unlinked():
    html = "<p>A<br>b <code>KV cache</code> and token</p>"
    expected = f"<p>A<br>b <code>KV cache</code> and {link('token', TOKEN)}</p>"
    assert glossary_links.link_terms(html, [KV_CACHE, TOKEN], "g/") == expected


@pytest.mark.parametrize("terms", [[DECODE, CACHE], [CACHE, DECODE]], ids=["decode first", "cache first"])
def test_adjacent_chinese_terms_are_both_linked(terms):
    # '解碼' ends where '快取' starts: touching spans do not overlap, whichever term is looked for first.
    patterns = [(term, glossary_links.term_pattern(term)) for term in terms]
    linked: set[str] = set()
    out = glossary_links.link_in_text("先解碼快取", patterns, linked, "g/")
    assert out == f"先{link('解碼', DECODE)}{link('快取', CACHE)}"
    assert linked == {"decode", "cache"}


def test_a_meaning_with_quotes_is_escaped_in_the_tooltip():
    logits = Term("logits", "logits", 'the "raw" scores & more')
    patterns = [(logits, glossary_links.term_pattern(logits))]
    out = glossary_links.link_in_text("Logits first.", patterns, set(), "../g/")
    assert out == (
        '<a class="glossary-term" href="../g/#term-logits" title="the &quot;raw&quot; scores &amp; more">Logits</a>'
        " first."
    )


def test_glossary_rows_are_named_by_the_text_of_their_first_cell():
    # The anchor comes from the cell's text: inner tags dropped, entities decoded, across a line break.
    html = (
        "<table><tr><th>English</th></tr><tr>\n<td><strong>KV cache</strong></td><td>x</td></tr>"
        "<tr><td>draft\nmodel</td><td>y</td></tr><tr><td>Q&amp;A</td></tr></table>"
    )
    assert glossary_links.anchor_rows(html) == (
        '<table><tr><th>English</th></tr><tr id="term-kv-cache">\n<td><strong>KV cache</strong></td><td>x</td></tr>'
        '<tr id="term-draft-model"><td>draft\nmodel</td><td>y</td></tr><tr id="term-q-a"><td>Q&amp;A</td></tr></table>'
    )


def test_a_glossary_row_with_an_empty_zh_tw_term_is_refused(tmp_path):
    # An empty term would match the empty string everywhere and write each run of text twice.
    # (A row with an empty first cell reads as a table separator, so it never becomes a term.)
    glossary = tmp_path / "glossary.md"
    row = "| KV cache |  | the keys and values kept |"
    glossary.write_text("| English | 中文 | Meaning |\n|---|---|---|\n" + row + "\n", encoding="utf-8")
    for language in ("en", "zh-TW"):
        with pytest.raises(ValueError, match="needs both an English and a zh-TW term"):
            glossary_links.glossary_terms(glossary, language)


def test_the_glossary_is_read_as_utf8_under_an_ascii_locale(tmp_path, ascii_locale):
    glossary = tmp_path / "glossary.md"
    glossary.write_bytes("| English | 中文 | meaning |\n|---|---|---|\n| token | 詞元 | a piece of text |\n".encode())
    assert glossary_links.table_rows(glossary) == [["token", "詞元", "a piece of text"]]
