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
    "provenance": {"command": "python -m demo", "device": "CPU: test", "versions": {"torch": "9"}, "date": "2026-01-01 00:00 UTC"},
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
    assert "How this was measured" in render("{{provenance demo}}") and "python -m demo" in render("{{provenance demo}}")
    zh = render("{{provenance demo}}", "x/page.zh-TW.md")
    assert "測量方式" in zh and "CPU: test" in zh


@pytest.mark.parametrize("marker", ["{{result nope ratio}}", "{{result demo missing}}", "{{result demo rows.7.t}}", "{{table demo ratio}}"])
def test_missing_results_fail_the_build(results, marker):
    with pytest.raises(PluginError):
        render(marker)
