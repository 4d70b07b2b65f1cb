"""Sessions: test, docs, serve, lint, bench (GPU), mutate (slow, not CI). Every session installs under constraints.txt.

torch is installed first and pinned, so pip never swaps in a multi-GB CUDA build on a CPU machine.
"""

from __future__ import annotations

import os

import nox

nox.options.sessions = ["test", "docs"]
nox.options.reuse_existing_virtualenvs = True
CONSTRAINTS = ("-c", "constraints.txt")


def install(session: nox.Session, *extras: str) -> None:
    """Install torch (pinned) first, then the package with the given extras, all under constraints."""
    session.install(*CONSTRAINTS, "torch")
    target = f".[{','.join(extras)}]" if extras else "."
    session.install(*CONSTRAINTS, "-e", target)


@nox.session
def test(session: nox.Session) -> None:
    """Run the test suite. `nox -s test -- --gpu` makes a missing GPU an error instead of a skip."""
    install(session, "test", "docs")
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "MPLBACKEND": "Agg"}
    session.run("pytest", *(session.posargs or ["-q", "--durations=25"]), env=env)  # the slowest tests, for CI time


@nox.session
def docs(session: nox.Session) -> None:
    """Build the whole site, both languages, into site/ with warnings as errors."""
    install(session, "docs")
    session.run("mkdocs", "build", "--strict", "--site-dir", "site", env={"HF_HUB_OFFLINE": "1"})


@nox.session
def serve(session: nox.Session) -> None:
    """Live preview on http://127.0.0.1:8000."""
    install(session, "docs")
    session.run("mkdocs", "serve", "--dev-addr", "127.0.0.1:8000")


@nox.session
def lint(session: nox.Session) -> None:
    """ruff: format check and lint."""
    session.install(*CONSTRAINTS, "ruff")
    session.run("ruff", "format", "--check", "code", "tests", "snippets", "tools", "noxfile.py")
    session.run("ruff", "check", "code", "tests", "snippets", "tools", "noxfile.py")


@nox.session(default=False)
def mutate(session: nox.Session) -> None:
    """Mutation testing (slow, not CI): mutmut and the hand-written mutants, scored per module.

    `nox -s mutate` runs everything and records docs/results/mutation_score.json; arguments go to
    tools/mutate.py, e.g. `nox -s mutate -- planted --modules bench hooks`.
    """
    install(session, "test", "docs", "mutation")
    session.run("python", "tools/mutate.py", *(session.posargs or ["all", "--record"]))


@nox.session
def bench(session: nox.Session) -> None:
    """GPU benchmarks and gpu-marked tests (needs CUDA); results go to docs/results/."""
    install(session, "test", "gpu")
    session.run("pytest", "-m", "gpu", "--gpu", "-q", *session.posargs)
    session.run("python", "-m", "inferlab.flash.bench", "--gpu", env={"HF_HUB_OFFLINE": "1"})
    if os.environ.get("INFERLAB_BENCH_PAGED_GPU"):
        session.run("python", "-m", "inferlab.paged.bench", "--gpu")
