"""The site's whole GPU half in one run, under hard time limits, packed into one archive.

    tools/gpu_run.sh                  # on a CUDA machine, offline: about 8 minutes at most
    tools/gpu_run.sh --dry-run        # on a CPU: the same steps on tiny sizes (the tests run this)
    tools/gpu_run.sh --unpack ARCHIVE # check an archive and unpack its docs/ into this checkout

The steps, in order (the most wanted results first, in case time runs out):

1. environment: the imports the run needs, the GPU and the versions, into the log
2. gpu tests: every gpu-marked test (the dry run compares their list with tools/gpu_tests.txt)
3. flash: ``python -m inferlab.flash.bench --gpu``, which stops itself before its time limit
4. kvcache: ``python -m inferlab.kvcache.bench --device cuda``
5. speculative: ``python -m inferlab.speculative.bench`` (its flags live in one marked block below)
6. pack: ``gpu_run.tar.gz`` (docs/results/, docs/figures/, logs/) and ``gpu_run.log`` into $OUT

Each step runs in its own process group with a hard time limit, all under one overall deadline;
a step that fails or runs out of time is logged and the run goes on, so the archive is always
written. Each bench writes into a scratch folder laid out like the site (mkdocs.yml + docs/), never
into this checkout. Benches whose CPU results the pages already show (kvcache, speculative) have
their GPU files renamed on the way into the archive: ``kvcache_sizes.json`` becomes
``kvcache_gpu_sizes.json``, ``docs/figures/kvcache/prefill_decode.png`` becomes
``docs/figures/kvcache/gpu_prefill_decode.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "tools" / "gpu_tests.txt"
MANIFEST_HEADER = """\
# The gpu-marked tests that tools/gpu_run.sh runs on a GPU; its time limits were sized for these.
# tools/gpu_run.sh --dry-run fails when the collected list differs from this one. Then check that
# the GPU run still fits its limits and rewrite: tools/gpu_run.sh --list-gpu-tests > tools/gpu_tests.txt
"""
ARCHIVE_NAME = "gpu_run.tar.gz"
LOG_NAME = "gpu_run.log"
DEADLINE_S = 470  # the whole run, start to archive: inside the 8 minutes the issue allows
DRY_RUN_DEADLINE_S = 1500  # a dry run checks logic, not speed: a busy CPU may need longer
PACK_RESERVE_S = 20  # kept back from every step for packing the archive
FLASH_WRAP_UP_S = 45  # the flash bench stops starting measurements this long before its limit
GPU_ENV_IMPORTS = ("torch", "triton", "transformers", "tokenizers", "safetensors", "pytest", "matplotlib", "tqdm")

# ==================================================================================================
# SPECULATIVE BENCH CALL. inferlab.speculative.bench is being rewritten by the lead: adjust the call
# here and only here. Use flags that `python -m inferlab.speculative.bench --help` lists; the dry
# run checks each one against that help text, and `--dry-run --full` runs the dry arguments too.
SPECULATIVE_GPU_ARGS = ["--parts", "gamma", "tree", "--device", "cuda", "--quick"]
SPECULATIVE_DRY_ARGS = ["--parts", "gamma", "tree", "--device", "cpu", "--gammas", "1", "--repeat", "1"]
SPECULATIVE_DRY_ARGS += ["--new-tokens", "4"]
SPECULATIVE_SECONDS = 150  # the last step: the overall deadline gives it less if the others ran long
# ==================================================================================================


@dataclass
class Step:
    """One stage of the run: a command, its time limit on the GPU, and what its files are called."""

    name: str
    argv: list[str]  # the command; {flash_seconds} and {stage} are filled in when it starts
    seconds: int  # its hard time limit (the overall deadline may give it less)
    topic: str | None = None  # a bench: its results and figures are collected for this topic
    rename: bool = False  # give its files _gpu names (the pages show a CPU result under the plain name)
    cwd_is_repo: bool = False  # the tests run in the checkout; benches run in a scratch folder
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class Outcome:
    """What happened to one step."""

    name: str
    status: str  # ok, failed (exit N), timeout after N s, skipped: ...
    seconds: float


# ---------------------------------------------------------------- the steps


def gpu_test_files() -> list[str]:
    """Return the test files that mention the gpu marker (collecting only these keeps the image's packages enough)."""
    return sorted(
        str(path.relative_to(ROOT)) for path in (ROOT / "tests").glob("test_*.py") if "mark.gpu" in path.read_text()
    )


def environment_script(gpu: bool) -> str:
    """Return Python that imports what the run needs and prints versions and the device."""
    return "\n".join(
        [
            "import importlib, shutil, subprocess, sys",
            f"for name in {GPU_ENV_IMPORTS!r} + ('inferlab',):",
            "    module = importlib.import_module(name)",
            '    print(f\'{name} {getattr(module, "__version__", "?")}\')',
            "import torch",
            "print('python', sys.version.split()[0], sys.executable)",
            "print('cuda available:', torch.cuda.is_available())",
            "if torch.cuda.is_available():",
            "    print('device:', torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0))",
            "if shutil.which('nvidia-smi'):",
            "    query = '--query-gpu=name,memory.total,driver_version,clocks.max.sm'",
            "    subprocess.run(['nvidia-smi', query, '--format=csv'], timeout=30)",
            *(["assert torch.cuda.is_available(), 'no CUDA GPU: run with --dry-run on a CPU'"] if gpu else []),
        ]
    )


def gpu_steps(python: str) -> list[Step]:
    """Return the steps of the real run on a CUDA GPU."""
    junit = "{stage}/gpu_tests.xml"
    return [
        Step("environment", [python, "-c", environment_script(gpu=True)], 60),
        Step(
            "gpu tests",
            [python, "-m", "pytest", "-m", "gpu", "--gpu", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}"]
            + gpu_test_files(),
            180,
            cwd_is_repo=True,
        ),
        Step(
            "flash",
            [python, "-m", "inferlab.flash.bench", "--gpu", "--max-seconds", "{flash_seconds}"],
            210,
            topic="flash",
        ),
        Step("kvcache", [python, "-m", "inferlab.kvcache.bench", "--device", "cuda"], 90, "kvcache", rename=True),
        Step(
            "speculative",
            [python, "-m", "inferlab.speculative.bench", *SPECULATIVE_GPU_ARGS],
            SPECULATIVE_SECONDS,
            "speculative",
            rename=True,
        ),
    ]


def dry_steps(python: str, full: bool) -> list[Step]:
    """Return the same steps on tiny CPU sizes: each bench parses its arguments and writes its files.

    The limits are generous: a dry run checks logic, and a shared CPU can be many times slower than an idle one.
    """
    flash_tiny = ["--ns", "16", "--head-dims", "16", "--dtypes", "float16", "bfloat16", "--repeat", "1"]
    flash_tiny += ["--heads", "2", "--tokens", "32", "--device", "cpu", "--max-seconds", "{flash_seconds}"]
    help_check = [python, str(Path(__file__).resolve()), "--check-flags", "inferlab.speculative.bench"]
    steps = [
        Step("environment", [python, "-c", environment_script(gpu=False)], 300),
        Step(
            "gpu tests",
            [python, "-m", "pytest", "-m", "gpu", "--collect-only", "-q", "-p", "no:cacheprovider", *gpu_test_files()],
            300,
            cwd_is_repo=True,
        ),
        Step(
            "flash",
            [python, "-m", "inferlab.flash.bench", "--gpu", *flash_tiny],
            600,
            topic="flash",
            env={"TRITON_INTERPRET": "1"},  # the Triton kernel runs in Triton's CPU interpreter
        ),
        Step(
            "kvcache",
            [python, "-m", "inferlab.kvcache.bench", "--device", "cpu", "--tiny"],
            600,
            "kvcache",
            rename=True,
        ),
        Step("speculative flags", [*help_check, *SPECULATIVE_GPU_ARGS], 300),
    ]
    if full:
        speculative = [python, "-m", "inferlab.speculative.bench", *SPECULATIVE_DRY_ARGS]
        steps.append(Step("speculative", speculative, 900, "speculative", rename=True))
    return steps


# ---------------------------------------------------------------- running a step


def make_stage(folder: Path) -> Path:
    """Create a scratch folder laid out like the site, so benches write there and not into the checkout."""
    (folder / "docs" / "results").mkdir(parents=True, exist_ok=True)
    (folder / "mkdocs.yml").write_text("# scratch site for tools/gpu_run.py\n")
    return folder


def step_environment(stage: Path, extra: dict[str, str], wheels_site: Path | None) -> dict[str, str]:
    """Return the environment of one step: offline, the package from code/, results into the stage."""
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    paths = [str(ROOT / "code"), *([str(wheels_site)] if wheels_site else [])]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env.update(
        PYTHONPATH=os.pathsep.join(paths),
        INFERLAB_RESULTS=str(stage / "docs" / "results"),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        MPLBACKEND="Agg",
        TOKENIZERS_PARALLELISM="false",
        PYTHONUNBUFFERED="1",
        TQDM_MININTERVAL="10",  # progress bars: a line every 10 s, not a log full of carriage returns
    )
    env.update(extra)
    return env


def run_command(argv: list[str], seconds: float, cwd: Path, env: dict[str, str], log) -> str:
    """Run argv with a hard time limit, copying its output to the log and stdout; return its status.

    The command gets its own process group, so that on timeout its children (a pytest worker, a
    benchmark subprocess) are stopped with it.
    """
    process = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    copier = threading.Thread(target=copy_output, args=(process.stdout, log), daemon=True)
    copier.start()
    try:
        code = process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        stop_group(process)
        copier.join(timeout=5)
        return f"timeout after {seconds:.0f} s"
    except KeyboardInterrupt:  # its own process group does not see our Ctrl-C: stop it too
        stop_group(process)
        raise
    copier.join(timeout=5)
    return "ok" if code == 0 else f"failed (exit {code})"


def copy_output(stream, log) -> None:
    """Copy a child's output, line by line, to the log file and to our stdout."""
    for line in iter(stream.readline, b""):
        text = line.decode("utf-8", "replace")
        log.write(text)
        log.flush()
        sys.stdout.write(text)
        sys.stdout.flush()


def stop_group(process: subprocess.Popen) -> None:
    """Stop a process and its children: SIGTERM, then SIGKILL for what is still there after 5 s."""
    for sig, grace in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def fill_placeholders(argv: list[str], seconds: float, stage: Path) -> list[str]:
    """Return argv with {flash_seconds} (the bench's own budget) and {stage} filled in."""
    flash_seconds = max(10, int(seconds - FLASH_WRAP_UP_S))
    return [arg.replace("{flash_seconds}", str(flash_seconds)).replace("{stage}", str(stage)) for arg in argv]


def run_steps(steps: list[Step], work: Path, deadline: float, log, wheels_site: Path | None) -> list[Outcome]:
    """Run the steps in order within the deadline; a failed environment step stops the rest."""
    outcomes = []
    for step in steps:
        left = deadline - time.monotonic() - PACK_RESERVE_S
        if outcomes and outcomes[0].name == "environment" and outcomes[0].status != "ok":
            outcomes.append(Outcome(step.name, "skipped: the environment step failed", 0.0))
            continue
        if left < 10:
            outcomes.append(Outcome(step.name, "skipped: out of time", 0.0))
            continue
        seconds = min(step.seconds, left)
        stage = make_stage(work / "stages" / step.name.replace(" ", "_"))
        argv = fill_placeholders(step.argv, seconds, stage)
        banner = f"\n===== {step.name} (limit {seconds:.0f} s): {' '.join(argv)[:400]}\n"
        log.write(banner)
        log.flush()
        print(banner, flush=True)
        started = time.monotonic()
        env = step_environment(stage, step.env, wheels_site)
        status = run_command(argv, seconds, ROOT if step.cwd_is_repo else stage, env, log)
        outcomes.append(Outcome(step.name, status, round(time.monotonic() - started, 1)))
        log.write(f"===== {step.name}: {status} in {outcomes[-1].seconds} s\n")
        log.flush()
    return outcomes


# ---------------------------------------------------------------- collecting and packing


def gpu_name(stem: str, topic: str) -> str:
    """Return the archive name of a result: kvcache_sizes -> kvcache_gpu_sizes."""
    return f"{topic}_gpu_{stem.removeprefix(topic + '_')}"


def collect(steps: list[Step], work: Path) -> Path:
    """Gather every bench's results and figures into <work>/pack/docs/, renamed where the step asks."""
    pack = work / "pack"
    results, figures = pack / "docs" / "results", pack / "docs" / "figures"
    results.mkdir(parents=True, exist_ok=True)
    for step in steps:
        if step.topic is None:
            continue
        stage = work / "stages" / step.name.replace(" ", "_") / "docs"
        for path in sorted((stage / "results").glob(f"{step.topic}_*.json")):
            record = json.loads(path.read_text(encoding="utf-8"))
            if step.rename:
                record["name"] = gpu_name(path.stem, step.topic)
                record["provenance"]["renamed_from"] = path.stem  # the bench's own name for it
            (results / f"{record['name']}.json").write_text(
                json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
            )
        for path in sorted((stage / "figures" / step.topic).glob("*")):
            target = figures / step.topic / (f"gpu_{path.name}" if step.rename else path.name)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    return pack


def pack_archive(pack: Path, work: Path, out: Path, log_path: Path, outcomes: list[Outcome]) -> Path:
    """Write <out>/gpu_run.tar.gz (docs/ and logs/) and a plain copy of the log beside it."""
    logs = pack / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    summary = [outcome.__dict__ for outcome in outcomes]
    (logs / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    junit = work / "stages" / "gpu_tests" / "gpu_tests.xml"
    if junit.is_file():
        (logs / "gpu_tests.xml").write_bytes(junit.read_bytes())
    (logs / LOG_NAME).write_bytes(log_path.read_bytes())
    out.mkdir(parents=True, exist_ok=True)
    archive = out / ARCHIVE_NAME
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(pack.rglob("*")):
            if path.is_file():
                tar.add(path, arcname=str(path.relative_to(pack)))
    (out / LOG_NAME).write_bytes(log_path.read_bytes())
    return archive


# ---------------------------------------------------------------- checking an archive

MEMBER = re.compile(r"^(docs/results/[a-z0-9_]+\.json|docs/figures/[a-z_]+/[A-Za-z0-9_.-]+\.(png|svg)|logs/[\w.-]+)$")
PROVENANCE_KEYS = {"command", "device", "versions", "date"}


def check_archive(archive: Path, device_prefix: str) -> list[str]:
    """Return the problems of an archive: stray paths, result files without provenance or on the wrong device."""
    problems = []
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar.getmembers():
            if not member.isfile() or not MEMBER.match(member.name):
                problems.append(f"{member.name}: not a file under docs/results/, docs/figures/<topic>/ or logs/")
                continue
            if member.name.startswith("docs/results/"):
                record = json.loads(tar.extractfile(member).read())
                stem = Path(member.name).stem
                if record.get("name") != stem:
                    problems.append(f"{member.name}: its name field is {record.get('name')!r}, not {stem!r}")
                provenance = record.get("provenance", {})
                if not PROVENANCE_KEYS <= set(provenance):
                    problems.append(f"{member.name}: provenance lacks {sorted(PROVENANCE_KEYS - set(provenance))}")
                elif not str(provenance["device"]).startswith(device_prefix):
                    problems.append(f"{member.name}: device {provenance['device']!r} does not start {device_prefix!r}")
    return problems


def unpack(archive: Path, into: Path) -> list[Path]:
    """Check the archive, then extract its docs/ into ``into``; return the files written."""
    problems = check_archive(archive, "GPU:")
    if problems:
        raise SystemExit("the archive has problems, nothing unpacked:\n  " + "\n  ".join(problems))
    written = []
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar.getmembers():
            if member.name.startswith("docs/"):
                target = into / member.name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(tar.extractfile(member).read())
                written.append(target)
    return written


# ---------------------------------------------------------------- the dry run's own checks


def collected_gpu_tests(log_text: str) -> list[str]:
    """Return the node ids that `pytest --collect-only -q` printed."""
    return sorted(line.strip() for line in log_text.splitlines() if "::" in line and line.startswith("tests/"))


def manifest_tests() -> list[str]:
    """Return the gpu tests listed in tools/gpu_tests.txt (comments and blank lines skipped)."""
    lines = MANIFEST.read_text().splitlines()
    return sorted(line.strip() for line in lines if line.strip() and not line.startswith("#"))


def check_flags(module: str, args: list[str], python: str) -> list[str]:
    """Return the flags in args that `python -m module --help` does not list, and values outside its choices."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "code"), os.environ.get("PYTHONPATH", "")]))
    helptext = subprocess.run(
        [python, "-m", module, "--help"], capture_output=True, text=True, env=env, timeout=120, check=True
    ).stdout
    listed = set(re.findall(r"--[a-z][a-z0-9-]*", helptext))
    choices = {flag: set(words.split(",")) for flag, words in re.findall(r"(--[a-z][a-z0-9-]*) \{([^}]*)\}", helptext)}
    problems, flag = [], None
    for arg in args:
        if arg.startswith("--"):
            flag = arg
            if arg not in listed:
                problems.append(arg)
        elif flag in choices and arg not in choices[flag]:
            problems.append(f"{flag} {arg} (choices: {sorted(choices[flag])})")
    return problems


def dry_run_problems(log_path: Path, archive: Path, outcomes: list[Outcome]) -> list[str]:
    """Return what the dry run found wrong: failed steps, a changed gpu-test list, a bad archive."""
    problems = [f"step {o.name}: {o.status}" for o in outcomes if o.status != "ok"]
    collected, expected = collected_gpu_tests(log_path.read_text()), manifest_tests()
    if collected != expected:
        added, gone = sorted(set(collected) - set(expected)), sorted(set(expected) - set(collected))
        problems.append(
            f"the gpu tests changed (added {added[:5]}, gone {gone[:5]}): check that the GPU run still fits "
            "its time limits, then rewrite tools/gpu_tests.txt with tools/gpu_run.sh --list-gpu-tests"
        )
    problems += check_archive(archive, "CPU:")
    with tempfile.TemporaryDirectory() as scratch:
        with tarfile.open(archive, "r:gz") as tar:
            tar.extractall(scratch, filter="data")
        results = sorted(p.name for p in Path(scratch, "docs", "results").glob("*.json"))
        figures = sorted(str(p.relative_to(scratch)) for p in Path(scratch, "docs", "figures").rglob("*.png"))
        for wanted in ("flash_gpu.json", "kvcache_gpu_naive_vs_cached.json", "kvcache_gpu_vs_transformers.json"):
            if wanted not in results:
                problems.append(f"the archive has no docs/results/{wanted} (it has {results})")
        for wanted in ("docs/figures/flash/gpu_tflops.png", "docs/figures/kvcache/gpu_prefill_decode.png"):
            if wanted not in figures:
                problems.append(f"the archive has no {wanted}")
        problems += untranslated_tables(Path(scratch, "docs", "results"))
    return problems


TABLE_MARKER = re.compile(r"\{\{table\s+(\S+)\s+(\S+)\s*\}\}")


def untranslated_tables(results: Path) -> list[str]:
    """Return the labels that the pages' tables of these result files would show untranslated.

    A GPU run writes rows no CPU build has rendered; a missing zh-TW label found only after the run
    would cost a second run, so the dry run renders them here first.
    """
    sys.path.insert(0, str(ROOT / "code"))  # the package runs from code/, installed or not
    from inferlab.bench import labels

    problems = []
    for page in sorted((ROOT / "docs").rglob("*.md")):
        for name, key in TABLE_MARKER.findall(page.read_text(encoding="utf-8")):
            path = results / f"{name}.json"
            if not path.is_file():
                continue
            rows = json.loads(path.read_text(encoding="utf-8"))["values"]
            for part in key.split("."):
                rows = rows[int(part)] if isinstance(rows, list) else rows[part]
            where = f"{page.relative_to(ROOT)}: {{{{table {name} {key}}}}}"
            problems += [f"{where}: {problem} in inferlab/bench/labels.py" for problem in labels.table_problems(rows)]
    # The dry run's sizes are too small for the goal rows (N >= 4096), which a GPU run fills with
    # comparison rows; check those columns now.
    path = results / "flash_gpu.json"
    if path.is_file():
        rows = json.loads(path.read_text(encoding="utf-8"))["values"]["comparison_rows"]
        problems += [f"flash_gpu comparison_rows: {problem}" for problem in labels.table_problems(rows)]
    return problems


def junit_summary(path: Path) -> str:
    """Return one line counting the gpu tests' results from pytest's JUnit XML (or why there is none)."""
    import xml.etree.ElementTree as ElementTree

    if not path.is_file():
        return "gpu tests: no report (the step did not finish)"
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite in ElementTree.parse(path).getroot().iter("testsuite"):
        for key in counts:
            counts[key] += int(suite.get(key, 0))
    passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    failed = counts["failures"] + counts["errors"]
    return f"gpu tests (JUnit report): passed {passed}, failed {failed}, skipped {counts['skipped']}"


# ---------------------------------------------------------------- main


def install_wheels(wheels: Path, python: str, work: Path, log) -> Path | None:
    """Install carried wheels (a folder of .whl files, no network) into a folder put on PYTHONPATH."""
    files = sorted(str(p) for p in wheels.glob("*.whl"))
    if not files:
        return None
    site = work / "site-packages"
    argv = [python, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--target", str(site)]
    log.write(f"installing carried wheels: {files}\n")
    subprocess.run([*argv, *files], check=True, stdout=log, stderr=subprocess.STDOUT, timeout=120)
    return site


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--dry-run", action="store_true", help="run every step on tiny sizes on a CPU")
    parser.add_argument("--full", action="store_true", help="with --dry-run: also run the speculative bench (slow)")
    parser.add_argument("--out", type=Path, help="where the archive and log go (default $OUT, else ./gpu_run_out)")
    parser.add_argument("--work", type=Path, help="scratch folder (default: a new temporary folder)")
    parser.add_argument("--wheels", type=Path, default=ROOT / ".whl", help="carried wheels to install (default .whl/)")
    parser.add_argument(
        "--deadline", type=float, help=f"seconds for the whole run (default {DEADLINE_S}; dry run {DRY_RUN_DEADLINE_S})"
    )
    parser.add_argument("--python", default=sys.executable, help="the Python that runs every step")
    parser.add_argument("--list-gpu-tests", action="store_true", help="print the gpu tests (for tools/gpu_tests.txt)")
    parser.add_argument("--unpack", type=Path, metavar="ARCHIVE", help="check an archive and unpack its docs/ here")
    parser.add_argument("--check-flags", metavar="MODULE", help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args(argv)
    if rest and not args.check_flags:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    args.rest = rest
    if os.sep in args.python:  # a relative path would break in the steps' own working folders
        args.python = os.path.abspath(args.python)  # (not resolve(): a venv's python is a symlink)
    if args.full and not args.dry_run:
        parser.error("--full only applies with --dry-run")
    if args.deadline is None:
        args.deadline = DRY_RUN_DEADLINE_S if args.dry_run else DEADLINE_S
    if args.deadline <= PACK_RESERVE_S:
        parser.error(f"--deadline must be more than {PACK_RESERVE_S} s, got {args.deadline}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.check_flags:
        missing = check_flags(args.check_flags, args.rest, args.python)
        print(f"{args.check_flags}: " + (f"not in its --help: {missing}" if missing else f"flags ok: {args.rest}"))
        return 1 if missing else 0
    if args.unpack:
        for path in unpack(args.unpack, ROOT):
            print(f"unpacked {path.relative_to(ROOT)}")
        return 0
    if args.list_gpu_tests:
        env = step_environment(ROOT, {}, None)
        done = subprocess.run(
            [args.python, "-m", "pytest", "-m", "gpu", "--collect-only", "-q", "-p", "no:cacheprovider"]
            + gpu_test_files(),
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
        print(MANIFEST_HEADER + "\n".join(collected_gpu_tests(done.stdout)))
        return done.returncode

    deadline = time.monotonic() + args.deadline
    out = args.out or Path(os.environ.get("OUT") or "gpu_run_out")
    work = args.work or Path(tempfile.mkdtemp(prefix="gpu_run_"))
    work.mkdir(parents=True, exist_ok=True)
    log_path = work / LOG_NAME
    steps = dry_steps(args.python, args.full) if args.dry_run else gpu_steps(args.python)
    with open(log_path, "w", encoding="utf-8") as log:
        log.write(f"tools/gpu_run.py {'--dry-run ' if args.dry_run else ''}started {time.strftime('%F %T %Z')}\n")
        wheels_site = install_wheels(args.wheels, args.python, work, log) if args.wheels.is_dir() else None
        outcomes = run_steps(steps, work, deadline, log, wheels_site)
        lines = [f"  {o.name:<18} {o.status:<40} {o.seconds:>6.1f} s" for o in outcomes]
        log.write("\nsummary:\n" + "\n".join(lines) + "\n")
    archive = pack_archive(collect(steps, work), work, out, log_path, outcomes)
    print("\nsummary:\n" + "\n".join(lines))
    print(f"wrote {archive} and {out / LOG_NAME} (scratch folder {work})")
    if args.dry_run:
        problems = dry_run_problems(log_path, archive, outcomes)
        print("dry run: " + ("ok" if not problems else "problems:\n  " + "\n  ".join(problems)))
        return 1 if problems else 0
    print(junit_summary(work / "stages" / "gpu_tests" / "gpu_tests.xml"))
    problems = check_archive(archive, "GPU:")
    print("archive check: " + ("ok" if not problems else "problems:\n  " + "\n  ".join(problems)))
    return 0 if all(o.status == "ok" for o in outcomes) and not problems else 1


if __name__ == "__main__":
    sys.exit(main())
