"""Lab notebooks match their sources and run top to bottom, offline, on the bundled pair."""

from __future__ import annotations

import ast
import html.parser
import os
import re
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import notebooks  # noqa: E402

SOURCES = sorted(notebooks.SOURCES.glob("*.py"))
ENGLISH = [s for s in SOURCES if not s.name.endswith(".zh-TW.py")]
# What a reader's fresh Colab has: the standard library plus these (as for the snippets).
COLAB_PACKAGES = {"torch", "transformers", "matplotlib", "numpy", "tqdm"}


def rendered(source: Path):
    return nbformat.read(notebooks.notebook_path(source), as_version=4)


def code_of(notebook) -> list[str]:
    return [cell.source for cell in notebook.cells if cell.cell_type == "code"]


def test_every_notebook_has_both_languages():
    names = {s.name.removesuffix(".py") for s in SOURCES}
    for name in names:
        twin = name.removesuffix(".zh-TW") if name.endswith(".zh-TW") else name + ".zh-TW"
        assert twin in names, f"notebooks/{name}.py has no twin notebooks/{twin}.py"


@pytest.mark.parametrize("source", ENGLISH, ids=lambda p: p.name)
def test_twins_have_the_same_code_and_structure(source):
    english, chinese = jupytext.read(source), jupytext.read(notebooks.twin_of(source))
    assert code_of(english) == code_of(chinese), f"{source.name}: the zh-TW twin's code cells differ"
    assert [c.cell_type for c in english.cells] == [c.cell_type for c in chinese.cells]
    for number, (en, zh) in enumerate(zip(english.cells, chinese.cells, strict=True), start=1):
        if en.cell_type == "markdown":
            assert headings(en.source) == headings(zh.source), f"{source.name} cell {number}: headings differ"
            assert en.source.count("](") == zh.source.count("]("), f"{source.name} cell {number}: links differ"


def headings(markdown: str) -> list[str]:
    """Return the level markers ("#", "##", ...) of a Markdown cell's headings, in order."""
    return [line.split(" ")[0] for line in markdown.splitlines() if line.startswith("#")]


def test_rendered_notebooks_match_their_sources():
    assert notebooks.stale(SOURCES) == [], "run python tools/notebooks.py"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_rendered_notebook_shows_its_outputs(source):
    notebook = rendered(source)
    for number, cell in enumerate(notebook.cells, start=1):
        if cell.cell_type != "code":
            continue
        assert cell.execution_count is not None, f"{source.name} cell {number} was never executed"
        assert all(o.output_type != "error" for o in cell.outputs), f"{source.name} cell {number} failed"
    assert any(cell.get("outputs") for cell in notebook.cells), f"{source.name}: no outputs at all"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_badge_opens_this_notebook_in_colab_and_links_its_download(source):
    repo = re.search(r"^repo_url:\s*https://github\.com/(\S+?)/?$", (ROOT / "mkdocs.yml").read_text(), re.M).group(1)
    file = source.name.removesuffix(".py") + ".ipynb"
    colab = f"https://colab.research.google.com/github/{repo}/blob/main/docs/labs/{file}"
    top = "\n".join(cell.source for cell in rendered(source).cells[:2])
    assert f"]({colab})" in top, f"{source.name}: no Colab link to {colab} at the top"
    assert f"]({file})" in top, f"{source.name}: no download link to {file} at the top"
    assert (ROOT / "docs" / "labs" / file).is_file()
    assert "data:image/svg+xml;base64," in top  # the badge loads from nowhere else (offline site)


def without_magics(code: str) -> str:
    """IPython lines (%pip, !cmd) are not Python: replace them by `pass` at the same indent."""
    return re.sub(r"^(\s*)[%!].*$", r"\1pass", code, flags=re.M)


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_notebook_imports_only_what_colab_has(source):
    modules = set()
    for code in code_of(notebooks.render(source)):
        for node in ast.walk(ast.parse(without_magics(code))):
            if isinstance(node, ast.Import):
                modules |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    foreign = {m for m in modules if m not in sys.stdlib_module_names} - COLAB_PACKAGES
    assert not foreign, f"{source.name} imports {sorted(foreign)}, which Colab lacks"
    first = code_of(notebooks.render(source))[0]
    assert "find_spec" in first and "%pip install" in first, (
        f"{source.name}: the first code cell must install what is missing"
    )


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_links_to_guides_reach_a_page(source):
    # A lab renders at labs/<name>/, so "../../kvcache/kv-cache/" is docs/kvcache/kv-cache.md.
    text = "\n".join(c.source for c in jupytext.read(source).cells if c.cell_type == "markdown")
    for link in re.findall(r"\]\((\.\./\.\./[^)]+)\)", text):
        page = ROOT / "docs" / (link.removeprefix("../../").rstrip("/") + ".md")
        assert page.is_file(), f"{source.name} links to {link}, but {page.relative_to(ROOT)} does not exist"


# ---- the include mechanism, on a throwaway tree --------------------------------------------


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A notebooks/ + snippets/ + docs/labs/ tree with one source that includes one snippet."""
    for folder, name in (("notebooks", "SOURCES"), ("snippets", "SNIPPETS"), ("labs", "LABS")):
        (tmp_path / folder).mkdir()
        monkeypatch.setattr(notebooks, name, tmp_path / folder)
    (tmp_path / "snippets" / "demo").mkdir()
    (tmp_path / "snippets" / "demo" / "hello.py").write_text('"""Say hello."""\n\nprint("hello")\n')
    source = tmp_path / "notebooks" / "lab.py"
    source.write_text('# %% [markdown]\n# # A lab\n\n# %%\n# --8<-- "demo/hello.py"\n\n# %%\nx = 1\n')
    return tmp_path, source


def test_include_line_becomes_the_snippet_text(tree):
    tmp_path, source = tree
    code = code_of(notebooks.render(source))
    snippet = (tmp_path / "snippets" / "demo" / "hello.py").read_text()
    assert code[0].endswith(snippet.strip()) and code[0].count("\n") == snippet.strip().count("\n") + 1
    assert code[1] == "x = 1"  # other cells stay as written


def test_changed_snippet_makes_the_notebook_stale(tree):
    tmp_path, source = tree
    nbformat.write(notebooks.render(source), notebooks.notebook_path(source))
    assert notebooks.stale([source]) == []
    (tmp_path / "snippets" / "demo" / "hello.py").write_text('print("hello, world")\n')
    assert notebooks.stale([source]) == [source]
    assert notebooks.main(["--check"]) == 1


def test_notebook_without_a_rendering_is_stale(tree):
    _, source = tree
    assert notebooks.stale([source]) == [source]


@pytest.mark.parametrize(
    "cell, message",
    [
        ('# --8<-- "demo/missing.py"', "snippets/demo/missing.py does not exist"),
        ('# --8<-- "../notebooks/lab.py"', "must be a .py file under snippets/"),
        ('# --8<-- "demo/hello.py"\nprint(2)', "must hold only that line"),
    ],
)
def test_bad_include_is_refused_by_name(tree, cell, message):
    _, source = tree
    source.write_text(f"# %%\n{cell}\n")
    with pytest.raises(ValueError, match=re.escape(message)):
        notebooks.render(source)


@pytest.mark.slow
@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_notebook_runs_top_to_bottom(source, monkeypatch):
    from inferlab.models import bundled_available

    if not bundled_available():
        pytest.fail("the bundled model pair is missing; the notebooks run on it")
    # execute() sets environment variables; keep them local to this test.
    monkeypatch.setattr(os, "environ", dict(os.environ))
    notebook = notebooks.render(source)
    notebooks.execute(notebook)  # raises CellExecutionError, naming the cell, on any error
    errors = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert errors == []


# ---- math and paths a reader sees (issue 16) ----------------------------------------------


def test_math_in_latex_delimiters_is_refused(tree):
    _, source = tree
    source.write_text("# %% [markdown]\n# The rate \\(\\alpha\\) of acceptance.\n")
    with pytest.raises(ValueError, match=r"write math as \$\.\.\.\$"):
        notebooks.render(source)


def test_notebook_math_renders_as_the_pages_math():
    """nbconvert's Markdown (what mkdocs-jupyter uses) gives the elements the site's MathJax typesets."""
    import reader_hooks
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    reader_hooks.notebook_math_as_arithmatex()
    html = markdown2html_mistune("kept with probability $\\min(1, p/q)$, and\n\n$$V^T$$\n")
    assert '<span class="arithmatex">\\(\\min(1, p/q)\\)</span>' in html
    assert '<div class="arithmatex">\\[V^T\\]</div>' in html
    assert "$" not in html


# A path only this repository has: the outputs a reader sees next to "run this in Colab" must not
# print one (the set-up cell links the installed package's pair as inferlab-pair/ instead).
REPOSITORY_PATH = re.compile(r"\.\./|code/inferlab|docs/labs|/work/|/home/|/tmp/")


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_saved_outputs_print_no_repository_path(source):
    for number, cell in enumerate(rendered(source).cells, start=1):
        for output in cell.get("outputs", []):
            text = output.get("text", "") + str(output.get("data", {}).get("text/plain", ""))
            assert not REPOSITORY_PATH.search(text), f"{source.name} cell {number} prints a path: {text[:300]!r}"


@pytest.mark.parametrize("source", ENGLISH, ids=lambda p: p.name)
def test_the_pair_is_installed_from_this_sites_repository(source):
    repo = re.search(r"^repo_url:\s*(\S+?)/?$", (ROOT / "mkdocs.yml").read_text(), re.M).group(1)
    installs = set(re.findall(r'%pip install -q "git\+(\S+?)"', source.read_text(encoding="utf-8")))
    assert installs <= {repo}, f"{source.name}: installs {installs}, the site's repo is {repo}"
    if "SITE_PAIR" in source.read_text(encoding="utf-8"):
        assert installs == {repo}, f"{source.name}: SITE_PAIR without installing the site's package"


# TeX a reader would see as text: LaTeX delimiters, $$, $...$ holding a command, a bare command,
# or a superscript.
RAW_TEX = re.compile(
    r"\\[()\[\]]|\$\$|\$[^$\s][^$]*\\[A-Za-z][^$]*\$|\\(?:alpha|gamma|min|max|frac|sum|mathrm)\b"
    r"|\b[A-Za-z]\^[A-Za-z0-9{]"  # V^T: what is left of \(V^T\) once Markdown has eaten the backslashes
)


class VisibleText(html.parser.HTMLParser):
    """Collects a page's prose: not code, scripts, styles, hidden copies of code, or typeset math.

    A skipped element is left at its own end tag, counted by name (nested elements of the same
    name included), so tags the HTML leaves unclosed (<p>, <li>) cannot upset the count.
    """

    SKIPPED = {"script", "style", "pre", "code", "textarea"}
    # Typeset math, and mkdocs-jupyter's hidden copy of each code cell (what its copy button copies).
    HIDDEN_OR_MATH = {"arithmatex", "clipboard-copy-txt"}

    def __init__(self):
        super().__init__()
        self.skipping: str | None = None  # the name of the skipped element we are inside
        self.depth = 0  # how many elements of that name are open
        self.parts: list[str] = []

    def handle_starttag(self, tag, attrs):
        if self.skipping:
            self.depth += tag == self.skipping
        elif tag in self.SKIPPED or self.HIDDEN_OR_MATH & set((dict(attrs).get("class") or "").split()):
            self.skipping, self.depth = tag, 1

    def handle_endtag(self, tag):
        if self.skipping == tag:
            self.depth -= 1
            if self.depth == 0:
                self.skipping = None

    def handle_data(self, data):
        if not self.skipping:
            self.parts.append(data)


def visible_text(page_html: str) -> str:
    parser = VisibleText()
    parser.feed(page_html)
    return " ".join(parser.parts)


def built_pages() -> list[Path]:
    site = ROOT / "site"
    return sorted(p for p in site.rglob("index.html") if "assets" not in p.parts) if site.is_dir() else []


def test_raw_tex_is_caught_and_typeset_math_is_not():
    assert RAW_TEX.search(visible_text("<p>the acceptance rate (\\alpha) and (\\min(1, p/q))</p>"))
    assert RAW_TEX.search(visible_text("<p>rate $\\alpha$ here</p>"))
    assert RAW_TEX.search(visible_text("<p>all \\(V^T\\) of them</p>"))
    assert RAW_TEX.search(visible_text("<p>all (V^T) of them</p>"))
    typeset = '<p>rate <span class="arithmatex">\\(\\alpha\\)</span>; <code>$\\x</code> costs $5</p>'
    assert not RAW_TEX.search(visible_text(typeset))


def test_built_pages_show_no_raw_tex():
    """Every page of both languages, notebooks included: math is typeset, never shown as TeX."""
    pages = built_pages()
    if not pages:
        if os.environ.get("INFERLAB_REQUIRE_BROWSER") == "1":
            pytest.fail("the site is not built (nox -s docs)")
        pytest.skip("the site is not built (nox -s docs)")
    found = {}
    for page in pages:
        text = visible_text(page.read_text(encoding="utf-8"))
        if hits := RAW_TEX.findall(text):
            found[str(page.parent.relative_to(ROOT / "site"))] = hits[:5]
    assert not found, f"raw TeX on {len(found)} of {len(pages)} pages: {found}"
    labs = [p for p in pages if "labs" in p.parts]
    assert len(labs) >= 12, f"only {len(labs)} notebook pages built"
