"""Lab notebooks match their sources and run top to bottom, offline, on the bundled pair."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import jupytext
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import notebooks  # noqa: E402

SOURCES = sorted(notebooks.SOURCES.glob("*.py"))


def test_every_notebook_has_both_languages():
    names = {s.name.removesuffix(".py") for s in SOURCES}
    for name in names:
        twin = name.removesuffix(".zh-TW") if name.endswith(".zh-TW") else name + ".zh-TW"
        assert twin in names, f"notebooks/{name}.py has no twin notebooks/{twin}.py"


def test_rendered_notebooks_match_their_sources():
    assert notebooks.stale(SOURCES) == [], "run python tools/notebooks.py"


@pytest.mark.slow
@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_notebook_runs_top_to_bottom(source, monkeypatch):
    monkeypatch.setattr(os, "environ", dict(os.environ))  # execute() sets variables; keep them local
    notebook = jupytext.read(source)
    notebooks.execute(notebook)
    errors = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert errors == []
