"""Mutation testing for maintainers: how many small bugs would the tests notice?

    nox -s mutate                                # both measurements, every module, then the result file
    nox -s mutate -- tool --modules bench hooks  # mutmut on some modules only
    nox -s mutate -- planted                     # the hand-written mutants only
    nox -s mutate -- tool --modules flash --survivors --record   # after new tests: the survivors again

Two independent measurements, each in a scratch copy under .mutation/ (the working tree is never
touched, so it is safe while you edit):

- ``tool``: mutmut (a maintained mutation tool from PyPI) mutates every function of a module and
  runs that module's own tests against each mutant; it runs only the tests that call the mutated
  function. Survivors can be inspected with ``cd .mutation/tool-<module> && mutmut browse``.
- ``planted``: the hand-written mutants in tools/planted_mutants.py, realistic bugs applied one at
  a time, each followed by a run of the module's own tests.

The score of a module is killed / (killed + survived): a mutant is killed when a test fails (or
times out). Mutants that cannot change behaviour are left out: planted ones carry the reason in
planted_mutants.py, tool ones are listed with theirs in tools/mutation_equivalent.txt after review.
With ``--record`` the scores are merged into docs/results/mutation_score.json, each module's with a
digest of the files mutated. ``--survivors`` tests only the survivors of a recorded full run again
(the killed ones stay killed: tests were only added); it refuses when the mutated files changed,
since mutmut numbers the mutants within each function.

It is slow (tens of minutes per module on 2 cores), so it is not part of ``nox -s test``.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import hashlib
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".mutation"
MARKERS = "not slow and not gpu and not browser and not vllm"

# Every module's refusals of bad input are tested in one place (the cases of tools/bad_input_sweep.py).
BAD_INPUT = "tests/test_bad_input.py"
# module -> (the files mutated, that module's own tests). models/ (training, the model card) is left
# out, and so are the benchmark CLIs and the Triton kernel, whose tests are the slow end-to-end ones.
MODULES: dict[str, tuple[list[str], list[str]]] = {
    "decoding": (
        ["code/inferlab/decoding/sampling.py", "code/inferlab/decoding/search.py", "code/inferlab/decoding/tables.py"],
        [
            "tests/test_decoding_sampling.py",
            "tests/test_decoding_search.py",
            "tests/test_decoding_sampling_exact.py",
            "tests/test_decoding_search_exact.py",
            BAD_INPUT,
        ],
    ),
    "kvcache": (
        ["code/inferlab/kvcache/decoder.py", "code/inferlab/kvcache/generate.py", "code/inferlab/kvcache/size.py"],
        ["tests/test_kvcache.py", "tests/test_kvcache_size.py", "tests/test_kvcache_exact.py", BAD_INPUT],
    ),
    "paged": (
        ["code/inferlab/paged/blocks.py", "code/inferlab/paged/engine.py", "code/inferlab/paged/attention.py"],
        [
            "tests/test_paged_blocks.py",
            "tests/test_paged_engine.py",
            "tests/test_paged_labs.py",
            "tests/test_paged_exact.py",
            BAD_INPUT,
        ],
    ),
    "flash": (
        ["code/inferlab/flash/reference.py", "code/inferlab/flash/tiled.py", "code/inferlab/flash/traffic.py"],
        ["tests/test_flash.py", BAD_INPUT],
    ),
    "speculative": (
        [
            "code/inferlab/speculative/formulas.py",
            "code/inferlab/speculative/tree.py",
            "code/inferlab/speculative/sampler.py",
            "code/inferlab/speculative/alpha.py",
        ],
        ["tests/test_speculative.py", "tests/test_speculative_exact.py", BAD_INPUT],
    ),
    "bench": (["code/inferlab/bench/__init__.py"], ["tests/test_bench.py", "tests/test_bench_exact.py", BAD_INPUT]),
    "hooks": (
        ["tools/mkdocs_hooks.py", "tools/glossary_links.py"],
        [
            "tests/test_mkdocs_hooks.py",
            "tests/test_glossary_links.py",
            "tests/test_accessibility.py",
            "tests/test_labels.py",
        ],
    ),
}
COPIED = ["code", "tools", "tests", "docs", "snippets", "mkdocs.yml", "pyproject.toml"]
IGNORED = shutil.ignore_patterns(
    "__pycache__", ".ipynb_checkpoints", "*.pyc", ".hypothesis", ".pytest_cache", "*.egg-info"
)


def test_env(extra_path: Path | None = None) -> dict[str, str]:
    """Return the environment the tests run in: offline, headless, and importing the scratch copy."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "MPLBACKEND": "Agg"}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if extra_path is not None:  # ahead of the editable install, which points at the working tree
        env["PYTHONPATH"] = os.pathsep.join([str(extra_path), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def fresh_copy(dest: Path, layout: dict[str, str] | None = None) -> None:
    """Copy what the tests need into dest; ``layout`` maps a source path to another place in the copy."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for name in COPIED:
        source = ROOT / name
        target = dest / (layout or {}).get(name, name)
        if source.is_dir():
            shutil.copytree(source, target, ignore=IGNORED, dirs_exist_ok=True)
        elif source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def run_pytest(where: Path, tests: list[str], timeout: float, first_failure: bool = True) -> tuple[str, float]:
    """Run the tests in a copy; return ("passed" | "failed" | "timeout" | "error", seconds)."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", MARKERS, *tests]
    if first_failure:
        command.insert(3, "-x")
    start = time.perf_counter()
    try:
        done = subprocess.run(
            command, cwd=where, env=test_env(where / "code"), capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return "timeout", time.perf_counter() - start
    seconds = time.perf_counter() - start
    # pytest: 0 all passed, 1 some failed, 2 interrupted (an import error counts: the bug was seen).
    outcome = {0: "passed", 1: "failed", 2: "failed"}.get(done.returncode, "error")
    if outcome == "error":
        print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
    return outcome, seconds


def score(killed: int, survived: int) -> float | None:
    """Return killed / (killed + survived), or None when nothing was counted."""
    return round(killed / (killed + survived), 4) if killed + survived else None


# ----- the hand-written mutants ----------------------------------------------------------------


def run_planted(modules: list[str], done=None) -> dict[str, dict]:
    """Plant each hand-written mutant of these modules in turn; return per-module counts and survivors."""
    sys.path.insert(0, str(ROOT / "tools"))
    from planted_mutants import MUTANTS

    summary = {}
    for module in modules:
        mutants = [m for m in MUTANTS if m.module == module]
        if not mutants:
            continue
        work = WORK / f"planted-{module}"  # one copy per module: two runs on different modules can overlap
        fresh_copy(work)
        tests = MODULES[module][1]
        print(f"\n[planted] {module}: {len(mutants)} mutants; baseline run of {' '.join(tests)}", flush=True)
        outcome, baseline = run_pytest(work, tests, timeout=1800, first_failure=False)
        if outcome != "passed":
            raise SystemExit(f"the unmutated tests of {module} do not pass ({outcome}): fix them first")
        counts = {"killed": 0, "survived": 0, "equivalent": 0, "stale": 0, "survivors": []}
        for mutant in mutants:
            path = work / mutant.path
            original = path.read_text(encoding="utf-8")
            if original.count(mutant.old) != 1:  # the code moved on: say so instead of guessing
                counts["stale"] += 1
                print(
                    f"  STALE     {mutant.why} ({mutant.path}: the old text occurs {original.count(mutant.old)} times)"
                )
                continue
            path.write_text(original.replace(mutant.old, mutant.new), encoding="utf-8")
            try:
                outcome, seconds = run_pytest(work, tests, timeout=max(300, 5 * baseline))
            finally:
                path.write_text(original, encoding="utf-8")
            caught = outcome in ("failed", "timeout")
            if mutant.equivalent:
                counts["equivalent"] += 1
                verdict = "EQUIV" + (" (caught?)" if caught else "")
            elif caught:
                counts["killed"] += 1
                verdict = "killed"
            elif outcome == "passed":
                counts["survived"] += 1
                counts["survivors"].append(f"{mutant.path}: {mutant.why}")
                verdict = "SURVIVED"
            else:
                raise SystemExit(f"pytest could not run for mutant {mutant.why!r}: {outcome}")
            print(f"  {verdict:<9} {seconds:6.1f}s  {mutant.why}", flush=True)
        counts["score"] = score(counts["killed"], counts["survived"])
        summary[module] = counts
        if done:  # recorded module by module, so an interrupted run keeps what it measured
            done("planted", module, counts)
    return summary


# ----- mutmut -----------------------------------------------------------------------------------

# mutmut 3 finds the mutated package under mutants/src, so the copy puts the package (and the tools
# whose hooks are mutated) there: tests then import inferlab and mkdocs_hooks from the mutated copy.
SRC_LAYOUT = {"code": "src", "tools": "src"}
# mutmut's exit codes (mutmut/stats.py): 1 and 3 killed, 0 survived, 33/5 no test ran the code,
# 36 and friends timed out, 34 skipped; anything else is suspicious and counted as survived.
KILLED_CODES = {1, 3, 36, 24, -24, 152, 255, 37, -11, -9}
NO_TEST_CODES = {5, 33}
SKIPPED_CODES = {34, None}
# raise statements (mutmut skips the whole statement): their mutants only decorate an error
# message, which the tests match in part, never the logic that decides to raise.
DO_NOT_MUTATE = [r"^\s*raise \w+\("]


def mutmut_config(module: str) -> str:
    """Return the [tool.mutmut] section for one module of the src-layout copy."""
    sources, tests = MODULES[module]
    only = [str(Path("src", *Path(s).parts[1:])) for s in sources]
    lines = [
        "",
        "[tool.mutmut]",
        'source_paths = ["src"]',
        f"only_mutate = {json.dumps(only)}",
        f"pytest_add_cli_args_test_selection = {json.dumps(tests)}",
        f'pytest_add_cli_args = ["-p", "no:cacheprovider", "-m", "{MARKERS}"]',
        'also_copy = ["docs/", "mkdocs.yml", "snippets/"]',
        f"do_not_mutate_patterns = {json.dumps(DO_NOT_MUTATE)}",
        'process_isolation = "forkserver"  # torch is not fork-safe after it has run',
        "use_git_change_detection = false",
        "",
    ]
    return "\n".join(lines)


def reviewed_equivalents() -> dict[str, tuple[str | None, str]]:
    """Return {mutmut mutant name: (fingerprint or None, why it cannot change behaviour)} from
    tools/mutation_equivalent.txt, whose lines read ``name [@fingerprint]  # why``."""
    path = ROOT / "tools" / "mutation_equivalent.txt"
    if not path.is_file():
        return {}
    entries = (equivalent_entry(line) for line in path.read_text(encoding="utf-8").splitlines())
    return {name: (stamp, why) for name, stamp, why in entries if name}


def equivalent_entry(line: str) -> tuple[str | None, str | None, str]:
    """Split a line of tools/mutation_equivalent.txt into (name, fingerprint, why); name is None on a
    comment or a blank line, fingerprint None when the entry is not stamped yet."""
    entry, _, why = line.partition("#")
    fields = entry.split()
    if not fields:
        return None, None, why.strip()
    return fields[0], fields[1].removeprefix("@") if len(fields) > 1 else None, why.strip()


def mutant_change(work: Path, name: str) -> list[str] | None:
    """Return the lines mutant ``name`` removes (``-``) and adds (``+``), read from mutmut's mutated
    copy in ``work``; None when the mutant is not there."""
    module, _, function = name.rpartition(".")
    base = work / "mutants" / "src" / Path(*module.split("."))
    source = next((f for f in (base.with_suffix(".py"), base / "__init__.py") if f.is_file()), None)
    original_name = re.sub(r"__mutmut_\d+$", "__mutmut_orig", function)
    if source is None or original_name == function:
        return None
    text = source.read_text(encoding="utf-8")
    bodies = {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in (function, original_name):
            bodies[node.name] = ast.get_source_segment(text, node).split("\n")[1:]  # the def line names it
    if len(bodies) != 2:
        return None
    diff = difflib.unified_diff(bodies[original_name], bodies[function], n=0, lineterm="")
    return [line[0] + line[1:].strip() for line in diff if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def mutant_fingerprint(work: Path, name: str) -> str | None:
    """Return a short hash of what mutant ``name`` changes; None when the mutant is not there.

    mutmut numbers the mutants of a function in order, so editing the function renumbers them, and
    a name reviewed as equivalent may come to mean another mutant. The fingerprint says whether the
    name still means the change that was reviewed."""
    change = mutant_change(work, name)
    return None if change is None else change_fingerprint(change)


def change_fingerprint(change: list[str]) -> str:
    """Return the short hash that tools/mutation_equivalent.txt records for a mutant's changed lines."""
    return hashlib.sha256("\n".join(change).encode()).hexdigest()[:12]


def sources_digest(module: str) -> str:
    """Return a SHA-256 over the files mutmut mutates for ``module``: mutant names are numbered within
    each function, so they name the same mutants only while these files are unchanged."""
    digest = hashlib.sha256()
    for source in MODULES[module][0]:
        digest.update(source.encode() + b"\0" + (ROOT / source).read_bytes() + b"\0")
    return digest.hexdigest()


def previous_full_run(module: str) -> dict:
    """Return the recorded full mutmut run of ``module`` that a --survivors run may build on, or exit saying why not."""
    sys.path.insert(0, str(ROOT / "code"))
    from inferlab.bench import read_result

    try:
        previous = read_result("mutation_score")["values"]["tool"][module]
    except (FileNotFoundError, KeyError) as missing:
        raise SystemExit(
            f"--survivors needs a recorded full mutmut run of {module}: run it without --survivors first"
        ) from missing
    if "sampled" in previous or previous.get("sources_sha256") != sources_digest(module):
        raise SystemExit(
            f"--survivors needs a full mutmut run of {module} recorded with the current sources "
            f"({', '.join(MODULES[module][0])}); they changed or the run was a sample: run the module in full"
        )
    return previous


def merge_retest(previous: dict, retest: dict) -> dict:
    """Return a full run's counts after its survivors were tested again: newly killed ones move to killed,
    newly reviewed equivalents leave the score, the rest stay survivors (untested ones stay untested)."""
    merged = dict(previous)
    merged["killed"] = previous["killed"] + retest["killed"]
    merged["equivalent"] = previous["equivalent"] + retest["equivalent"]
    merged["survived"], merged["no_tests"] = retest["survived"], retest["no_tests"]
    merged["survivors"] = retest["survivors"]
    merged["score"] = score(merged["killed"], merged["survived"] + merged["no_tests"])
    merged["retested_survivors"] = len(previous["survivors"])
    return merged


def run_tool(
    modules: list[str], jobs: int, done=None, sample: int | None = None, seed: int = 0, survivors: bool = False
) -> dict[str, dict]:
    """Run mutmut over each module with its own tests; return per-module counts and survivors.

    With ``sample``, only that many mutants of each module, drawn at random (seeded), are tested:
    the score is then an estimate, recorded with its 95% interval. With ``survivors``, only the
    survivors of the module's recorded full run are tested again (after new tests were written),
    which is valid only while the mutated sources are unchanged: their digest is checked.
    """
    equivalents = reviewed_equivalents()
    previous = {module: previous_full_run(module) for module in modules} if survivors else {}
    summary = {}
    for module in modules:
        work = WORK / f"tool-{module}"
        fresh_copy(work, SRC_LAYOUT)
        pyproject = work / "pyproject.toml"
        text = re.sub(r"\n\[tool\.mutmut\].*?(?=\n\[|\Z)", "", pyproject.read_text(encoding="utf-8"), flags=re.S)
        pyproject.write_text(text + mutmut_config(module), encoding="utf-8")
        print(f"\n[mutmut] {module}: mutating {' '.join(MODULES[module][0])}", flush=True)
        start = time.perf_counter()
        chosen = None
        if sample:
            names = generate_mutants(work)
            chosen = draw_sample(names, sample, seed)
            print(f"  testing a random sample of {len(chosen)} of {len(names)} mutants (seed {seed})", flush=True)
        elif survivors:
            chosen = set(previous[module]["survivors"])
            print(f"  testing again the {len(chosen)} survivors of the run of {previous[module]['date']}", flush=True)
        if chosen == set():  # nothing to test again (mutmut takes an empty list of names as "every mutant")
            counts = {"killed": 0, "survived": 0, "no_tests": 0, "equivalent": 0, "survivors": []}
        else:
            run_mutmut(work, jobs, sorted(chosen or []))
            counts = count_results(work, equivalents, chosen)
        if sample:
            counts |= {"sampled": len(chosen), "mutants": len(names), "seed": seed}
            counts["interval_95"] = wilson_interval(counts["killed"], counts["survived"] + counts["no_tests"])
        elif survivors:
            counts = merge_retest(previous[module], counts)
        counts["sources_sha256"] = sources_digest(module)
        # A re-test keeps the full run's minutes (what a maintainer should expect) beside its own.
        counts["retest_minutes" if survivors else "minutes"] = round((time.perf_counter() - start) / 60, 1)
        summary[module] = counts
        print(f"  {module}: {counts['killed']} killed, {counts['survived']} survived, {counts['no_tests']} untested")
        for name in counts.get("stale_equivalents", []):
            print(f"  listed as equivalent, but its number now names another change (review it again): {name}")
        if done:
            done("tool", module, counts)
    return summary


# A mutant name that matches nothing: mutmut generates every mutant and collects which tests reach
# which function before it filters by name, then stops on an empty selection.
NO_SUCH_MUTANT = "no-such-mutant"


def tool_env() -> dict[str, str]:
    """Return the environment of mutmut's runs: the tests' own, plus what makes forking one process
    per mutant fast and safe.

    tests/conftest.py imports the heavy modules once, in mutmut's fork server. One OpenMP thread:
    collecting the tests runs torch code in the fork server, and a child forked from a process whose
    OpenMP thread pool has started can hang in its first parallel region (each such mutant was then
    wrongly counted as killed by a timeout).
    """
    return test_env() | {"INFERLAB_PRELOAD_MODELS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def generate_mutants(work: Path) -> list[str]:
    """Make mutmut generate every mutant of the copy (and its test stats) without testing any; return their names."""
    done = subprocess.run(
        [sys.executable, "-m", "mutmut", "run", NO_SUCH_MUTANT],
        cwd=work,
        env=tool_env(),
        capture_output=True,
        text=True,
    )
    if "nothing matches" not in done.stdout + done.stderr:
        print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
        raise SystemExit(f"mutmut could not generate the mutants in {work} (exit {done.returncode})")
    return [name for meta in (work / "mutants" / "src").rglob("*.py.meta") for name in read_meta(meta)]


def draw_sample(names: list[str], size: int, seed: int) -> set[str]:
    """Return ``size`` of the names (all when there are fewer), drawn at random: the same for a seed
    whatever order the names were found in."""
    return set(random.Random(seed).sample(sorted(names), min(size, len(names))))


def run_mutmut(work: Path, jobs: int, names: list[str]) -> None:
    """Run mutmut in the copy on the named mutants (all of them when ``names`` is empty); its log goes to mutmut.log."""
    log = work / "mutmut.log"
    with log.open("w") as out:
        finished = subprocess.run(
            [sys.executable, "-m", "mutmut", "run", "--max-children", str(jobs), *names],
            cwd=work,
            env=tool_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    if finished.returncode != 0:
        print(log.read_text(errors="replace")[-4000:])
        raise SystemExit(f"mutmut failed in {work} (exit {finished.returncode}); log: {log}")


def read_meta(meta: Path) -> dict[str, int | None]:
    """Return {mutant name: mutmut's exit code, None when not tested} from one of mutmut's .meta files."""
    return json.loads(meta.read_text())["exit_code_by_key"]


def count_results(work: Path, equivalents: dict[str, tuple[str | None, str]], chosen: set[str] | None) -> dict:
    """Count killed, survived and untested mutants (only the ``chosen`` ones when given) from mutmut's files.

    A survivor listed as equivalent leaves the score only while its fingerprint (when the list has
    one) still matches: otherwise its number now names another mutant, and it counts as a survivor
    under ``stale_equivalents`` until it is reviewed again."""
    counts = {"killed": 0, "survived": 0, "no_tests": 0, "equivalent": 0, "survivors": [], "stale_equivalents": []}
    for meta in sorted((work / "mutants" / "src").rglob("*.py.meta")):
        for name, code in read_meta(meta).items():
            if code in SKIPPED_CODES or (chosen is not None and name not in chosen):
                continue
            if code in KILLED_CODES:
                counts["killed"] += 1
                continue
            if name in equivalents:
                stamp = equivalents[name][0]
                if stamp is None or stamp == mutant_fingerprint(work, name):
                    counts["equivalent"] += 1
                    continue
                counts["stale_equivalents"].append(name)
            counts["no_tests" if code in NO_TEST_CODES else "survived"] += 1
            counts["survivors"].append(name)
    # A mutant no test runs is a bug no test sees: it counts against the score.
    counts["score"] = score(counts["killed"], counts["survived"] + counts["no_tests"])
    return counts


def stamp_equivalents(modules: list[str]) -> None:
    """Write into tools/mutation_equivalent.txt the fingerprint of every listed mutant of ``modules``
    that has none, from the latest mutmut copy of each module, printing each change for review."""
    path = ROOT / "tools" / "mutation_equivalent.txt"
    lines = path.read_text(encoding="utf-8").splitlines()
    works = [WORK / f"tool-{module}" for module in modules]
    for index, line in enumerate(lines):
        name, stamp, why = equivalent_entry(line)
        if name is None or stamp is not None:  # a comment, a blank line, or already stamped
            continue
        change = next((c for c in (mutant_change(work, name) for work in works) if c is not None), None)
        if change is not None:
            lines[index] = f"{name} @{change_fingerprint(change)}  # {why}"
            print(name, *(f"    {changed}" for changed in change), f"    why: {why}", sep="\n")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def wilson_interval(killed: int, lost: int, z: float = 1.96) -> list[float] | None:
    """Return the Wilson score interval (95% by default) of a score measured on a random sample of mutants."""
    n = killed + lost
    if not n:
        return None
    p = killed / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [round(centre - half, 4), round(centre + half, 4)]


# ----- report -----------------------------------------------------------------------------------


def package_score(modules: dict[str, dict]) -> float | None:
    """Return the score of several modules together: each module's score weighted by its mutants.

    A fully run module weighs what it counted (so this is total killed / total counted); a sampled
    one's score stands for all of its mutants, so it weighs its whole count, not its sample.
    """
    weighted = total = 0.0
    for c in modules.values():
        counted = c["killed"] + c["survived"] + c.get("no_tests", 0)
        if counted:
            weight = c.get("mutants", counted)
            weighted, total = weighted + weight * c["killed"] / counted, total + weight
    return round(weighted / total, 4) if total else None


def print_table(title: str, summary: dict[str, dict]) -> None:
    print(f"\n{title}")
    print(f"  {'module':<10} {'killed':>7} {'survived':>9} {'excluded':>9} {'score':>7}  sample (95% interval)")
    for module, c in summary.items():
        lost = c["survived"] + c.get("no_tests", 0)
        shown = "n/a" if c["score"] is None else f"{c['score']:.0%}"
        sampled = ""
        if "sampled" in c and c["interval_95"]:
            low, high = c["interval_95"]
            sampled = f"  {c['sampled']} of {c['mutants']} ({low:.0%}..{high:.0%})"
        print(f"  {module:<10} {c['killed']:>7} {lost:>9} {c['equivalent']:>9} {shown:>7}{sampled}")
    total = package_score(summary)
    print(f"  {'all':<10} {'':>7} {'':>9} {'':>9} {'n/a' if total is None else f'{total:.0%}':>7}")
    for module, c in summary.items():
        for survivor in c["survivors"]:
            print(f"  survived in {module}: {survivor}")


def record(kind: str, module: str, counts: dict, command: str) -> None:
    """Merge one module's scores into docs/results/mutation_score.json (other modules keep their entry)."""
    sys.path.insert(0, str(ROOT / "code"))
    from inferlab.bench import read_result, write_result

    try:
        values = read_result("mutation_score")["values"]
    except FileNotFoundError:
        values = {}
    values.setdefault(kind, {})[module] = {**counts, "date": time.strftime("%Y-%m-%d")}
    for kind in list(values):
        if kind in ("tool", "planted"):
            values[f"{kind}_score"] = package_score(values[kind])
    print("wrote", write_result("mutation_score", values, command=command))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kind", nargs="?", choices=["all", "tool", "planted", "stamp"], default="all")
    parser.add_argument("--modules", nargs="+", choices=sorted(MODULES), default=sorted(MODULES))
    parser.add_argument("--jobs", type=int, default=2, help="mutmut workers (default 2)")
    parser.add_argument("--record", action="store_true", help="merge the scores into the result file")
    parser.add_argument(
        "--sample", type=int, help="mutmut: test this many mutants per module, drawn at random, instead of all"
    )
    parser.add_argument("--seed", type=int, default=0, help="the random draw of --sample (default 0)")
    parser.add_argument(
        "--survivors",
        action="store_true",
        help="mutmut: test again only the survivors of each module's recorded full run (sources unchanged)",
    )
    args = parser.parse_args(argv)
    if args.jobs < 1 or (args.sample is not None and args.sample < 1):
        parser.error(f"--jobs and --sample must be integers >= 1, got {args.jobs} and {args.sample}")
    if args.survivors and (args.sample is not None or args.kind != "tool"):
        parser.error("--survivors goes with the tool kind alone, without --sample")
    command = "python tools/mutate.py " + " ".join(argv if argv is not None else sys.argv[1:])
    done = (lambda kind, module, counts: record(kind, module, counts, command)) if args.record else None
    if args.kind == "stamp":  # right after reviewing: the listed survivors' changes, fingerprinted
        stamp_equivalents(args.modules)
        return
    if args.kind in ("all", "planted"):
        print_table("Hand-written mutants (tools/planted_mutants.py)", run_planted(args.modules, done))
    if args.kind in ("all", "tool"):
        print_table("mutmut", run_tool(args.modules, args.jobs, done, args.sample, args.seed, args.survivors))


if __name__ == "__main__":
    main()
