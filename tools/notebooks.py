"""Build the lab notebooks: ``python tools/notebooks.py [--check]``.

Sources are jupytext percent scripts in ``notebooks/`` (``name.py`` and ``name.zh-TW.py``); this
writes ``docs/labs/<name>.ipynb`` executed on the bundled pair, so the site shows real outputs.
``--check`` only verifies that every notebook's cells match its source.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import jupytext
import nbformat

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "notebooks"
LABS = ROOT / "docs" / "labs"


def notebook_path(source: Path) -> Path:
    return LABS / (source.name[: -len(".py")] + ".ipynb")


def cell_sources(notebook) -> list[tuple[str, str]]:
    return [(cell.cell_type, cell.source.strip()) for cell in notebook.cells]


def execute(notebook) -> None:
    from nbclient import NotebookClient

    from inferlab.models import BUNDLED_DIR

    os.environ.update(
        HF_HUB_OFFLINE="1",
        INFERLAB_TARGET=str(BUNDLED_DIR / "target"),
        INFERLAB_DRAFT=str(BUNDLED_DIR / "draft"),
        MPLBACKEND="module://matplotlib_inline.backend_inline",
    )
    NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(LABS)}}).execute()


def stale(sources: list[Path]) -> list[Path]:
    """Return the sources whose notebook is missing or has different cells."""
    return [
        s
        for s in sources
        if not notebook_path(s).exists()
        or cell_sources(jupytext.read(s)) != cell_sources(nbformat.read(notebook_path(s), as_version=4))
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only check that notebooks match their sources")
    parser.add_argument("--all", action="store_true", help="rebuild every notebook, not only stale ones")
    args = parser.parse_args(argv)
    sources = sorted(SOURCES.glob("*.py"))
    todo = sources if args.all else stale(sources)
    if args.check:
        for source in todo:
            print(f"{notebook_path(source)} is out of date with {source}; run python tools/notebooks.py")
        return 1 if todo else 0
    for source in todo:
        notebook = jupytext.read(source)
        notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        execute(notebook)
        nbformat.write(notebook, notebook_path(source))
        print(f"wrote {notebook_path(source)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
