"""Every reader snippet runs as a plain script, offline, on the bundled pair."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from inferlab.models import BUNDLED_DIR, bundled_available

ROOT = Path(__file__).resolve().parent.parent
SNIPPETS = sorted((ROOT / "snippets").rglob("*.py"))


def snippet_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        MPLBACKEND="Agg",
        INFERLAB_FAST="1",
        INFERLAB_TARGET=str(BUNDLED_DIR / "target"),
        INFERLAB_DRAFT=str(BUNDLED_DIR / "draft"),
        INFERLAB_OUT=str(tmp_path),
    )
    return env


@pytest.mark.parametrize("snippet", SNIPPETS, ids=lambda p: str(p.relative_to(ROOT / "snippets")))
def test_snippet_runs(snippet, tmp_path):
    if not bundled_available():
        pytest.fail("the bundled model pair is missing; snippets need it")
    # -I (isolated mode): neither PYTHONPATH nor the working folder leaks into the snippet;
    # test_site_checks keeps `import inferlab` out of snippets, so they run on a fresh Colab too.
    result = subprocess.run(
        [sys.executable, "-I", str(snippet)],
        cwd=tmp_path,
        env=snippet_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, f"{snippet.name} failed:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
