"""Build the lab notebooks: ``python tools/notebooks.py [NAME ...] [--check] [--all] [--target DIR --draft DIR]``.

Sources are jupytext percent scripts in ``notebooks/`` (``name.py`` and ``name.zh-TW.py``, the same
code cells, translated Markdown). Building a notebook

1. expands every code cell that is a single include line, ``# --8<-- "speculative/manual_sampler.py"``
   (a path under ``snippets/``), into that snippet's text: the notebook runs the very code that
   ``tests/test_snippets.py`` runs, so the two cannot drift apart;
2. puts an "Open in Colab" badge and a download link under the title;
3. executes it on the bundled pair (``INFERLAB_FAST=1``, so loops stay short) and writes
   ``docs/labs/<name>.ipynb`` with its outputs, which the site shows as they are.

A notebook is rebuilt only when the hash of its expanded cells changes (the hash is stored in the
notebook's metadata): editing a snippet makes every notebook that includes it stale, and
``mkdocs build`` itself never executes anything. ``--check`` only reports stale notebooks.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import jupytext
import nbformat

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "notebooks"
SNIPPETS = ROOT / "snippets"
LABS = ROOT / "docs" / "labs"
# The GitHub repository of mkdocs.yml's repo_url; Colab opens a notebook straight from it.
COLAB_URL = "https://colab.research.google.com/github/inferlab/llm-fast-inference/blob/main/docs/labs/{file}"
INCLUDE = re.compile(r'#\s*--8<--\s*"([^"]+)"')

# A badge drawn here rather than the usual image from colab.research.google.com: the site must load
# nothing from other hosts (the browser tests fail on any request that does not resolve offline).
BADGE_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="117" height="20" role="img">'
    '<rect width="117" height="20" rx="3" fill="#555"/>'
    '<rect x="52" width="65" height="20" rx="3" fill="#e37400"/><rect x="52" width="4" height="20" fill="#e37400"/>'
    '<g fill="#fff" font-family="Verdana,DejaVu Sans,sans-serif" font-size="11">'
    '<text x="6" y="14">Open in</text><text x="60" y="14">Colab</text></g></svg>'
)
BADGE_URI = "data:image/svg+xml;base64," + base64.b64encode(BADGE_SVG.encode()).decode()
BADGE_TEXT = {
    "en": ("Open in Colab", "Download this notebook"),
    "zh-TW": ("在 Colab 開啟", "下載這本筆記本"),
}


def notebook_path(source: Path) -> Path:
    """Return where the rendered notebook of a source goes: docs/labs/<name>.ipynb."""
    return LABS / (source.name[: -len(".py")] + ".ipynb")


def language_of(source: Path) -> str:
    """Return "zh-TW" for name.zh-TW.py, else "en"."""
    return "zh-TW" if source.name.endswith(".zh-TW.py") else "en"


def twin_of(source: Path) -> Path:
    """Return the other language's source: name.py <-> name.zh-TW.py."""
    if language_of(source) == "zh-TW":
        return source.with_name(source.name.removesuffix(".zh-TW.py") + ".py")
    return source.with_name(source.name.removesuffix(".py") + ".zh-TW.py")


def snippet_text(target: str) -> str:
    """Return the text of snippets/<target>, the file an include line names."""
    path = (SNIPPETS / target).resolve()
    if SNIPPETS.resolve() not in path.parents or path.suffix != ".py":
        raise ValueError(f"include target must be a .py file under snippets/, got {target!r}")
    if not path.is_file():
        raise ValueError(f"include target snippets/{target} does not exist")
    return path.read_text(encoding="utf-8").strip()


def expand_includes(notebook, source: Path) -> None:
    """Replace every code cell that is a single include line by the snippet it names."""
    for number, cell in enumerate(notebook.cells, start=1):
        if cell.cell_type != "code" or not INCLUDE.search(cell.source):
            continue
        match = INCLUDE.fullmatch(cell.source.strip())
        if match is None:
            # Anything else in the cell would be silently dropped or run unexpanded: refuse it.
            raise ValueError(f"{source.name}, cell {number}: a code cell with an include must hold only that line")
        target = match.group(1)
        header = f"# snippets/{target}: edit the snippet, not this cell (tools/notebooks.py copies it here)\n"
        cell.source = header + snippet_text(target)


def badge_cell(source: Path):
    """Return the Markdown cell with the "Open in Colab" badge and the download link."""
    file = notebook_path(source).name
    open_text, download_text = BADGE_TEXT[language_of(source)]
    # mkdocs-jupyter copies the .ipynb into the page's own folder, so the bare file name works on
    # the site (labs/<name>/<file>) and on GitHub (docs/labs/<file>) alike.
    return nbformat.v4.new_markdown_cell(
        f"[![{open_text}]({BADGE_URI})]({COLAB_URL.format(file=file)}) [{download_text} ({file})]({file})"
    )


# LaTeX's own delimiters: Jupyter, Colab and the site's notebook pages read math only between $ signs.
LATEX_DELIMITER = re.compile(r"\\[()\[\]]")


def check_math_delimiters(notebook, source: Path) -> None:
    """Refuse Markdown cells that write math as \\( ... \\) or \\[ ... \\]: it would show as raw TeX."""
    for number, cell in enumerate(notebook.cells, start=1):
        if cell.cell_type == "markdown" and LATEX_DELIMITER.search(cell.source):
            raise ValueError(
                f"{source.name}, cell {number}: write math as $...$ or $$...$$ in notebooks, "
                f"not \\(...\\) or \\[...\\] (Markdown eats the backslash)"
            )


def render(source: Path):
    """Return the notebook of a source, includes expanded and badge added, not yet executed."""
    notebook = jupytext.read(source)
    check_math_delimiters(notebook, source)
    expand_includes(notebook, source)
    # Under the title (the first cell, a "# ..." heading), or first when there is none.
    has_title = (
        notebook.cells and notebook.cells[0].cell_type == "markdown" and notebook.cells[0].source.startswith("# ")
    )
    notebook.cells.insert(1 if has_title else 0, badge_cell(source))
    notebook.metadata.pop("jupytext", None)
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    notebook.metadata["inferlab"] = {
        "source": f"notebooks/{source.name}",
        "source_hash": source_hash(notebook),
    }
    return notebook


def cell_sources(notebook) -> list[tuple[str, str]]:
    """Return (cell type, source) of every cell: what a notebook is, without its outputs."""
    return [(cell.cell_type, cell.source.strip()) for cell in notebook.cells]


def source_hash(notebook) -> str:
    """Return a SHA-256 of the cells' types and sources."""
    return hashlib.sha256(json.dumps(cell_sources(notebook)).encode()).hexdigest()


def code_cells(notebook) -> list[str]:
    return [source for kind, source in cell_sources(notebook) if kind == "code"]


def is_stale(source: Path) -> bool:
    """Return True when the rendered notebook is missing or was built from other cells."""
    path = notebook_path(source)
    if not path.exists():
        return True
    rendered = nbformat.read(path, as_version=4)
    wanted = render(source)
    recorded = rendered.metadata.get("inferlab", {}).get("source_hash")
    same_cells = cell_sources(rendered) == cell_sources(wanted)
    return recorded != wanted.metadata["inferlab"]["source_hash"] or not same_cells


def stale(sources: list[Path]) -> list[Path]:
    """Return the sources whose notebook is missing or out of date."""
    return [source for source in sources if is_stale(source)]


def execute(notebook, target: Path | None = None, draft: Path | None = None) -> None:
    """Run every cell in a fresh kernel, offline, on the given pair (default: the bundled one).

    The kernel starts in an empty folder, as a Colab runtime does. By default the notebook's own
    set-up cell (``SITE_PAIR = True``) links the installed package's pair there as
    ``inferlab-pair/``, so the saved outputs print paths that exist in Colab too, never a path of
    this repository; a pair given here is named by its own paths instead.
    """
    from nbclient import NotebookClient

    from inferlab.models import BUNDLED_DIR

    for name, folder in (("target", target or BUNDLED_DIR / "target"), ("draft", draft or BUNDLED_DIR / "draft")):
        if not (Path(folder) / "config.json").is_file():
            raise ValueError(
                f"{name} must be a model folder with a config.json, got {folder} (is the bundled pair trained?)"
            )
    out = tempfile.mkdtemp(prefix="inferlab-notebook-")  # figures a snippet saves stay out of docs/
    runtime = tempfile.mkdtemp(prefix="inferlab-runtime-")  # the kernel's folder, like Colab's /content
    for name in ("INFERLAB_TARGET", "INFERLAB_DRAFT"):
        os.environ.pop(name, None)  # a pair set in this shell would leak into the outputs
    if target:
        os.environ["INFERLAB_TARGET"] = str(Path(target).resolve())
    if draft:
        os.environ["INFERLAB_DRAFT"] = str(Path(draft).resolve())
    os.environ.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        INFERLAB_FAST="1",
        INFERLAB_OUT=out,
        # Progress bars would fill the rendered outputs; Colab's widgets would hide them anyway.
        HF_HUB_DISABLE_PROGRESS_BARS="1",
        PYTHONWARNINGS="ignore:IProgress not found",
        MPLBACKEND="module://matplotlib_inline.backend_inline",
    )
    try:
        NotebookClient(
            notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": runtime}}
        ).execute()
    finally:
        shutil.rmtree(runtime, ignore_errors=True)
    for cell in notebook.cells:
        cell.metadata.pop("execution", None)  # kernel timestamps: noise in every diff


def outputs_from_twin(notebook, source: Path) -> bool:
    """Copy the outputs of the other language's up-to-date notebook when the code is identical."""
    twin = twin_of(source)
    if not twin.exists() or is_stale(twin):
        return False
    rendered = nbformat.read(notebook_path(twin), as_version=4)
    if code_cells(rendered) != code_cells(notebook):
        return False
    ours = [cell for cell in notebook.cells if cell.cell_type == "code"]
    theirs = [cell for cell in rendered.cells if cell.cell_type == "code"]
    for cell, done in zip(ours, theirs, strict=True):
        cell.outputs, cell.execution_count = done.outputs, done.execution_count
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only check that notebooks match their sources")
    parser.add_argument("--all", action="store_true", help="rebuild every notebook, not only stale ones")
    parser.add_argument("names", nargs="*", help="only these notebooks (e.g. kvcache), both languages")
    parser.add_argument("--target", type=Path, help="target model folder (default: the bundled target)")
    parser.add_argument("--draft", type=Path, help="draft model folder (default: the bundled draft)")
    args = parser.parse_args(argv)
    sources = sorted(SOURCES.glob("*.py"))  # name.py sorts before name.zh-TW.py: English runs first
    unknown = set(args.names) - {s.name.removesuffix(".py").removesuffix(".zh-TW") for s in sources}
    if unknown:
        parser.error(f"names must be notebooks in {SOURCES.name}/, got unknown {sorted(unknown)}")
    if args.names:
        sources = [s for s in sources if s.name.removesuffix(".py").removesuffix(".zh-TW") in args.names]
    todo = sources if args.all else stale(sources)
    if args.check:
        for source in todo:
            print(f"{notebook_path(source)} is out of date with {source}; run python tools/notebooks.py")
        return 1 if todo else 0
    executed_now = set()
    for source in todo:
        notebook = render(source)
        # Identical code gives identical outputs: run each pair once (the tests still run both).
        # --all means "run again", so then only a twin run in this same call may lend its outputs.
        may_reuse = not args.all or twin_of(source) in executed_now
        reused = may_reuse and outputs_from_twin(notebook, source)
        if not reused:
            execute(notebook, args.target, args.draft)
        nbformat.write(notebook, notebook_path(source))
        executed_now.add(source)
        print(f"wrote {notebook_path(source).relative_to(ROOT)}" + (" (outputs of its twin)" if reused else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
