"""Bilingual parity, glossary use and snippet hygiene, and proof that each check can fail."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import sitecheck  # noqa: E402

from inferlab import snippetsync  # noqa: E402

DOCS = ROOT / "docs"
BASE_PATHS = [ROOT / "code", ROOT / "snippets", ROOT]
PAIRS, MISSING = sitecheck.page_pairs(DOCS)
# What a reader's fresh Colab has: the standard library plus these.
ALLOWED_SNIPPET_IMPORTS = {"torch", "transformers", "matplotlib", "numpy", "tqdm"}


def pair_id(pair):
    return str(pair[0].relative_to(DOCS))


def test_every_page_has_its_translation():
    assert not MISSING, "\n".join(MISSING)


@pytest.mark.parametrize("pair", PAIRS, ids=pair_id)
def test_translation_has_same_structure(pair):
    problems = sitecheck.parity_problems(*pair)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("pair", PAIRS, ids=pair_id)
def test_translation_uses_glossary_terms(pair):
    terms = sitecheck.glossary_terms(DOCS / "glossary.md")
    problems = sitecheck.glossary_problems(*pair, terms)
    assert not problems, "\n".join(problems)


def test_glossaries_list_the_same_terms():
    en = sitecheck.glossary_terms(DOCS / "glossary.md")
    zh = sitecheck.glossary_terms(DOCS / "glossary.zh-TW.md")
    assert en == zh


@pytest.mark.parametrize("page", sorted(DOCS.rglob("*.md")), ids=lambda p: str(p.relative_to(DOCS)))
def test_snippet_includes_exist(page):
    problems = sitecheck.snippet_problems(page, BASE_PATHS)
    assert not problems, "\n".join(problems)


def test_generated_snippet_code_is_fresh():
    stale = snippetsync.stale_snippets(ROOT / "snippets")
    assert not stale, f"stale generated code in {stale}; run python -m inferlab.snippetsync"


def imported_top_modules(path: Path) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            modules |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module.split(".")[0])
    return modules


@pytest.mark.parametrize("snippet", sorted((ROOT / "snippets").rglob("*.py")), ids=lambda p: p.name)
def test_snippets_import_only_what_colab_has(snippet):
    foreign = {m for m in imported_top_modules(snippet) if m not in sys.stdlib_module_names} - ALLOWED_SNIPPET_IMPORTS
    assert not foreign, (
        f"{snippet} imports {sorted(foreign)}; a reader's Colab has only {sorted(ALLOWED_SNIPPET_IMPORTS)}"
    )


# ---- each check must be able to fail -------------------------------------------------------

GOOD_EN = """# Title

Text with a [link](other.md) and the KV cache.

!!! note "Note"
    Body.

```python
--8<-- "inferlab/bench/__init__.py"
```

![plot](figures/x.png)

{{result demo value .2f}}
"""
GOOD_ZH = """# 標題

有一個[連結](other.md)，還有 KV 快取。

!!! note "附註"
    內容。

```python
--8<-- "inferlab/bench/__init__.py"
```

![圖](figures/x.png)

{{result demo value .2f}}
"""


def write_pair(tmp_path: Path, en: str, zh: str | None) -> tuple[Path, Path]:
    (tmp_path / "page.md").write_text(en, encoding="utf-8")
    if zh is not None:
        (tmp_path / "page.zh-TW.md").write_text(zh, encoding="utf-8")
    return tmp_path / "page.md", tmp_path / "page.zh-TW.md"


def test_parity_check_passes_a_good_pair(tmp_path):
    en, zh = write_pair(tmp_path, GOOD_EN, GOOD_ZH)
    assert sitecheck.parity_problems(en, zh) == []
    assert sitecheck.glossary_problems(en, zh, [("KV cache", "KV 快取")]) == []


@pytest.mark.parametrize(
    "breakage, feature",
    [
        (("## 多一個標題\n", ""), "headings"),
        (('--8<-- "inferlab/bench/__init__.py"', '--8<-- "inferlab/snippetsync.py"'), "snippet includes"),
        (("figures/x.png", "figures/y.png"), "images"),
        (('!!! note "附註"\n    內容。\n', ""), "admonitions"),
        (("(other.md)", "(else.md)"), "links"),
        (("{{result demo value .2f}}", "0.42"), "result markers"),
        (("```python\n--8<--", "```text\nx\n```\n```python\n--8<--"), "code blocks"),
    ],
)
def test_parity_check_catches_a_broken_pair(tmp_path, breakage, feature):
    old, new = breakage
    broken = GOOD_ZH + old if feature == "headings" else GOOD_ZH.replace(old, new)
    assert broken != GOOD_ZH
    en, zh = write_pair(tmp_path, GOOD_EN, broken)
    problems = sitecheck.parity_problems(en, zh)
    assert len(problems) == 1 and feature in problems[0] and "page.zh-TW.md" in problems[0]


def test_missing_translation_is_named(tmp_path):
    write_pair(tmp_path, GOOD_EN, None)
    pairs, problems = sitecheck.page_pairs(tmp_path)
    assert pairs == [] and problems == ["page.md: missing translation page.zh-TW.md"]


def test_glossary_check_catches_an_unused_term(tmp_path):
    en, zh = write_pair(tmp_path, GOOD_EN, GOOD_ZH.replace("KV 快取", "鍵值暫存"))
    problems = sitecheck.glossary_problems(en, zh, [("KV cache", "KV 快取")])
    assert len(problems) == 1 and "KV 快取" in problems[0]


def test_snippet_check_catches_missing_file_and_section(tmp_path):
    page = tmp_path / "p.md"
    page.write_text(
        '--8<-- "inferlab/nope.py"\n--8<-- "inferlab/snippetsync.py:no_such_section"\n'
        '--8<-- "inferlab/snippetsync.py"\n',
        encoding="utf-8",
    )
    problems = sitecheck.snippet_problems(page, BASE_PATHS)
    assert len(problems) == 2
    assert "nope.py" in problems[0] and "no_such_section" in problems[1]


def test_snippetsync_detects_and_fixes_a_stale_copy(tmp_path):
    code = tmp_path / "code" / "pkg"
    code.mkdir(parents=True)
    (code / "m.py").write_text("x = 0\n# --8<-- [start:sq]\ndef sq(v):\n    return v * v\n# --8<-- [end:sq]\n")
    snippets = tmp_path / "snippets"
    snippets.mkdir()
    stale = "# >>> generated from pkg/m.py:sq (sync)\ndef sq(v):\n    return v + v\n# <<< generated\nprint(sq(3))\n"
    (snippets / "s.py").write_text(stale)
    assert snippetsync.stale_snippets(snippets, tmp_path / "code") == [snippets / "s.py"]
    fixed = snippetsync.synced(stale, tmp_path / "code")
    assert "return v * v" in fixed and "return v + v" not in fixed and fixed.endswith("print(sq(3))\n")


# ---- one term per concept --------------------------------------------------------------------

TERM_CHECKED = sorted(DOCS.rglob("*.md")) + sorted((ROOT / "notebooks").glob("*.py"))


@pytest.mark.parametrize("path", TERM_CHECKED, ids=lambda p: str(p.relative_to(ROOT)))
def test_one_term_per_concept(path):
    problems = sitecheck.term_problems(path)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    "name, text, word",
    [
        ("page.md", "## Check yourself\n", "Check yourself"),
        ("page.zh-TW.md", "## 自我檢測\n", "自我檢測"),
        ("page.zh-TW.md", "權重佔用記憶體。\n", "佔"),
        ("page.zh-TW.md", "所以是 {{result x y}}-bound。\n", "-bound"),
        ("page.zh-TW.md", "它是 memory-bound 的。\n", "memory-bound"),
        ("page.zh-TW.md", "見[預填與解碼](p.md)。\n", "預填與解碼"),
        ("lab.zh-TW.py", "# %% [markdown]\n# ## 自我檢測\n\n# %%\nx = 1\n", "自我檢測"),
    ],
)
def test_term_check_catches_a_replaced_term(tmp_path, name, text, word):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    problems = sitecheck.term_problems(path)
    assert len(problems) == 1 and repr(word) in problems[0] and name in problems[0]


def test_term_check_passes_the_chosen_terms(tmp_path):
    zh = tmp_path / "page.zh-TW.md"
    zh.write_text(
        "## 自我檢查\n權重占用記憶體，所以受限於記憶體。見[預填與解碼階段](p.md)。`memory-bound` 是程式碼。\n"
    )
    en = tmp_path / "page.md"
    en.write_text("## Self-check\nStandard attention is memory-bound; decode is memory-bound too.\n")
    assert sitecheck.term_problems(zh) == [] and sitecheck.term_problems(en) == []
