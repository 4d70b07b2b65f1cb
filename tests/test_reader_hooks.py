"""tools/reader_hooks.py: code-block captions, the whole file behind every copy button, and search
split per language. The built site is checked in a browser by tests/test_browser.py."""

from __future__ import annotations

import html
import json
import math
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import markdown
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import reader_hooks  # noqa: E402

CONFIG = {"repo_url": "https://github.com/inferlab/llm-fast-inference", "docs_dir": str(ROOT / "docs")}


def fake_page(src_uri: str, url: str):
    return SimpleNamespace(file=SimpleNamespace(src_uri=src_uri), url=url)


def render(source: str, page) -> str:
    """Render a page's Markdown as mkdocs would, with this hook before and after, and the site's
    own pymdown configuration (snippets from code/, snippets/ and the repository root)."""
    marked = reader_hooks.on_page_markdown(source, page, CONFIG, None)
    converter = markdown.Markdown(
        extensions=[
            "admonition",
            "pymdownx.details",
            "pymdownx.superfences",
            "pymdownx.highlight",
            "pymdownx.snippets",
        ],
        extension_configs={
            "pymdownx.snippets": {
                "base_path": [str(ROOT / "code"), str(ROOT / "snippets"), str(ROOT)],
                "check_paths": True,
                "dedent_subsections": True,
            },
            "pymdownx.highlight": {"pygments_lang_class": True},
        },
    )
    return reader_hooks.on_page_content(converter.convert(marked), page, CONFIG, None)


def code_texts(rendered: str) -> list[str]:
    """Return the text of every code block, as a reader would see (and select) it."""
    return [
        html.unescape(re.sub(r"<[^>]+>", "", code))
        for code in re.findall(r"<pre[^>]*>.*?<code>(.*?)</code>", rendered, re.S)
    ]


def section_include(path: str) -> str:
    """Return the include of a snippet's first named section."""
    text = (ROOT / "snippets" / path).read_text(encoding="utf-8")
    section = re.search(r"--8<-- \[start:([\w-]+)\]", text).group(1)
    return f'```python\n--8<-- "{path}:{section}"\n```\n'


def snippet_with_section() -> str:
    for path in sorted((ROOT / "snippets").rglob("*.py")):
        if "--8<-- [start:" in path.read_text(encoding="utf-8"):
            return path.relative_to(ROOT / "snippets").as_posix()
    pytest.skip("no snippet has a named section")


def test_an_excerpt_copies_the_whole_file_which_is_also_shown_folded():
    target = snippet_with_section()
    page = fake_page("guide.md", "topic/guide/")
    rendered = render("Intro.\n\n" + section_include(target), page)
    copied = html.unescape(re.search(r'data-copy="([^"]*)"', rendered).group(1))
    # The reference: pymdownx.snippets' own rendering of a whole-file include.
    whole = code_texts(render(f'```python\n--8<-- "{target}"\n```\n', page))[0]
    assert copied.strip() == whole.strip()
    assert "--8<--" not in copied  # pymdown's section markers are not part of what runs
    excerpt, folded = code_texts(rendered)
    assert excerpt.strip() != whole.strip() and excerpt.strip() in whole  # the page shows a part ...
    assert folded.strip() == whole.strip()  # ... and, folded below it, the whole file
    assert '<details class="example inferlab-whole">' in rendered
    assert f'href="../../snippets/{target}" download' in rendered  # served by on_post_build


def test_several_excerpts_of_one_file_fold_in_the_whole_file_once():
    target = snippet_with_section()
    rendered = render(section_include(target) + "\nBetween.\n\n" + section_include(target), fake_page("g.md", "g/"))
    assert rendered.count("inferlab-whole") == 1
    assert rendered.count("data-copy=") == 2  # every excerpt's copy button gives the whole file
    assert rendered.rindex("inferlab-whole") > rendered.rindex("data-copy=")  # after the last excerpt


def test_package_code_is_marked_as_an_excerpt_without_a_copy_button():
    source = '```python\n--8<-- "inferlab/decoding/search.py:greedy"\n```\n'
    rendered = render(source, fake_page("decoding/greedy-vs-map.zh-TW.md", "zh-TW/decoding/greedy-vs-map/"))
    assert "no-copy" in rendered and "data-copy" not in rendered
    assert "節錄自 <code>code/inferlab/decoding/search.py</code>" in rendered  # in the page's language
    start, end = re.search(r"search\.py#L(\d+)-L(\d+)", rendered).groups()
    lines = (ROOT / "code/inferlab/decoding/search.py").read_text(encoding="utf-8").splitlines()
    assert "[start:greedy]" in lines[int(start) - 2] and "[end:greedy]" in lines[int(end)]


def test_a_snippet_caption_names_its_downloads_and_its_colab_lab():
    labs = reader_hooks.lab_of_snippet()
    model_snippets = [
        path.relative_to(ROOT / "snippets").as_posix()
        for path in sorted((ROOT / "snippets").rglob("*.py"))
        if "INFERLAB_TARGET" in path.read_text(encoding="utf-8")
    ]
    target = next(path for path in model_snippets if path in labs)
    rendered = render(f'```python\n--8<-- "{target}"\n```\n', fake_page("g.md", "g/"))
    model = re.search(r'"INFERLAB_TARGET", "([^"]+)"', (ROOT / "snippets" / target).read_text()).group(1)
    assert f"<code>{model}</code> ({reader_hooks.HUB_DOWNLOAD[model]})" in rendered
    assert f"colab.research.google.com/github/inferlab/llm-fast-inference/blob/main/docs/labs/{labs[target]}.ipynb" in (
        rendered
    )
    assert "inferlab-whole" not in rendered  # the page already shows the whole file
    assert 'href="../models/#colab"' in rendered  # how to run it on the bundled pair instead


def test_the_documented_colab_cell_points_the_snippets_at_the_bundled_pair(tmp_path):
    """The models page's Colab cell: pip installs the package; its one line of Python must set both
    variables to model folders that transformers can load (here from the installed package)."""
    cells = []
    for page in ("models/index.md", "models/index.zh-TW.md"):
        text = (ROOT / "docs" / page).read_text(encoding="utf-8")
        cells += re.findall(r"```ipython\n(.*?)```", text, re.S)
    assert len(cells) == 2 and cells[0] == cells[1], "one Colab cell, the same on both language pages"
    assert "pip install" in cells[0] and "git+https://github.com/inferlab/llm-fast-inference" in cells[0]
    python = "\n".join(line for line in cells[0].splitlines() if not line.startswith("%"))
    check = python + '\nprint(os.environ["INFERLAB_TARGET"]); print(os.environ["INFERLAB_DRAFT"])'
    result = subprocess.run(
        [sys.executable, "-I", "-c", check], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    for folder in map(Path, result.stdout.split()):
        assert (folder / "config.json").is_file() and (folder / "model.safetensors").is_file(), folder


def test_every_snippet_a_page_includes_runs_in_some_lab():
    """Each caption's "Open in Colab" link needs a lab notebook that runs the snippet."""
    included = set()
    for page in (ROOT / "docs").rglob("*.md"):
        for target in re.findall(r'^\s*--8<--\s+"([^"]+)"', page.read_text(encoding="utf-8"), re.M):
            path = reader_hooks.resolve_include(target)
            if path.parts[0] == "snippets":
                included.add(path.relative_to("snippets").as_posix())
    missing = sorted(included - set(reader_hooks.lab_of_snippet()))
    assert not missing, f"snippets on pages but in no notebooks/*.py lab (no Colab link): {missing}"


def test_every_snippet_default_model_has_a_stated_download_size():
    for path in sorted((ROOT / "snippets").rglob("*.py")):
        for model in reader_hooks.default_models(path.read_text(encoding="utf-8")):
            assert model in reader_hooks.HUB_DOWNLOAD, f"{path.name}: add {model}'s size to HUB_DOWNLOAD"


def test_a_model_unknown_to_the_size_table_fails_the_build(tmp_path, monkeypatch):
    snippets = tmp_path / "snippets"
    snippets.mkdir()
    (snippets / "s.py").write_text('import os\nTARGET = os.environ.get("INFERLAB_TARGET", "someone/huge-model")\n')
    monkeypatch.setattr(reader_hooks, "ROOT", tmp_path)
    from mkdocs.exceptions import PluginError

    with pytest.raises(PluginError, match="someone/huge-model"):
        reader_hooks.snippet_caption("s.py", fake_page("g.md", "g/"), CONFIG, "en")


def test_search_index_is_split_per_language(tmp_path):
    docs = [
        {"location": "", "title": "Home", "text": "flash attention"},
        {"location": "flash/tiling/", "title": "Tiling", "text": "online softmax"},
        {"location": "labs/flash/#setup", "title": "Set up¶", "text": ""},
        {"location": "zh-TW/", "title": "首頁", "text": "推測\u200b解碼"},
        {"location": "zh-TW/courses/cs181-hw6/#part-3", "title": "第 3 部分", "text": ""},
        {"location": "zh-TW/flash/tiling/#_1", "title": "分塊", "text": "線上 softmax"},
    ]
    (tmp_path / "search").mkdir()
    index = {"config": {"lang": ["en", "zh"]}, "docs": docs}
    (tmp_path / "search" / "search_index.json").write_text(json.dumps(index), encoding="utf-8")
    reader_hooks.split_search_index(tmp_path)
    en = json.loads((tmp_path / "search" / "search_index.json").read_text(encoding="utf-8"))
    zh = json.loads((tmp_path / "zh-TW" / "search" / "search_index.json").read_text(encoding="utf-8"))
    assert [d["location"] for d in en["docs"]] == ["", "flash/tiling/", "labs/flash/#setup"]
    assert [d["location"] for d in zh["docs"]] == ["", "courses/cs181-hw6/#part-3", "flash/tiling/#_1"]
    assert en["config"] == zh["config"] == index["config"]
    assert en["docs"][2]["title"] == "Set up"  # no stray permalink sign
    boosted = {d["location"] for d in en["docs"] + zh["docs"] if d.get("boost")}
    assert boosted == {"", "courses/cs181-hw6/#part-3"}  # home and course maps rank below the guides
    reader_hooks.split_search_index(tmp_path)  # a second call (mkdocs-static-i18n builds twice) keeps it
    assert json.loads((tmp_path / "search" / "search_index.json").read_text(encoding="utf-8")) == en


def test_zh_pages_search_their_own_index():
    output = '<script id="__config" type="application/json">{"annotate": null, "base": "../../..", "x": 1}</script>'
    page = fake_page("flash/tiling.zh-TW.md", "zh-TW/flash/tiling/")
    assert '"base": "../.."' in reader_hooks.on_post_page(output, page, CONFIG)
    home = fake_page("index.zh-TW.md", "zh-TW/")
    assert '"base": "."' in reader_hooks.on_post_page(output.replace("../../..", ".."), home, CONFIG)
    english = fake_page("flash/tiling.md", "flash/tiling/")
    assert reader_hooks.on_post_page(output, english, CONFIG) == output


def test_jieba_keeps_glossary_terms_whole():
    jieba = pytest.importorskip("jieba")
    words = reader_hooks.glossary_words(ROOT / "docs" / "glossary.zh-TW.md")
    assert "推測解碼" in words and "繁體中文" not in words  # terms, not the header row
    reader_hooks.on_config(CONFIG)
    assert "推測解碼" in list(jieba.cut("什麼是推測解碼"))


# ---- issue 16: a guide's Colab button, figures on a phone, edit links and dates ----------------


def lab_snippet() -> tuple[str, str]:
    """Return (a snippet some lab runs, that lab)."""
    labs = reader_hooks.lab_of_snippet()
    assert labs, "no lab includes a snippet"
    return next(iter(sorted(labs.items())))


@pytest.mark.parametrize("language, suffix", [("en", ""), ("zh-TW", ".zh-TW")])
def test_a_guide_with_a_labs_snippet_gets_an_open_in_colab_button(language, suffix):
    snippet, lab = lab_snippet()
    url = "zh-TW/guide/" if language == "zh-TW" else "guide/"
    page = fake_page(f"guide{suffix}.md", url)
    rendered = render(f'# A guide\n\nSome prose.\n\n```python\n--8<-- "{snippet}"\n```\n', page)
    button = re.search(r'<p class="inferlab-colab"><a class="md-button[^"]*" href="([^"]+)">', rendered)
    assert button, rendered[:500]
    assert (
        button.group(1)
        == f"https://colab.research.google.com/github/inferlab/llm-fast-inference/blob/main/docs/labs/{lab}{suffix}.ipynb"
    )
    assert rendered.index("</h1>") < button.start(), "the button goes under the title"
    # A guide whose code no lab runs (package excerpts only) gets none.
    plain = render('# A guide\n\n```python\n--8<-- "inferlab/decoding/sampling.py"\n```\n', fake_page("g.md", "g/"))
    assert "inferlab-colab" not in plain


def test_a_figure_gets_the_width_its_smallest_text_needs_and_a_scroll_box(tmp_path):
    """The least width comes from the size save_figure records: 7.5 px text, whatever the figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from inferlab.bench.figures import save_figure

    docs = tmp_path / "docs"
    fig, ax = plt.subplots(figsize=(10, 3))  # wide, with matplotlib's 10-point tick labels
    ax.plot([0, 1], [1, 2], label="standard")
    ax.set_xlabel("sequence length N")
    ax.legend(fontsize=7)  # the smallest text: 7 pt at 100 dpi is 7 * 100 / 72 = 9.72 px
    save_figure(fig, docs / "figures" / "t" / "wide.png", dpi=100)
    plt.close(fig)
    width, smallest = reader_hooks.png_facts(docs / "figures" / "t" / "wide.png")
    assert width == 1000 and smallest == pytest.approx(7 * 100 / 72, abs=0.01)
    config = {**CONFIG, "docs_dir": str(docs)}
    source = '<p><img alt="A wide figure" src="../../figures/t/wide.png" /></p>'
    out = reader_hooks.legible_figures(source, fake_page("t/page.md", "t/page/"), config)
    least = int(re.search(r"min-width: (\d+)px", out).group(1))
    assert reader_hooks.LEGIBLE_TEXT_PX == 7.5
    assert least == math.ceil(1000 * 7.5 / smallest)  # ceil(width * 7.5 px / smallest)
    assert least * smallest / width >= 7.5 > (least - 1) * smallest / width
    assert out.startswith('<div class="inferlab-figure"><img alt="A wide figure"') and out.endswith("</div>")
    # On a zh-TW page the zh-TW file is measured; inside other text the box is a <span>.
    inline = reader_hooks.legible_figures(
        '<li>see <img src="../../../figures/t/wide.png"></li>', fake_page("t/page.zh-TW.md", "zh-TW/t/page/"), config
    )
    assert '<span class="inferlab-figure"><img src=' in inline and "min-width" in inline


def git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True, text=True).stdout


def dates_config(docs: Path):
    plugin = SimpleNamespace(config={"enabled": True})
    return {"docs_dir": str(docs), "plugins": {reader_hooks.GIT_DATES_PLUGIN: plugin}}, plugin


def test_dates_are_turned_off_in_a_shallow_clone_or_outside_git(tmp_path):
    """A shallow clone would date every page with its one commit; a folder outside git has no dates."""
    source = tmp_path / "source"
    (source / "docs").mkdir(parents=True)
    git(source, "init", "-q")
    for number in range(2):
        (source / "docs" / "page.md").write_text(f"# Page {number}\n")
        git(source, "add", ".")
        git(source, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", f"commit {number}")
    full, plugin = dates_config(source / "docs")
    reader_hooks.without_dates_unless_full_history(full)
    assert plugin.config["enabled"] is True
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{source}", str(tmp_path / "shallow")], check=True)
    shallow, plugin = dates_config(tmp_path / "shallow" / "docs")
    reader_hooks.without_dates_unless_full_history(shallow)
    assert plugin.config["enabled"] is False
    (tmp_path / "plain" / "docs").mkdir(parents=True)
    outside, plugin = dates_config(tmp_path / "plain" / "docs")
    reader_hooks.without_dates_unless_full_history(outside)
    assert plugin.config["enabled"] is False


def built(path: str) -> str:
    page = ROOT / "site" / path / "index.html"
    if not page.is_file():
        pytest.skip("the site is not built (nox -s docs)")
    return page.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "path, source", [("kvcache/kv-cache/", "kv-cache.md"), ("zh-TW/kvcache/kv-cache/", "kv-cache.zh-TW.md")]
)
def test_a_page_links_to_editing_its_own_source(path, source):
    assert f'href="https://github.com/inferlab/llm-fast-inference/edit/main/docs/kvcache/{source}"' in built(path)


def test_a_lab_page_edits_its_notebook_source_not_the_generated_notebook():
    page = built("zh-TW/labs/decoding/")
    assert 'href="https://github.com/inferlab/llm-fast-inference/edit/main/notebooks/decoding.zh-TW.py"' in page
    assert "edit/main/docs/labs/" not in page


def test_a_page_shows_the_date_of_its_last_commit():
    """The reference is git's own log for the file; only a checkout with its whole history has dates."""
    if reader_hooks.full_git_history(ROOT / "docs"):
        pytest.skip("not a full git checkout: the build shows no dates")
    import datetime

    page = built("kvcache/kv-cache/")
    stamp = git(ROOT, "log", "-1", "--format=%at", "--", "docs/kvcache/kv-cache.md").strip()
    day = datetime.datetime.fromtimestamp(int(stamp), datetime.timezone.utc)
    shown = re.search(r'git-revision-date-localized-plugin-date"[^>]*>([^<]+)<', page)
    assert shown, "no last-update date on the page"
    assert shown.group(1) == f"{day:%B} {day.day}, {day.year}"
    chinese = re.search(r'git-revision-date-localized-plugin-date"[^>]*>([^<]+)<', built("zh-TW/kvcache/kv-cache/"))
    stamp = git(ROOT, "log", "-1", "--format=%at", "--", "docs/kvcache/kv-cache.zh-TW.md").strip()
    day = datetime.datetime.fromtimestamp(int(stamp), datetime.timezone.utc)
    assert chinese and chinese.group(1) == f"{day.year}年{day.month}月{day.day}日"
