"""inferlab.bench pinned at its edges: odd /proc/cpuinfo lines, absent libraries, odd argv, failed writes.

Every expected value is worked out by hand or taken from the standard library (os.cpu_count, the
numpy and torch versions, the bytes of a hand-written UTF-8 file), never copied from a run of the code.
"""

from __future__ import annotations

import json
import os
import sys
from types import SimpleNamespace

import numpy
import pytest
import torch

from inferlab import bench

# ---- device_description ------------------------------------------------------------------------


def fake_cpuinfo(monkeypatch, text):
    """Make device_description read ``text`` as /proc/cpuinfo, on a machine without CUDA."""

    class FakePath:
        def __init__(self, path):
            assert path == "/proc/cpuinfo"

        def read_text(self):
            return text

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(bench, "Path", FakePath)


def test_the_gpu_named_is_device_0_even_when_another_device_is_current(monkeypatch):
    names = {0: "NVIDIA H200", 1: "Tesla T4"}

    def get_device_name(device=None):  # torch's rule: None means the current device
        return names[torch.cuda.current_device() if device is None else device]

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_name", get_device_name)
    assert bench.device_description() == "GPU: NVIDIA H200"


def test_a_cpu_model_name_that_holds_a_colon_is_kept_whole(monkeypatch):
    fake_cpuinfo(
        monkeypatch,
        "processor\t: 0\nvendor_id\t: Acme\nmodel name\t: Acme CPU: rev 2 @ 3.0GHz \nmodel name\t: Second\n",
    )
    threads = torch.get_num_threads()
    expected = f"CPU: Acme CPU: rev 2 @ 3.0GHz, {os.cpu_count()} cores, torch threads={threads}"
    assert bench.device_description() == expected


def test_without_torch_the_cpu_description_says_torch_threads_none(monkeypatch):
    fake_cpuinfo(monkeypatch, "model name\t: Plain CPU\n")
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    assert bench.device_description() == f"CPU: Plain CPU, {os.cpu_count()} cores, torch threads=None"


# ---- library_versions ----------------------------------------------------------------------------


def test_a_library_not_yet_imported_is_imported_for_its_version(monkeypatch, tmp_path):
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "__init__.py").write_text('__version__ = "9.8.7-test"\n', encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(sys.modules, "vllm", None)  # recorded, so the fake is dropped again afterwards
    monkeypatch.delitem(sys.modules, "vllm")  # not imported yet
    assert bench.library_versions()["vllm"] == "9.8.7-test"


def test_a_library_that_fails_to_import_is_skipped_and_the_rest_still_listed(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton", None)  # `import triton` now raises ImportError
    versions = bench.library_versions()
    assert "triton" not in versions
    assert versions["numpy"] == numpy.__version__  # numpy comes after triton in the list


# ---- portable_argument, reader_command, provenance --------------------------------------------------


def test_a_flag_value_that_holds_an_equals_sign_is_still_made_portable(monkeypatch, tmp_path):
    monkeypatch.setattr(bench, "repo_root", lambda: tmp_path)
    assert bench.portable_argument(f"--out={tmp_path / 'runs' / 'a=b.json'}") == "--out=runs/a=b.json"


@pytest.fixture
def script_main(monkeypatch):
    """A __main__ run as a script (no module spec), outside any checkout."""
    monkeypatch.setitem(sys.modules, "__main__", SimpleNamespace(__spec__=None))
    monkeypatch.setattr(bench, "repo_root", lambda: None)


def test_reader_command_without_a_main_module_uses_the_script(monkeypatch, tmp_path):
    monkeypatch.setattr(bench, "repo_root", lambda: None)
    monkeypatch.delitem(sys.modules, "__main__")
    assert bench.reader_command([str(tmp_path / "run_it.py"), "--quick"]) == "python run_it.py --quick"


def test_a_directory_or_zip_run_records_its_path_not_dash_m_main(monkeypatch, tmp_path):
    # `python app.zip --x` runs app.zip/__main__.py; its spec's name is "__main__", which no reader can -m.
    monkeypatch.setattr(bench, "repo_root", lambda: None)
    monkeypatch.setitem(sys.modules, "__main__", SimpleNamespace(__spec__=SimpleNamespace(name="__main__")))
    assert bench.reader_command([str(tmp_path / "app.zip"), "--x"]) == "python app.zip --x"


def test_a_script_without_arguments_is_python_and_its_name(script_main, tmp_path):
    assert bench.reader_command([str(tmp_path / "alone.py")]) == "python alone.py"


@pytest.mark.parametrize("argv", [[], [""]], ids=["no-argv", "interactive"])
def test_no_program_name_leaves_just_python(script_main, argv):
    assert bench.reader_command(argv) == "python"


def test_an_explicit_command_keeps_its_spacing(monkeypatch):
    monkeypatch.setattr(bench, "device_description", lambda: "test device")
    monkeypatch.setattr(bench, "library_versions", lambda: {})
    assert bench.provenance("python -m demo  --quick")["command"] == "python -m demo  --quick"


# ---- json_problem, unsteady ---------------------------------------------------------------------


def test_non_str_keys_are_named_three_at_most():
    assert bench.json_problem({1: 0, 2: 0, 3: 0, 4: 0}) == "values must have str keys, got [1, 2, 3]"


def test_unsteady_names_every_unsteady_item_of_a_list():
    values = [{"spread": 2.0}, {"spread": 3.0}, {"spread": 1.0}]
    assert bench.unsteady(values) == ["values[0].spread = 2.0", "values[1].spread = 3.0"]


# ---- write_result and read_result: encoding and failures -------------------------------------------


def test_a_result_is_written_as_utf8_under_an_ascii_locale(monkeypatch, tmp_path, ascii_locale):
    monkeypatch.setenv(bench.RESULTS_ENV, str(tmp_path))
    path = bench.write_result("zh_label", {"label": "詞元"})
    raw = path.read_bytes()
    assert "詞元".encode() in raw
    assert json.loads(raw.decode("utf-8"))["values"] == {"label": "詞元"}


def test_a_result_is_read_as_utf8_under_an_ascii_locale(monkeypatch, tmp_path, ascii_locale):
    monkeypatch.setenv(bench.RESULTS_ENV, str(tmp_path))
    record = {"name": "zh_read", "provenance": {"device": "測試"}, "values": {"label": "詞元"}}
    (tmp_path / "zh_read.json").write_bytes(json.dumps(record, ensure_ascii=False).encode("utf-8"))
    assert bench.read_result("zh_read") == record


@pytest.mark.parametrize(
    "stored",
    [{"name": "partial", "provenance": {}}, ["name", "provenance", "values"]],
    ids=["dict-without-values", "list-of-the-key-names"],
)
def test_a_result_file_without_the_three_parts_is_refused(monkeypatch, tmp_path, stored):
    monkeypatch.setenv(bench.RESULTS_ENV, str(tmp_path))
    (tmp_path / "partial.json").write_text(json.dumps(stored), encoding="utf-8")
    with pytest.raises(ValueError) as raised:
        bench.read_result("partial")
    path = tmp_path / "partial.json"
    assert str(raised.value) == f"result file {path} must hold an object with name, provenance and values"


def test_a_failed_move_raises_its_own_error_and_leaves_no_temporary(monkeypatch, tmp_path):
    monkeypatch.setenv(bench.RESULTS_ENV, str(tmp_path))

    def replace(source, target):
        raise OSError("no space left on device")

    monkeypatch.setattr(bench.os, "replace", replace)
    with pytest.raises(OSError) as raised:
        bench.write_result("never_moved", {"x": 1})
    assert type(raised.value) is OSError and str(raised.value) == "no space left on device"
    assert list(tmp_path.iterdir()) == []


class Interrupted(Exception):
    """Stands in for an interrupt that arrives just after the file was moved into place."""


def test_an_interrupt_after_the_move_is_raised_as_it_is(monkeypatch, tmp_path):
    monkeypatch.setenv(bench.RESULTS_ENV, str(tmp_path))
    real_replace = os.replace

    def replace(source, target):
        real_replace(source, target)  # the temporary is gone now
        raise Interrupted

    monkeypatch.setattr(bench.os, "replace", replace)
    with pytest.raises(Interrupted):
        bench.write_result("moved", {"x": 1})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["moved.json"]


# ---- time_call and time_interleaved: what they refuse ------------------------------------------------


@pytest.mark.parametrize("timer", [bench.time_call, lambda fn, **kw: bench.time_interleaved({"f": fn}, **kw)])
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"repeat": 2.0}, "repeat must be an integer, got 2.0"),
        ({"warmup": True}, "warmup must be an integer, got True"),
    ],
    ids=["float-repeat", "bool-warmup"],
)
def test_a_count_that_is_not_an_integer_is_named_in_the_error(timer, kwargs, message):
    calls = []
    with pytest.raises(TypeError) as raised:
        timer(lambda: calls.append(1), **kwargs)
    assert str(raised.value) == message and calls == []


def test_time_interleaved_refuses_an_empty_dict():
    with pytest.raises(TypeError) as raised:
        bench.time_interleaved({})
    assert str(raised.value) == "fns must be a non-empty dict of name -> callable, got {}"


@pytest.mark.parametrize("kind", ["a-non-callable-value", "a-list"])
def test_time_interleaved_refuses_bad_fns_before_calling_any(kind):
    calls = []

    def ok():
        calls.append(1)

    fns = {"ok": ok, "bad": 3} if kind == "a-non-callable-value" else [ok]
    with pytest.raises(TypeError) as raised:
        bench.time_interleaved(fns)
    assert str(raised.value).startswith("fns must be a non-empty dict of name -> callable, got ")
    assert calls == []
