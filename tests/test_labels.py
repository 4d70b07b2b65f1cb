"""Tables and figures speak the page's language: no snake_case keys, no English labels on zh-TW pages."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from inferlab.bench import labels

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import mkdocs_hooks  # noqa: E402

DOCS = ROOT / "docs"
TABLE_MARKER = re.compile(r"\{\{table\s+(\S+)\s+(\S+)\s*\}\}")
SNAKE_CASE = re.compile(r"\b[A-Za-z0-9]+_[A-Za-z0-9_]+\b")


def table_markers() -> list[tuple[str, str, str]]:
    """Return (page, result name, key) for every {{table}} marker on every page."""
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        for name, key in TABLE_MARKER.findall(page.read_text(encoding="utf-8")):
            found.append((str(page.relative_to(DOCS)), name, key))
    return found


def table_cells(markdown: str) -> tuple[list[str], list[list[str]]]:
    """Return the header cells and the body rows of a Markdown table."""
    lines = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in markdown.splitlines()]
    return lines[0], lines[2:]


@pytest.mark.parametrize("page, name, key", table_markers(), ids=lambda v: str(v))
def test_result_tables_show_words_in_the_page_language(page, name, key):
    language = "zh-TW" if page.endswith(".zh-TW.md") else "en"
    record = mkdocs_hooks.load_record(name)
    headers, rows = table_cells(mkdocs_hooks.render_table(record, key, language))
    problems = labels.table_problems(mkdocs_hooks.lookup(record, key))
    assert not problems, f"{page}: {problems} (in inferlab/bench/labels.py)"
    assert not [h for h in headers if SNAKE_CASE.search(h)], f"{page}: snake_case headers {headers}"
    if language == "zh-TW":
        english = {h: labels.english_words(h) for h in headers if labels.english_words(h)}
        assert not english, f"{page}: English in zh-TW headers {english}"
        assert not [cell for row in rows for cell in row if cell in ("True", "False", "None")], f"{page}: {rows}"


def test_a_header_or_label_without_a_translation_is_caught():
    assert labels.table_problems([{"no_such_column": "a label nobody translated", "token": "the"}]) == [
        "add column 'no_such_column' to COLUMNS",
        "add label 'a label nobody translated' (column 'no_such_column') to CELLS or PATTERNS",
    ]
    # Both halves of the check above can fail: a snake_case key and an English row label.
    assert SNAKE_CASE.search(labels.column_label("no_such_column", "zh-TW"))
    assert labels.english_words(labels.cell_label("a label nobody translated", "zh-TW")) == [
        "label",
        "nobody",
        "translated",
    ]
    assert labels.english_words("首詞元延遲（毫秒）、T4、GPU、KiB、top-k、fp16") == []


def test_labels_translate_headers_and_rows():
    assert labels.column_label("naive_s", "en") == "naive loop (s)"
    assert labels.column_label("naive_s", "zh-TW") == "無快取迴圈（秒）"
    assert labels.cell_label("space before document", "zh-TW") == "文件前加一個空格"
    assert labels.cell_label("T=0.7", "zh-TW") == "T=0.7"  # a setting written as a formula stays
    with pytest.raises(ValueError, match="language must be one of"):
        labels.column_label("naive_s", "fr")


def test_every_label_has_both_languages_and_zh_has_no_stray_english():
    for table in (labels.COLUMNS, labels.CELLS):
        for key, (english, chinese) in table.items():
            assert english and chinese, key
            assert not labels.english_words(chinese), f"{key!r}: zh-TW label {chinese!r} has English words"


# ---- figures, drawn once per language ------------------------------------------------------

FIGURE_LINK = re.compile(r"!\[[^\]]*\]\(([^)\s]*figures/[^)\s]+\.png)\)")


def zh_page_figures() -> list[str]:
    """Return the docs-relative path of every figure a zh-TW page shows."""
    found = set()
    for page in sorted(DOCS.rglob("*.zh-TW.md")):
        for link in FIGURE_LINK.findall(page.read_text(encoding="utf-8")):
            found.add((page.parent / link).resolve().relative_to(DOCS).as_posix())
    return sorted(found)


@pytest.mark.parametrize("figure", zh_page_figures())
def test_every_figure_on_a_zh_page_has_a_zh_version(figure):
    from inferlab.bench.figures import language_path

    assert language_path(DOCS / figure, "zh-TW").is_file(), (
        f"{figure}: no zh-TW version (python tools/redraw_figures.py)"
    )


def draw(title: str, xlabel: str = "sequence length N", ticks: tuple[str, ...] = ()):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1], [1, 4], label="standard")
    ax.set(title=title, xlabel=xlabel)
    if ticks:
        ax.set_xticks(range(len(ticks)), ticks)
    ax.legend()
    return fig


def texts_of(fig) -> set[str]:
    from inferlab.bench.figures import figure_texts

    return {text.get_text() for text in figure_texts(fig)}


def test_a_figure_is_saved_in_both_languages_from_one_drawing(tmp_path):
    from inferlab.bench.figures import save_figure

    fig = draw("HBM traffic, one head, d = 64", ticks=("first", "identical"))
    english = texts_of(fig)
    paths = save_figure(fig, tmp_path / "traffic.png", dpi=50)
    assert [p.name for p in paths] == ["traffic.png", "traffic.zh-TW.png"] and all(p.is_file() for p in paths)
    chinese = texts_of(fig)  # the figure now holds what the zh-TW file shows
    assert {"HBM 流量，單一注意力頭，d = 64", "序列長度 N", "標準", "第一次", "完全相同"} <= chinese
    assert english & {"HBM traffic, one head, d = 64", "sequence length N", "standard", "first"}
    assert not [t for t in chinese if labels.english_words(t)]
    assert paths[0].read_bytes() != paths[1].read_bytes()


def test_a_figure_with_untranslated_text_is_refused_before_anything_is_written(tmp_path):
    from inferlab.bench.figures import save_figure

    with pytest.raises(ValueError, match="a title nobody translated"):
        save_figure(draw("a title nobody translated"), tmp_path / "x.png")
    assert list(tmp_path.iterdir()) == []


def test_code_in_a_monospace_font_is_shown_as_it_is(tmp_path):
    from inferlab.bench.figures import save_figure

    fig = draw("Measured time")
    fig.axes[0].set_xticks([0, 1], ["·print", "·sorted"], family="monospace")
    save_figure(fig, tmp_path / "tokens.png", dpi=50)
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["·print", "·sorted"]


def test_the_redraw_tool_knows_every_topic_whose_figures_the_pages_show():
    """tools/redraw_figures.py redraws a topic's figures from its result files; none may be left out."""
    import redraw_figures

    shown = {figure.split("/")[1] for figure in zh_page_figures()}
    assert shown <= set(redraw_figures.TOPICS), f"no redraw function for {sorted(shown - set(redraw_figures.TOPICS))}"
