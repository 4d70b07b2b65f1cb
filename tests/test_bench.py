"""inferlab.bench: the timing harness and the result files every number on the site comes from."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import inferlab
from inferlab import bench


class FakeClock:
    """A perf_counter that moves only when a timed function "runs" for a scripted duration."""

    def __init__(self, durations):
        self.now = 100.0
        self.durations = list(durations)
        self.calls = 0

    def perf_counter(self):
        return self.now

    def work(self):
        self.calls += 1
        self.now += self.durations.pop(0)


@pytest.fixture
def clock(monkeypatch):
    def install(durations):
        fake = FakeClock(durations)
        monkeypatch.setattr(bench, "time", SimpleNamespace(perf_counter=fake.perf_counter))
        return fake

    return install


def test_time_call_reports_the_median_and_the_spread_of_the_timed_runs(clock):
    # Two warm-up calls (500 s each, never counted), then five timed ones: median 3, not the mean 4.
    fake = clock([500, 500, 3, 1, 2, 10, 4])
    assert bench.time_call(fake.work, repeat=5, warmup=2) == {"median_s": 3, "min_s": 1, "max_s": 10}
    assert fake.calls == 7


def test_time_call_median_of_an_even_count_is_the_midpoint(clock):
    fake = clock([1, 2, 3, 10])
    assert bench.time_call(fake.work, repeat=4, warmup=0)["median_s"] == pytest.approx(2.5)


def test_time_interleaved_runs_round_robin_and_times_each_callable_apart(clock):
    order = []
    fake = clock([9, 9, 1, 50, 3, 60, 2, 70])  # 2 warm-ups, then a, b, a, b, a, b

    def timed(name):
        def run():
            order.append(name)
            fake.work()

        return run

    stats = bench.time_interleaved({"a": timed("a"), "b": timed("b")}, repeat=3, warmup=1)
    assert order == ["a", "b", "a", "b", "a", "b", "a", "b"]
    assert stats == {
        "a": {"median_s": 2, "min_s": 1, "max_s": 3},
        "b": {"median_s": 60, "min_s": 50, "max_s": 70},
    }


def test_defaults_are_one_warm_up_and_five_timed_runs(clock):
    fake = clock([100, 5, 4, 3, 2, 1])
    assert bench.time_call(fake.work) == {"median_s": 3, "min_s": 1, "max_s": 5}
    assert fake.calls == 6
    fake = clock([100, 5, 4, 3, 2, 1])
    assert bench.time_interleaved({"only": fake.work}) == {"only": {"median_s": 3, "min_s": 1, "max_s": 5}}
    assert fake.calls == 6


def test_one_run_without_warm_up_is_allowed(clock):
    fake = clock([7])
    assert bench.time_call(fake.work, repeat=1, warmup=0) == {"median_s": 7, "min_s": 7, "max_s": 7}
    fake = clock([7])
    assert bench.time_interleaved({"f": fake.work}, repeat=1, warmup=0) == {
        "f": {"median_s": 7, "min_s": 7, "max_s": 7}
    }


@pytest.mark.parametrize("timer", [bench.time_call, lambda fn, **kw: bench.time_interleaved({"f": fn}, **kw)])
@pytest.mark.parametrize(("kwargs", "word"), [({"repeat": 0}, "repeat"), ({"warmup": -1}, "warmup")])
def test_bad_repeat_or_warmup_is_refused_before_any_call(timer, kwargs, word):
    calls = []
    with pytest.raises(ValueError, match=word):
        timer(lambda: calls.append(1), **kwargs)
    assert calls == []


@pytest.fixture
def results(tmp_path, monkeypatch):
    folder = tmp_path / "results"
    monkeypatch.setenv(bench.RESULTS_ENV, str(folder))
    return folder


def test_a_result_round_trips_with_its_provenance(results):
    values = {"ratio": 0.25, "rows": [{"n": 1, "t": 2.5}], "label": "naïve 快取"}
    path = bench.write_result("demo_result", values, command="python -m demo --quick")
    assert path == results / "demo_result.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    assert record == bench.read_result("demo_result")
    assert record["name"] == "demo_result" and record["values"] == values
    provenance = record["provenance"]
    assert provenance["command"] == "python -m demo --quick"
    assert provenance["versions"]["torch"] == torch.__version__
    assert provenance["versions"]["inferlab"] == inferlab.__version__
    assert provenance["versions"]["python"] == platform.python_version()
    written = dt.datetime.strptime(provenance["date"], "%Y-%m-%d %H:%M UTC").replace(tzinfo=dt.timezone.utc)
    assert abs(dt.datetime.now(dt.timezone.utc) - written) < dt.timedelta(minutes=5)
    assert provenance["device"] == bench.device_description()


def test_the_default_command_is_the_module_a_reader_types(results, monkeypatch):
    # `python -m inferlab.kvcache.bench --quick` leaves the module's absolute file path in argv[0].
    running = bench.repo_root() / "code" / "inferlab" / "kvcache" / "bench.py"
    monkeypatch.setattr(bench.sys, "argv", [str(running), "--quick"])
    main = SimpleNamespace(__spec__=SimpleNamespace(name="inferlab.kvcache.bench"))
    monkeypatch.setitem(bench.sys.modules, "__main__", main)
    bench.write_result("demo_command", {"x": 1})
    assert bench.read_result("demo_command")["provenance"]["command"] == "python -m inferlab.kvcache.bench --quick"


def test_a_script_run_and_path_arguments_are_recorded_without_this_machines_paths(results, monkeypatch):
    root = bench.repo_root()
    script = root / "tools" / "some_script.py"
    argv = [str(script), "--target", str(root / "models" / "t"), f"--out={root / 'x.json'}", "/elsewhere/y.json"]
    monkeypatch.setattr(bench.sys, "argv", argv)
    monkeypatch.setitem(bench.sys.modules, "__main__", SimpleNamespace(__spec__=None))
    command = bench.provenance()["command"]
    assert command == "python tools/some_script.py --target models/t --out=x.json y.json"
    # An explicit command gets the same treatment.
    assert bench.provenance(f"python -m demo --target {root / 'm'}")["command"] == "python -m demo --target m"


def test_python_dash_m_records_the_module_name_end_to_end(tmp_path):
    (tmp_path / "demo_bench.py").write_text(
        "from inferlab.bench import write_result\nwrite_result('demo_end_to_end', {'x': 1})\n", encoding="utf-8"
    )
    env = {**os.environ, bench.RESULTS_ENV: str(tmp_path / "out")}
    subprocess.run([sys.executable, "-m", "demo_bench", "--quick"], cwd=tmp_path, env=env, check=True)
    record = json.loads((tmp_path / "out" / "demo_end_to_end.json").read_text(encoding="utf-8"))
    assert record["provenance"]["command"] == "python -m demo_bench --quick"


def test_the_date_is_utc_whatever_the_local_time_zone(results, monkeypatch):
    import time

    monkeypatch.setenv("TZ", "Asia/Taipei")  # UTC+8, no daylight saving
    time.tzset()
    try:
        date = bench.provenance()["date"]
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    written = dt.datetime.strptime(date, "%Y-%m-%d %H:%M UTC").replace(tzinfo=dt.timezone.utc)
    assert abs(dt.datetime.now(dt.timezone.utc) - written) < dt.timedelta(minutes=5)


def test_versions_name_every_library_that_shapes_the_numbers(monkeypatch):
    import numpy
    import tokenizers
    import transformers

    versions = bench.library_versions()
    expected = {"torch": torch, "transformers": transformers, "tokenizers": tokenizers, "numpy": numpy}
    for name, module in expected.items():
        assert versions[name] == module.__version__
    monkeypatch.setitem(bench.sys.modules, "vllm", SimpleNamespace())  # imported, but without __version__
    assert bench.library_versions()["vllm"] == "unknown"


def test_a_missing_result_file_is_an_error_naming_it(results):
    with pytest.raises(FileNotFoundError, match="never_written"):
        bench.read_result("never_written")


@pytest.mark.parametrize("name", ["", "../escaped", "sub/escaped", ".hidden", "{tmp}/escaped"])
def test_names_that_are_not_plain_file_stems_are_refused(results, name):
    name = name.format(tmp=results.parent)  # an absolute path, inside the test's own folder
    with pytest.raises(ValueError, match="name"):
        bench.write_result(name, {"x": 1})
    assert [p for p in results.parent.rglob("*") if p.is_file()] == []  # nothing written, anywhere


def test_a_failed_write_leaves_the_previous_file_whole(results):
    bench.write_result("kept", {"speedup": 2.0})
    before = (results / "kept.json").read_bytes()
    with pytest.raises((TypeError, ValueError)):
        bench.write_result("kept", {"speedup": 3.0, "zzz_last": object()})  # not JSON: fails mid-record
    assert (results / "kept.json").read_bytes() == before
    assert sorted(p.name for p in results.iterdir()) == ["kept.json"]  # no half-written leftovers


def test_results_dir_prefers_the_environment_then_the_checkout(tmp_path, monkeypatch):
    monkeypatch.setenv(bench.RESULTS_ENV, str(tmp_path / "elsewhere"))
    assert bench.results_dir() == tmp_path / "elsewhere"
    monkeypatch.delenv(bench.RESULTS_ENV)
    (tmp_path / "mkdocs.yml").write_text("site_name: x\n")
    (tmp_path / "docs" / "sub").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "docs" / "sub")  # found by searching up from the working directory
    assert bench.results_dir() == tmp_path / "docs" / "results"
    (tmp_path / "mkdocs.yml").unlink()  # a docs/ folder alone is not a checkout: the package's own is used
    assert bench.repo_root() != tmp_path


def test_device_description_names_the_gpu_or_the_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert bench.device_description().startswith("CPU: ") and f"{os.cpu_count()} cores" in bench.device_description()
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as cpuinfo:
            names = [line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")]
        if names:
            assert bench.device_description().startswith(f"CPU: {names[0]}, ")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=0: "Tesla T4")
    assert bench.device_description() == "GPU: Tesla T4"


# ---- steadiness of repeated timings ------------------------------------------------------------


def test_spread_is_the_slowest_over_the_fastest_repeat():
    assert bench.spread([2.0, 3.0, 2.5]) == 1.5
    assert bench.spread([0.1]) == 1.0
    assert bench.spread([1.0, 1.0004]) == 1.0  # rounded to three places
    assert bench.spread([3.0, 1.0, 2.0]) == 3.0  # order does not matter
    for bad in ([], [0.0, 1.0], [-1.0, 2.0]):
        with pytest.raises(ValueError, match=r"seconds must be a non-empty list of positive timings, got "):
            bench.spread(bad)


def test_unsteady_names_every_spread_above_the_limit_wherever_it_sits():
    values = {
        "spread": 1.6,
        "plain_spread": 1.5,  # at the limit: steady
        "rows": [{"spread": 1.2}, {"spread": 2.0, "other": 9.0}],
        "nested": {"deep": {"kv_spread": 1.51, "speedup": 7.0}},
        "spreadsheet": 3.0,  # not a spread: only "spread" and "*_spread" count
        "label_spread": "wide",  # not a number
    }
    assert bench.unsteady(values) == [
        "values.spread = 1.6",
        "values.rows[1].spread = 2.0",
        "values.nested.deep.kv_spread = 1.51",
    ]
    assert bench.unsteady(values, limit=1.55, where="r") == ["r.spread = 1.6", "r.rows[1].spread = 2.0"]
    assert bench.SPREAD_LIMIT == 1.5
    assert bench.unsteady([1.9, {"spread": 1.0}]) == []


def test_the_garbage_collector_is_off_inside_the_block_and_restored_after():
    import gc

    was_on = gc.isenabled()
    try:
        gc.enable()
        with bench.garbage_collector_off():
            assert not gc.isenabled()
        assert gc.isenabled()
        gc.disable()
        with bench.garbage_collector_off():
            assert not gc.isenabled()
        assert not gc.isenabled()  # it was off before: it stays off
        gc.enable()
        with pytest.raises(RuntimeError), bench.garbage_collector_off():
            raise RuntimeError("a failed measurement")
        assert gc.isenabled()  # restored even when the block fails
    finally:
        (gc.enable if was_on else gc.disable)()


# ---- the file write_result leaves ----------------------------------------------------------------


def test_result_file_is_indented_utf8_json_in_a_new_nested_folder(monkeypatch, tmp_path):
    """The file is what json.dumps gives with two-space indents and real characters (reviewers read the
    diffs of these files, in Chinese too), ends with a newline, and no temporary file is left."""
    folder = tmp_path / "new" / "nested" / "results"  # none of it exists yet
    monkeypatch.setenv(bench.RESULTS_ENV, str(folder))
    values = {"label": "每次目標模型呼叫的詞元數", "rows": [{"speedup": 1.5}], "count": 3}
    path = bench.write_result("utf8_check", values, command="python -m inferlab.x --flag")
    record = json.loads(path.read_bytes().decode("utf-8"))
    assert path.read_bytes().decode("utf-8") == json.dumps(record, indent=2, ensure_ascii=False) + "\n"
    assert "每次目標模型呼叫的詞元數" in path.read_text(encoding="utf-8")  # not \\u escapes
    assert record["values"] == values and record["name"] == "utf8_check"
    assert sorted(p.name for p in folder.iterdir()) == ["utf8_check.json"]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"a": float("nan")}, "values['a'] must be a finite number (JSON has no NaN or inf), got nan"),
        ({"rows": [1.0, float("inf")]}, "values['rows'][1] must be a finite number (JSON has no NaN or inf), got inf"),
        ({"a": {1: 2}}, "values['a'] must have str keys, got [1]"),
        ({"a": object()}, "values['a'] must be a JSON value (number, str, list, dict, None), got object"),
    ],
    ids=["nan", "inf-in-a-list", "int-key", "object"],
)
def test_write_result_names_the_value_that_is_not_json_and_writes_nothing(monkeypatch, tmp_path, values, message):
    monkeypatch.setenv(bench.RESULTS_ENV, str(tmp_path))
    with pytest.raises(ValueError) as raised:
        bench.write_result("bad_value", values)
    assert str(raised.value) == message
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("name", "error", "message"),
    [
        (
            "x.json",
            ValueError,
            "name must be a plain file stem like 'kv_naive_vs_cached' (leave out '.json': it is added), got 'x.json'",
        ),
        ("../x", ValueError, "name must be a plain file stem like 'kv_naive_vs_cached', got '../x'"),
        ("a/b", ValueError, "name must be a plain file stem like 'kv_naive_vs_cached', got 'a/b'"),
        ("", ValueError, "name must be a plain file stem like 'kv_naive_vs_cached', got ''"),
        (3, TypeError, "name must be a str, a plain file stem like 'kv_naive_vs_cached', got 3"),
    ],
    ids=["json-suffix", "parent-folder", "subfolder", "empty", "not-a-str"],
)
def test_result_names_are_refused_with_the_whole_message(monkeypatch, tmp_path, name, error, message):
    monkeypatch.setenv(bench.RESULTS_ENV, str(tmp_path))
    for call in (lambda: bench.write_result(name, {"a": 1}), lambda: bench.read_result(name)):
        with pytest.raises(error) as raised:
            call()
        assert str(raised.value) == message
    assert list(tmp_path.iterdir()) == []
    bench.check_result_name("kv_naive-vs_cached2")  # letters, digits, _ and - are a plain stem


def test_reader_command_names_the_module_a_reader_runs(monkeypatch):
    """Run as `python -m inferlab.x.bench`, argv[0] is the module's absolute path; the command is the module."""
    monkeypatch.setattr(sys.modules["__main__"], "__spec__", SimpleNamespace(name="inferlab.speculative.bench"))
    argv = ["/abs/path/inferlab/speculative/bench.py", "--parts", "gamma"]
    assert bench.reader_command(argv) == "python -m inferlab.speculative.bench --parts gamma"
    monkeypatch.setattr(sys.modules["__main__"], "__spec__", SimpleNamespace(name="inferlab.models.__main__"))
    assert bench.reader_command(["x"]) == "python -m inferlab.models"
    monkeypatch.setattr(sys, "argv", ["/abs/path/inferlab/speculative/bench.py", "--repeat", "5"])
    monkeypatch.setattr(sys.modules["__main__"], "__spec__", SimpleNamespace(name="inferlab.speculative.bench"))
    assert bench.reader_command() == "python -m inferlab.speculative.bench --repeat 5"  # sys.argv by default


def test_the_temporary_file_sits_beside_the_result_and_the_folder_may_already_exist(monkeypatch, tmp_path):
    """os.replace is atomic only within one folder's filesystem: the temporary must be written in the
    results folder itself, as a hidden .<name>.*.tmp file; a second write finds the folder there."""
    monkeypatch.setenv(bench.RESULTS_ENV, str(tmp_path))
    moves = []
    real_replace = os.replace

    def replace(source, target):
        moves.append((Path(source), Path(target)))
        real_replace(source, target)

    monkeypatch.setattr(bench.os, "replace", replace)
    for round_ in (1, 2):  # the second write goes into the folder the first one made
        bench.write_result("twice", {"round": round_})
    assert bench.read_result("twice")["values"] == {"round": 2}
    for source, target in moves:
        assert source.parent == target.parent == tmp_path
        assert source.name.startswith(".twice.") and source.name.endswith(".tmp")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["twice.json"]


def test_results_go_to_a_results_folder_in_the_working_directory_outside_a_checkout(monkeypatch, tmp_path):
    monkeypatch.delenv(bench.RESULTS_ENV, raising=False)
    monkeypatch.setattr(bench, "repo_root", lambda: None)
    monkeypatch.chdir(tmp_path)
    assert bench.results_dir() == tmp_path / "results"


def test_device_description_names_the_cpu_its_cores_and_the_torch_threads(monkeypatch):
    description = bench.device_description()
    assert description.endswith(f", {os.cpu_count()} cores, torch threads={torch.get_num_threads()}")
    model = (
        next(
            (
                line.split(":", 1)[1].strip()
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")
            ),
            None,
        )
        if Path("/proc/cpuinfo").is_file()
        else None
    )
    if model:
        assert description.startswith(f"CPU: {model}, ")
    # Without /proc/cpuinfo the processor's name comes from platform, else the machine's architecture.
    monkeypatch.setattr(bench, "Path", lambda *a: SimpleNamespace(read_text=lambda: (_ for _ in ()).throw(OSError())))
    monkeypatch.setattr(bench.platform, "processor", lambda: "")
    monkeypatch.setattr(bench.platform, "machine", lambda: "riscv64")
    assert bench.device_description().startswith("CPU: riscv64, ")
    monkeypatch.setattr(bench.platform, "processor", lambda: "Some CPU")
    assert bench.device_description().startswith("CPU: Some CPU, ")


def test_library_versions_are_the_installed_ones():
    import numpy
    import transformers
    import triton

    versions = bench.library_versions()
    assert versions["python"] == platform.python_version()
    assert versions["torch"] == torch.__version__ and versions["transformers"] == transformers.__version__
    assert versions["triton"] == triton.__version__ and versions["numpy"] == numpy.__version__
    assert versions["inferlab"] == inferlab.__version__
    assert "vllm" not in versions or versions["vllm"]  # optional: present only where it is installed
