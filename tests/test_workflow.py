"""The publishing workflow (.github/workflows/pages.yml) cannot run here, so it is checked here.

It must be a valid GitHub Actions workflow (GitHub's own JSON schema, which check-jsonschema ships,
so no network is needed), run the README's commands, and deploy to Pages only after they pass.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")
pytest.importorskip("check_jsonschema")

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "pages.yml"
README = ROOT / "README.md"


def schema_check(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "check_jsonschema",
            "--builtin-schema",
            "vendor.github-workflows",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def load(path: Path = WORKFLOW) -> dict:
    workflow = yaml.safe_load(path.read_text(encoding="utf-8"))
    # YAML 1.1 reads the key `on` as the boolean True.
    if True in workflow:
        workflow["on"] = workflow.pop(True)
    return workflow


def readme_command(session: str) -> str:
    """The command the README gives for a nox session (an indented line of its own)."""
    lines = [line.strip() for line in README.read_text(encoding="utf-8").splitlines() if line.startswith("    ")]
    matches = [line for line in lines if re.search(rf"\bnox -s {session}$", line)]
    assert len(matches) == 1, f"README should give exactly one `nox -s {session}` command line, found {matches}"
    return matches[0]


def steps_of(job: dict) -> list[dict]:
    return job.get("steps", [])


def test_workflow_is_valid_against_githubs_schema():
    result = schema_check(WORKFLOW)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_schema_check_catches_a_broken_workflow(tmp_path):
    """The check above can fail: a job without runs-on and a misspelt trigger are refused."""
    broken = WORKFLOW.read_text(encoding="utf-8").replace("    runs-on: ubuntu-24.04\n", "", 1)
    broken = broken.replace("  push:\n", "  pushed:\n", 1)
    path = tmp_path / "broken.yml"
    path.write_text(broken, encoding="utf-8")
    assert schema_check(path).returncode != 0


def test_it_runs_the_readmes_commands_before_deploying():
    workflow = load()
    build = workflow["jobs"]["test-and-build"]
    runs = [step.get("run", "") for step in steps_of(build)]
    test_command, docs_command = readme_command("test"), readme_command("docs")
    assert test_command in runs, f"the workflow never runs the README's test command {test_command!r}: {runs}"
    assert docs_command in runs, f"the workflow never builds the site with {docs_command!r}"
    # The browser tests read the built site, so the build comes first, as in .ci/run.
    assert runs.index(docs_command) < runs.index(test_command)
    assert build.get("env", {}).get("INFERLAB_REQUIRE_BROWSER") == "1", "CI must fail, not skip, without a browser"
    assert any("chromium" in run for run in runs), "Chromium is never installed for the browser tests"


def test_it_deploys_to_pages_on_pushes_to_main():
    workflow = load()
    assert "main" in workflow["on"]["push"]["branches"]
    build, deploy = workflow["jobs"]["test-and-build"], workflow["jobs"]["deploy"]

    uploads = [s for s in steps_of(build) if s.get("uses", "").startswith("actions/upload-pages-artifact@")]
    assert len(uploads) == 1 and uploads[0]["with"]["path"].rstrip("/") == "site"
    # Uploading the site must come after the tests, so a failing test stops the deployment.
    names = [s.get("run", s.get("uses")) for s in steps_of(build)]
    assert names.index(readme_command("test")) < names.index(uploads[0]["uses"])

    assert deploy["needs"] in ("test-and-build", ["test-and-build"])
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert deploy["environment"]["name"] == "github-pages"
    assert any(s.get("uses", "").startswith("actions/deploy-pages@") for s in steps_of(deploy))
    # Only the deploy job may write: the workflow-wide token stays read-only.
    assert workflow["permissions"] == {"contents": "read"}


def test_it_keeps_the_phone_screenshots_as_an_artifact():
    from test_calculators import SCREENSHOTS

    build = load()["jobs"]["test-and-build"]
    artifacts = [s for s in steps_of(build) if s.get("uses", "").startswith("actions/upload-artifact@")]
    paths = [Path(ROOT, s["with"]["path"]).resolve() for s in artifacts]
    assert SCREENSHOTS.resolve() in paths, f"screenshots are saved to {SCREENSHOTS} but the workflow uploads {paths}"
