"""The page hooks: numbers come from result files, and a missing one fails the build."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import mkdocs_hooks  # noqa: E402
from mkdocs.exceptions import PluginError  # noqa: E402

RECORD = {
    "name": "demo",
    "provenance": {
        "command": "python -m demo",
        "device": "CPU: test",
        "versions": {"torch": "9"},
        "date": "2026-01-01 00:00 UTC",
    },
    "values": {"ratio": 0.123456, "rows": [{"n": 1, "t": 2.5}, {"n": 2, "t": 5.0}], "count": 1234567},
}


@pytest.fixture
def results(tmp_path, monkeypatch):
    (tmp_path / "demo.json").write_text(json.dumps(RECORD))
    monkeypatch.setattr(mkdocs_hooks, "RESULTS", tmp_path)
    return tmp_path


def render(markdown: str, src_uri: str = "x/page.md") -> str:
    page = SimpleNamespace(file=SimpleNamespace(src_uri=src_uri))
    return mkdocs_hooks.on_page_markdown(markdown, page, None, None)


def test_values_are_formatted_from_the_file(results):
    assert render("r = {{result demo ratio .2f}}, n = {{result demo count ,}}") == "r = 0.12, n = 1,234,567"
    assert render("{{result demo rows.1.t}}") == "5"


def test_table_renders_every_record(results):
    table = render("{{table demo rows}}")
    assert table.splitlines()[0] == "| n | t |" and "| 2 | 5 |" in table


def test_provenance_is_in_the_page_language(results):
    assert "How this was measured" in render("{{provenance demo}}") and "python -m demo" in render(
        "{{provenance demo}}"
    )
    zh = render("{{provenance demo}}", "x/page.zh-TW.md")
    assert "測量方式" in zh and "CPU: test" in zh


@pytest.mark.parametrize(
    "marker", ["{{result nope ratio}}", "{{result demo missing}}", "{{result demo rows.7.t}}", "{{table demo ratio}}"]
)
def test_missing_results_fail_the_build(results, marker):
    with pytest.raises(PluginError):
        render(marker)


@pytest.mark.parametrize(
    ("marker", "words"),
    [
        ("{{result nope ratio}}", ["nope.json"]),
        ("{{provenance nope}}", ["nope.json"]),
        ("{{result demo missing}}", ["demo", "missing"]),
        ("{{result demo rows.7.t}}", ["demo", "rows.7.t"]),
        ("{{table demo ratio}}", ["demo", "ratio"]),
        ("{{result demo}}", ["x/page.md", "result NAME KEY"]),
        ("{{result demo ratio .2f extra}}", ["x/page.md", "result NAME KEY"]),
    ],
)
def test_build_errors_name_the_file_and_the_key(results, marker, words):
    # A strict build that fails must say what to fix: a bare "some PluginError" is not enough.
    with pytest.raises(PluginError) as error:
        render(marker)
    for word in words:
        assert word in str(error.value), f"{word!r} missing from {error.value}"


BROKEN_FILES = {  # (file content, words the error must hold): the file and what is wrong in it
    "truncated": ('{"name": "broken", "provenance": {', ["broken.json", "not valid UTF-8 JSON"]),
    "not_utf8": (b'{"name": "\xff"}', ["broken.json", "UTF-8"]),
    "no_values": ({k: v for k, v in RECORD.items() if k != "values"}, ["broken.json", "values"]),
    "no_provenance": ({k: v for k, v in RECORD.items() if k != "provenance"}, ["broken.json", "provenance"]),
    "no_date": (
        {**RECORD, "provenance": {k: v for k, v in RECORD["provenance"].items() if k != "date"}},
        ["broken.json", "date"],
    ),
    "nan": ({**RECORD, "values": {"ratio": float("nan")}}, ["broken.json", "ratio", "nan"]),
    "inf_in_a_row": ({**RECORD, "values": {"rows": [{"t": float("inf")}]}}, ["broken.json", "rows", "inf"]),
    "a_list": ([1, 2], ["broken.json", "object"]),
}


@pytest.mark.parametrize("case", sorted(BROKEN_FILES))
@pytest.mark.parametrize("marker", ["{{result broken ratio}}", "{{provenance broken}}"])
def test_a_broken_result_file_fails_the_build_naming_the_file(results, case, marker):
    """Issue 18: a malformed, truncated, non-UTF-8 or NaN-holding file is a PluginError naming it, never a
    bare KeyError/IndexError, and never "nan" on a page (json.dumps writes NaN unless told not to)."""
    content, words = BROKEN_FILES[case]
    path = results / "broken.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content)
    else:
        path.write_text(json.dumps(content))
    with pytest.raises(PluginError) as error:
        render(marker)
    for word in words:
        assert word in str(error.value), f"{word!r} missing from {error.value}"


def test_a_bad_format_spec_names_the_page_and_the_marker(results):
    with pytest.raises(PluginError) as error:
        render("{{result demo ratio .2q}}")
    assert "x/page.md" in str(error.value) and "demo.json" in str(error.value) and ".2q" in str(error.value)


@pytest.fixture
def code_dir(tmp_path, monkeypatch):
    folder = tmp_path / "code"
    folder.mkdir()
    monkeypatch.setattr(mkdocs_hooks, "SNIPPET_BASES", [folder])
    return folder


@pytest.mark.parametrize(
    ("source", "words"),
    [
        ("# --8<-- [start:f]\ndef f(): ...\n# rest of the file\n", ["mod.py", "'f'", "end:f", "rest of the file"]),
        ("def f(): ...\n# --8<-- [end:f]\n", ["mod.py", "no section 'f'"]),
        ("# --8<-- [end:f]\n# --8<-- [start:f]\ndef f(): ...\n", ["mod.py", "end:f"]),
        ("# --8<-- [start:f]\n# --8<-- [end:f]\n# --8<-- [start:f]\n# --8<-- [end:f]\n", ["mod.py", "more than once"]),
    ],
)
def test_a_snippet_section_without_both_markers_fails_the_build(code_dir, source, words):
    """Without its end marker pymdown would include the whole rest of the file: the hook refuses the page."""
    (code_dir / "mod.py").write_text(source)
    with pytest.raises(PluginError) as error:
        render('```python\n--8<-- "mod.py:f"\n```\n', "x/page.zh-TW.md")
    assert "x/page.zh-TW.md" in str(error.value)
    for word in words:
        assert word in str(error.value), f"{word!r} missing from {error.value}"


def test_a_whole_file_or_a_well_marked_section_is_accepted(code_dir):
    (code_dir / "mod.py").write_text("x = 1\n# --8<-- [start:f]\ndef f(): ...\n# --8<-- [end:f]\n")
    page = '--8<-- "mod.py"\n--8<-- "mod.py:f"\n--8<-- "mod.py:2:3"\n'
    assert render(page) == page


def test_floats_default_to_four_significant_digits_and_integers_stay_whole(results):
    assert render("{{result demo ratio}} {{result demo count}} {{result demo rows.0.n}}") == "0.1235 1234567 1"


def test_table_keeps_the_first_records_columns_and_leaves_missing_cells_blank(results, tmp_path):
    record = {**RECORD, "name": "ragged", "values": {"rows": [{"a": 1, "b": 0.5}, {"a": 2}, {"b": 3.0, "c": 9}]}}
    (tmp_path / "ragged.json").write_text(json.dumps(record))
    assert render("{{table ragged rows}}").splitlines() == [
        "| a | b |",
        "|---|---|",
        "| 1 | 0.5 |",
        "| 2 |  |",
        "|  | 3 |",
    ]


def test_provenance_box_lists_every_field_in_both_languages(results):
    english = render("{{provenance demo}}")
    assert english.splitlines() == [
        '??? info "How this was measured"',
        "    - Result file: `docs/results/demo.json`",
        "    - Command: `python -m demo`",
        "    - Device: CPU: test",
        "    - Versions: torch 9",
        "    - Date: 2026-01-01 00:00 UTC",
    ]
    chinese = render("{{provenance demo}}", "x/page.zh-TW.md").splitlines()
    assert [line.split(":")[0] for line in chinese[1:]] == [
        "    - 結果檔",
        "    - 指令",
        "    - 裝置",
        "    - 版本",
        "    - 日期",
    ]


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ([1, 2], "must hold a JSON object, got list"),
        ({"name": "x"}, "has no provenance, values (write it with inferlab.bench.write_result)"),
        (
            {**RECORD, "provenance": {"command": "c"}},
            "provenance must give command, device, versions, date, got {'command': 'c'}",
        ),
        (
            {**RECORD, "provenance": {**RECORD["provenance"], "versions": "torch 9"}},
            "provenance versions must be an object of library versions, got 'torch 9'",
        ),
        (RECORD, None),
    ],
    ids=["a list", "two keys missing", "provenance without fields", "versions as text", "a good record"],
)
def test_record_problem_says_exactly_what_is_wrong(record, message):
    assert mkdocs_hooks.record_problem(record) == message


def test_small_floats_keep_four_significant_digits_in_lower_case():
    assert mkdocs_hooks.format_value(1.23456e-05, "") == "1.235e-05"


# Column keys with headers in inferlab.bench.labels; "model" is a data column, shown as it is even
# when its value happens to be a label ("greedy"), while "strategy" labels are translated.
LABELLED = {
    **RECORD,
    "name": "labelled",
    "values": {
        "rows": [
            {"strategy": "greedy", "model": "greedy", "naive_s": 0.5, "causal": True, "k": None},
            {"strategy": "beam 2, MAP", "model": "gpt2", "naive_s": 2.0, "causal": False, "k": 3},
        ]
    },
}


def test_table_is_in_english_unless_told_otherwise():
    assert mkdocs_hooks.render_table(LABELLED, "rows").splitlines() == [
        "| strategy | model | naive loop (s) | causal | k |",
        "|---|---|---|---|---|",
        "| greedy | greedy | 0.5 | yes | — |",  # None: not measured
        "| beam 2, MAP | gpt2 | 2 | no | 3 |",
    ]


def test_a_zh_tw_page_gets_its_table_in_zh_tw(results):
    (results / "labelled.json").write_text(json.dumps(LABELLED))
    assert render("{{table labelled rows}}", "x/page.zh-TW.md").splitlines() == [
        "| 策略 | 模型 | 無快取迴圈（秒） | 因果遮罩 | k |",
        "|---|---|---|---|---|",
        "| 貪婪 | greedy | 0.5 | 是 | — |",
        "| 束寬 2、MAP | gpt2 | 2 | 否 | 3 |",
    ]


def test_provenance_lists_every_library_version():
    record = {**RECORD, "provenance": {**RECORD["provenance"], "versions": {"torch": "2.5", "transformers": "4.46"}}}
    assert mkdocs_hooks.render_provenance(record, "demo", "en") == (
        '??? info "How this was measured"\n'
        "    - Result file: `docs/results/demo.json`\n"
        "    - Command: `python -m demo`\n"
        "    - Device: CPU: test\n"
        "    - Versions: torch 2.5, transformers 4.46\n"
        "    - Date: 2026-01-01 00:00 UTC\n"
    )


# ----------------------------------------------------------------------------------------------
# Language links: each page's language menu leads to its own twin, relatively.

SITE = "https://example.org/llm-fast-inference/"  # a sub-path, as on GitHub Pages
MATERIAL_HTML = (
    '<head><link rel="alternate" href="/" hreflang="en">\n'
    '<link rel="alternate" href="/zh-TW/" hreflang="zh-TW"></head>'
    '<a href="/" hreflang="en" class="md-select__link">English</a>'
    '<a href="/zh-TW/" hreflang="zh-TW" class="md-select__link">繁體中文</a>'
    '<a href="../other/">unrelated</a>'
)


def language_links(url: str) -> dict[str, str]:
    """Return {language: absolute URL its menu entry leads to} after the hook, as a browser resolves it."""
    import re
    from urllib.parse import urljoin

    out = mkdocs_hooks.on_post_page(MATERIAL_HTML, SimpleNamespace(url=url), None)
    assert 'rel="alternate"' not in out  # head alternates go (Material would fetch <root>/sitemap.xml)
    assert '<a href="../other/">unrelated</a>' in out  # other links are left alone
    return {lang: urljoin(SITE + url, href) for href, lang in re.findall(r'href="([^"]*)" hreflang="([^"]*)"', out)}


@pytest.mark.parametrize(
    ("url", "english"),
    [("", ""), ("decoding/greedy-vs-map/", "decoding/greedy-vs-map/"), ("labs/kvcache/", "labs/kvcache/")],
)
def test_language_menu_leads_to_the_same_page_in_each_language(url, english):
    expected = {"en": SITE + english, "zh-TW": SITE + "zh-TW/" + english}
    assert language_links(url) == expected  # from the English page
    assert language_links("zh-TW/" + url) == expected  # from its zh-TW twin


def test_language_links_are_relative_so_the_site_works_under_any_sub_path():
    out = mkdocs_hooks.on_post_page(MATERIAL_HTML, SimpleNamespace(url="zh-TW/paged/engine/"), None)
    assert 'href="../../../paged/engine/" hreflang="en"' in out
    assert 'href="./" hreflang="zh-TW"' in out


def test_head_alternate_links_are_removed_without_a_trace():
    # On the home page: the two head links (and the line break between them) go; the menu links
    # become relative ("./" is the page itself); other links stay as they were.
    assert mkdocs_hooks.on_post_page(MATERIAL_HTML, SimpleNamespace(url=""), None) == (
        "<head></head>"
        '<a href="./" hreflang="en" class="md-select__link">English</a>'
        '<a href="zh-TW/" hreflang="zh-TW" class="md-select__link">繁體中文</a>'
        '<a href="../other/">unrelated</a>'
    )


# ----------------------------------------------------------------------------------------------
# The content hook: glossary links point at the glossary of the page's own language.


@pytest.mark.parametrize(
    ("src_uri", "url", "html", "glossary"),
    [
        ("kvcache/kv-cache.md", "kvcache/kv-cache/", "<p>The KV cache grows.</p>", "glossary/"),
        ("kvcache/kv-cache.zh-TW.md", "zh-TW/kvcache/kv-cache/", "<p>KV 快取會變大。</p>", "zh-TW/glossary/"),
        ("index.md", "", "<p>The KV cache grows.</p>", "glossary/"),
    ],
)
def test_page_content_links_terms_to_the_glossary_in_the_page_language(src_uri, url, html, glossary):
    from urllib.parse import urljoin

    page = SimpleNamespace(url=url, file=SimpleNamespace(src_uri=src_uri))
    out = mkdocs_hooks.on_page_content(html, page, {"docs_dir": str(ROOT / "docs")}, None)
    (href, _), *_ = links(out)
    assert urljoin(SITE + url, href) == SITE + glossary + "#term-kv-cache"


def test_glossary_page_gets_row_anchors_and_notebooks_are_left_alone():
    table = "<table><tr>\n<td>KV cache</td><td>x</td></tr></table>"
    glossary = SimpleNamespace(url="glossary/", file=SimpleNamespace(src_uri="glossary.md"))
    assert 'id="term-kv-cache"' in mkdocs_hooks.on_page_content(table, glossary, {"docs_dir": str(ROOT / "docs")}, None)
    # A notebook page with no table of contents: its headings keep the ids they have.
    notebook = SimpleNamespace(url="labs/x/", file=SimpleNamespace(src_uri="labs/x.ipynb"), toc=[])
    html = "<p>The KV cache grows.</p>"
    assert mkdocs_hooks.on_page_content(html, notebook, {"docs_dir": str(ROOT / "docs")}, None) == html


def test_toc_ids_lists_nested_headings_in_reading_order():
    def entry(anchor, *children):
        return SimpleNamespace(id=anchor, children=list(children))

    toc = [entry("intro", entry("setup", entry("setup-gpu")), entry("run")), entry("summary")]
    assert mkdocs_hooks.toc_ids(toc) == ["intro", "setup", "setup-gpu", "run", "summary"]


def test_post_build_keeps_every_cached_notebook_of_both_languages(tmp_path):
    for name in ("en.json", "zh.json", "notes.txt"):
        (tmp_path / name).write_text("{}")
    jupyter = SimpleNamespace(config={"cache": True, "cache_dir": str(tmp_path)}, _used_cache_paths=set())
    config = SimpleNamespace(plugins={"mkdocs-jupyter": jupyter})
    mkdocs_hooks.on_post_build(config)
    assert jupyter._used_cache_paths == {tmp_path / "en.json", tmp_path / "zh.json"}
    jupyter.config["cache"], jupyter._used_cache_paths = False, set()
    mkdocs_hooks.on_post_build(config)
    assert jupyter._used_cache_paths == set()


# ----------------------------------------------------------------------------------------------
# Glossary links: the first prose use of each term links to its row in the glossary.

import glossary_links  # noqa: E402

TERMS = [
    glossary_links.Term("KV cache", "KV cache", "stored keys and values"),
    glossary_links.Term("token", "token", "a unit of text"),
    glossary_links.Term("draft model", "draft model", "the small model"),
    glossary_links.Term("speculative decoding", "推測解碼", "draft then verify"),
    glossary_links.Term("decode", "解碼", "one token per step"),
]


def links(html: str) -> list[tuple[str, str]]:
    """Return (href, linked text) of every glossary link in html."""
    import re

    return re.findall(r'<a class="glossary-term" href="([^"]*)"[^>]*>([^<]*)</a>', html)


def test_first_use_is_linked_once():
    html = "<p>The KV cache stores keys.</p><p>The KV cache grows with every token.</p>"
    out = glossary_links.link_terms(html, TERMS, "../glossary/")
    assert links(out) == [("../glossary/#term-kv-cache", "KV cache"), ("../glossary/#term-token", "token")]
    assert out.count("KV cache") == 2  # the second use stays plain text


def test_code_math_headings_and_links_stay_plain():
    html = (
        '<h2 id="kv">KV cache</h2><p><code>KV cache</code> <span class="arithmatex">\\(KV cache\\)</span> '
        '<a href="x/">KV cache</a> <div class="admonition"><p class="admonition-title">KV cache</p></div>'
        "<pre><code>token</code></pre> and finally the KV cache.</p>"
    )
    out = glossary_links.link_terms(html, TERMS, "g/")
    assert links(out) == [("g/#term-kv-cache", "KV cache")]
    assert out.endswith(
        'the <a class="glossary-term" href="g/#term-kv-cache" title="stored keys and values">KV cache</a>.</p>'
    )


def test_whole_words_plurals_and_longest_term_first():
    out = glossary_links.link_terms("<p>A tokenizer makes tokens for draft models.</p>", TERMS, "g/")
    assert links(out) == [("g/#term-token", "tokens"), ("g/#term-draft-model", "draft models")]
    # '推測解碼' contains '解碼': the longer term claims it, and '解碼' links at its own first use.
    out = glossary_links.link_terms("<p>推測解碼比逐一解碼快，推測解碼也更難。</p>", TERMS, "g/")
    assert links(out) == [("g/#term-speculative-decoding", "推測解碼"), ("g/#term-decode", "解碼")]


def test_glossary_rows_get_anchors_from_the_english_term():
    html = "<table><tr><th>English</th></tr><tr>\n<td>KV cache</td><td>KV 快取</td></tr></table>"
    assert '<tr id="term-kv-cache">\n<td>KV cache</td>' in glossary_links.anchor_rows(html)


def test_glossary_parses_both_languages():
    english = glossary_links.glossary_terms(ROOT / "docs" / "glossary.md", "en")
    chinese = glossary_links.glossary_terms(ROOT / "docs" / "glossary.zh-TW.md", "zh-TW")
    assert [t.english for t in english] == [t.english for t in chinese]
    assert {"KV cache", "speculative decoding"} <= {t.text for t in english}
    assert {"KV 快取", "推測解碼"} <= {t.text for t in chinese}
    assert all("\\(" not in t.meaning for t in english + chinese)  # tooltips carry no math delimiters


@pytest.mark.skipif(
    not (ROOT / "site" / "glossary" / "index.html").is_file(), reason="the site is not built (nox -s docs)"
)
def test_built_pages_link_terms_to_existing_glossary_rows():
    import re

    for prefix in ("", "zh-TW/"):
        glossary = (ROOT / "site" / prefix / "glossary" / "index.html").read_text(encoding="utf-8")
        anchors = set(re.findall(r'<tr id="([^"]+)"', glossary))
        assert len(anchors) >= 40, f"{prefix}glossary: rows without anchors"
        for topic in ("decoding", "kvcache", "speculative", "flash", "paged"):
            pages = sorted((ROOT / "site" / prefix / topic).rglob("index.html"))
            assert pages, f"no built pages under {prefix}{topic}/"
            for page in pages:
                found = links(page.read_text(encoding="utf-8"))
                targets = {href.split("#")[1] for href, _ in found}
                assert targets <= anchors, f"{page}: links to missing glossary rows {targets - anchors}"
            assert any(links(p.read_text(encoding="utf-8")) for p in pages), f"{prefix}{topic}: no glossary links"


def test_a_result_file_is_read_as_utf8_under_an_ascii_locale(results, ascii_locale):
    record = {**RECORD, "name": "zh_demo", "values": {"label": "詞元"}}
    (results / "zh_demo.json").write_bytes(json.dumps(record, ensure_ascii=False).encode("utf-8"))
    assert mkdocs_hooks.load_record("zh_demo")["values"] == {"label": "詞元"}
