"""tools/gpu_run.sh, the GPU half in one run: its CPU dry run end to end, then its parts one by one.

The dry run is what CI can check of a script that only a GPU machine runs for real: every step's
command, each GPU bench's argument parsing and result writing on tiny sizes, the list of gpu
tests, and that the archive unpacks into docs/results/ and docs/figures/.
"""

from __future__ import annotations

import importlib.util
import io
import itertools
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent


def load_gpu_run():
    spec = importlib.util.spec_from_file_location("gpu_run", ROOT / "tools" / "gpu_run.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_run"] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


gpu_run = load_gpu_run()


def checkout_twins(archive: Path) -> list[Path]:
    """Return the checkout paths a dry run must not write: each archived file, under its own and its bench's name."""
    paths = []
    with tarfile.open(archive, "r:gz") as tar:
        for name in tar.getnames():
            if name.startswith("docs/"):
                paths.append(ROOT / name)
                paths.append(ROOT / name.replace("_gpu_", "_").replace("/gpu_", "/"))
    return paths


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    out, work = tmp_path_factory.mktemp("out"), tmp_path_factory.mktemp("work")
    started = time.time()
    done = subprocess.run(
        ["bash", str(ROOT / "tools" / "gpu_run.sh"), "--dry-run", "--out", str(out), "--work", str(work)],
        env=dict(os.environ, PYTHON=sys.executable),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    return done, out / "gpu_run.tar.gz", started


def archived_json(archive: Path, name: str) -> dict:
    with tarfile.open(archive, "r:gz") as tar:
        return json.loads(tar.extractfile(name).read())


@pytest.mark.slow
def test_dry_run_passes_and_leaves_the_checkout_alone(dry_run):
    done, archive, started = dry_run
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-3000:]
    assert done.stdout.rstrip().endswith("dry run: ok")
    for path in checkout_twins(archive):
        assert not path.exists() or path.stat().st_mtime < started, f"the dry run wrote {path} in the checkout"


@pytest.mark.slow
def test_dry_run_archive_holds_every_bench_file(dry_run):
    _, archive, _ = dry_run
    with tarfile.open(archive, "r:gz") as tar:
        names = set(tar.getnames())
    kvcache_parts = ["sizes", "causality", "naive_vs_cached", "prefill_decode", "train_vs_generate", "vs_transformers"]
    for part in kvcache_parts:
        record = archived_json(archive, f"docs/results/kvcache_gpu_{part}.json")
        assert record["name"] == f"kvcache_gpu_{part}"
        assert record["provenance"]["renamed_from"] == f"kvcache_{part}"
        assert "--device cpu --tiny" in record["provenance"]["command"]
    for figure in ("gpu_tflops", "gpu_tflops_backward", "gpu_memory"):
        assert f"docs/figures/flash/{figure}.png" in names
    for figure in ("naive_vs_cached", "prefill_decode", "cache_per_token"):
        assert f"docs/figures/kvcache/gpu_{figure}.png" in names
    assert {"logs/gpu_run.log", "logs/summary.json"} <= names
    steps = json.loads(tarfile.open(archive, "r:gz").extractfile("logs/summary.json").read())
    assert [s["name"] for s in steps] == ["environment", "gpu tests", "flash", "kvcache", "speculative flags"]


@pytest.mark.slow
def test_dry_run_flash_file_has_a_row_for_every_configuration(dry_run):
    _, archive, _ = dry_run
    values = archived_json(archive, "docs/results/flash_gpu.json")["values"]
    methods = ["triton (ours)", "sdpa flash", "tiled (PyTorch)", "standard"]
    # The dry run's sizes (tools/gpu_run.py dry_steps): N 16, d 16, both dtypes, causal and not.
    wanted = set(itertools.product(methods, ["float16", "bfloat16"], [16], [False, True], [16]))
    got = {(r["method"], r["dtype"], r["d"], r["causal"], r["N"]) for r in values["rows"]}
    assert got == wanted
    for row in values["rows"]:
        assert row["status"] == "ok", row
        assert row["fwd_ms"] > 0 and row["bwd_ms"] > 0
    assert len(values["comparison_rows"]) == len(wanted) // len(methods)
    assert {r["method"] for r in values["memory"]["rows"]} == set(methods)
    assert values["measured"] is False  # a CPU plumbing check is never taken for a GPU measurement


def test_a_step_past_its_limit_is_stopped_with_its_children(tmp_path):
    parent = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
        "print('child', child.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    log_path = tmp_path / "log"
    started = time.monotonic()
    with open(log_path, "w") as log:
        status = gpu_run.run_command([sys.executable, "-c", parent], 3, tmp_path, dict(os.environ), log)
    assert status == "timeout after 3 s"
    assert time.monotonic() - started < 30
    child = int(log_path.read_text().split("child")[1].split()[0])
    assert stops_running(child, within_s=15), f"process {child} of the stopped step still runs"


def stops_running(pid: int, within_s: float) -> bool:
    """Return True once pid is gone or a zombie (a signal takes effect when the process next runs)."""
    state = Path(f"/proc/{pid}/status")
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if "\nState:\tZ" in state.read_text():
                return True
        except FileNotFoundError:
            return True
        time.sleep(0.2)
    return False


def python_step(name: str, code: str, seconds: int = 60) -> object:
    return gpu_run.Step(name, [sys.executable, "-c", code], seconds)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the run on a machine without a GPU")
def test_the_real_run_without_a_gpu_stops_after_the_environment_step_and_still_packs(tmp_path):
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gpu_run.py"), "--out", str(tmp_path), "--work", str(tmp_path / "w")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1
    assert "no CUDA GPU: run with --dry-run on a CPU" in done.stdout
    summary = json.loads(tarfile.open(tmp_path / "gpu_run.tar.gz").extractfile("logs/summary.json").read())
    assert [s["status"] for s in summary] == ["failed (exit 1)"] + ["skipped: the environment step failed"] * 4
    assert (tmp_path / "gpu_run.log").is_file()


def test_the_run_goes_on_after_a_failed_step(tmp_path):
    steps = [
        python_step("environment", "pass"),
        python_step("broken", "raise SystemExit(3)"),
        python_step("after", "print('still ran')"),
    ]
    log_path = tmp_path / "log"
    with open(log_path, "w") as log:
        outcomes = gpu_run.run_steps(steps, tmp_path, time.monotonic() + 300, log, None)
    assert [o.status for o in outcomes] == ["ok", "failed (exit 3)", "ok"]
    assert "still ran" in log_path.read_text()


def test_a_failed_environment_or_a_spent_deadline_skips_the_rest(tmp_path):
    with open(tmp_path / "log", "w") as log:
        outcomes = gpu_run.run_steps(
            [python_step("environment", "raise SystemExit(1)"), python_step("flash", "pass")],
            tmp_path,
            time.monotonic() + 300,
            log,
            None,
        )
        assert [o.status for o in outcomes] == ["failed (exit 1)", "skipped: the environment step failed"]
        late = time.monotonic() + gpu_run.PACK_RESERVE_S + 5  # less than 10 s left for any step
        outcomes = gpu_run.run_steps([python_step("environment", "pass")], tmp_path, late, log, None)
        assert [o.status for o in outcomes] == ["skipped: out of time"]


def test_the_flash_step_gets_a_budget_that_ends_before_its_limit(tmp_path):
    argv = gpu_run.fill_placeholders(["--max-seconds", "{flash_seconds}", "--junitxml={stage}/x.xml"], 200, tmp_path)
    assert argv == ["--max-seconds", str(200 - gpu_run.FLASH_WRAP_UP_S), f"--junitxml={tmp_path}/x.xml"]


def fake_bench_output(work: Path, step: str, stem: str, device: str) -> None:
    """Write what a bench leaves in its scratch folder: a result file and a figure."""
    docs = gpu_run.make_stage(work / "stages" / step) / "docs"
    record = {"name": stem, "provenance": {"command": "c", "device": device, "versions": {}, "date": "d"}}
    (docs / "results" / f"{stem}.json").write_text(json.dumps(record))
    (docs / "figures" / step).mkdir(parents=True)
    (docs / "figures" / step / "curve.png").write_bytes(b"png")


def test_bench_files_are_renamed_packed_and_unpacked(tmp_path):
    work, out, checkout = tmp_path / "work", tmp_path / "out", tmp_path / "checkout"
    fake_bench_output(work, "kvcache", "kvcache_sizes", "GPU: NVIDIA H200")
    fake_bench_output(work, "flash", "flash_gpu", "GPU: NVIDIA H200")
    steps = [gpu_run.Step("kvcache", [], 1, "kvcache", rename=True), gpu_run.Step("flash", [], 1, "flash")]
    (work / "log").write_text("log text\n")
    pack = gpu_run.collect(steps, work)
    archive = gpu_run.pack_archive(pack, work, out, work / "log", [gpu_run.Outcome("flash", "ok", 1.0)])
    assert gpu_run.check_archive(archive, "GPU:") == []
    assert "does not start 'CPU:'" in gpu_run.check_archive(archive, "CPU:")[0]
    written = sorted(str(p.relative_to(checkout)) for p in gpu_run.unpack(archive, checkout))
    assert written == [
        "docs/figures/flash/curve.png",
        "docs/figures/kvcache/gpu_curve.png",
        "docs/results/flash_gpu.json",
        "docs/results/kvcache_gpu_sizes.json",
    ]
    record = json.loads((checkout / "docs/results/kvcache_gpu_sizes.json").read_text())
    assert (record["name"], record["provenance"]["renamed_from"]) == ("kvcache_gpu_sizes", "kvcache_sizes")
    assert (out / "gpu_run.log").read_text() == "log text\n"


def add_member(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def test_archive_check_names_each_bad_member(tmp_path):
    archive = tmp_path / "bad.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        add_member(tar, "../escape.json", b"{}")
        add_member(tar, "docs/results/flash_gpu.json", json.dumps({"name": "other", "provenance": {}}).encode())
        add_member(tar, "docs/figures/flash/deeper/x.png", b"png")
    problems = gpu_run.check_archive(archive, "GPU:")
    assert len(problems) == 4, problems
    assert problems[0].startswith("../escape.json: not a file under")
    assert "its name field is 'other'" in problems[1]
    assert "provenance lacks ['command', 'date', 'device', 'versions']" in problems[2]
    assert problems[3].startswith("docs/figures/flash/deeper/x.png")
    with pytest.raises(SystemExit, match="nothing unpacked"):
        gpu_run.unpack(archive, tmp_path / "checkout")
    assert not (tmp_path / "checkout").exists()


def test_speculative_call_is_checked_against_the_bench_help():
    assert gpu_run.check_flags("inferlab.speculative.bench", gpu_run.SPECULATIVE_GPU_ARGS, sys.executable) == []
    problems = gpu_run.check_flags(
        "inferlab.speculative.bench", ["--parts", "gamma", "nonsense", "--no-such-flag", "3"], sys.executable
    )
    assert problems[0].startswith("--parts nonsense (choices:")
    assert problems[1:] == ["--no-such-flag"]


def test_junit_summary_counts_what_pytest_reports(tmp_path):
    (tmp_path / "test_mixed.py").write_text(
        "import pytest\n"
        "def test_a(): pass\n"
        "def test_b(): pass\n"
        "def test_c(): assert False\n"
        "def test_d(): pytest.skip('no GPU')\n"
    )
    report = tmp_path / "report.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", "test_mixed.py"],
        cwd=tmp_path,
        capture_output=True,
    )
    assert gpu_run.junit_summary(report) == "gpu tests (JUnit report): passed 2, failed 1, skipped 1"
    assert gpu_run.junit_summary(tmp_path / "missing.xml") == "gpu tests: no report (the step did not finish)"


def test_manifest_lists_each_gpu_test_once():
    tests = gpu_run.manifest_tests()
    assert len(tests) == len(set(tests)) > 0
    assert {t.split("::")[0] for t in tests} <= set(gpu_run.gpu_test_files())


def test_device_time_repeats_slow_calls_less():
    from inferlab.flash.bench import SECONDS_PER_MEASUREMENT, device_time

    calls = []
    device_time(lambda: calls.append(1), repeat=5, device=torch.device("cpu"))
    assert len(calls) == 1 + 5  # a warm-up, then every repeat of a fast call

    calls.clear()
    device_time(lambda: (calls.append(1), time.sleep(SECONDS_PER_MEASUREMENT)), repeat=10, device=torch.device("cpu"))
    assert len(calls) == 1 + 3  # a slow call: a warm-up and the minimum of 3 timed calls


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--ns", "16"], "--ns only apply with --gpu"),
        (["--gpu", "--ns", "0"], "--ns must be integers >= 1"),
        (["--gpu", "--head-dims", "48"], "--head-dims must each be one of (16, 32, 64, 128)"),
        (["--gpu", "--dtypes", "float64"], "--dtypes must each be float16, bfloat16 or float32"),
        (["--gpu", "--repeat", "0"], "--repeat must be an integer >= 1"),
        (["--gpu", "--max-seconds", "0"], "--max-seconds must be > 0"),
        (["--gpu", "--device", "tpu"], "--device must be cuda or cpu"),
    ],
)
def test_flash_gpu_options_are_checked_before_any_work(argv, words, capsys):
    from inferlab.flash.bench import main

    with pytest.raises(SystemExit):
        main(argv)
    assert words in capsys.readouterr().err


def test_flash_cpu_plumbing_run_needs_the_interpreter_and_a_scratch_folder(monkeypatch, capsys):
    from inferlab.flash.bench import main

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(SystemExit):
        main(["--gpu", "--device", "cpu"])
    assert "set TRITON_INTERPRET=1" in capsys.readouterr().err
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.delenv("INFERLAB_RESULTS", raising=False)
    with pytest.raises(SystemExit):
        main(["--gpu", "--device", "cpu"])
    assert "set INFERLAB_RESULTS to a scratch folder" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without a GPU")
def test_kvcache_bench_refuses_cuda_without_a_gpu(capsys):
    from inferlab.kvcache.bench import main

    with pytest.raises(SystemExit):
        main(["--device", "cuda"])
    assert "--device cuda needs a CUDA GPU" in capsys.readouterr().err
