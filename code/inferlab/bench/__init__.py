"""One timing harness and one result-file format for every measured number on the site.

A result file is JSON under ``docs/results/``: the measured ``values`` plus the provenance a reader
needs to trust or reproduce them (command, device, library versions, date). Pages never contain a
typed-in measurement: they include a result file (see ``docs/hooks.py``) and show its provenance.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import gc
import json
import math
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS_ENV = "INFERLAB_RESULTS"


def repo_root() -> Path | None:
    """Return the checkout that holds ``mkdocs.yml`` (searching up from cwd, then the package)."""
    for start in (Path.cwd(), Path(__file__).resolve()):
        for folder in (start, *start.parents):
            if (folder / "mkdocs.yml").is_file() and (folder / "docs").is_dir():
                return folder
    return None


def results_dir() -> Path:
    """Return the folder result files go to: $INFERLAB_RESULTS, else <repo>/docs/results, else ./results."""
    if os.environ.get(RESULTS_ENV):
        return Path(os.environ[RESULTS_ENV])
    root = repo_root()
    return root / "docs" / "results" if root else Path.cwd() / "results"


def device_description() -> str:
    """Return a short human description of the machine the numbers were measured on."""
    try:
        import torch

        if torch.cuda.is_available():
            return f"GPU: {torch.cuda.get_device_name(0)}"
        threads = torch.get_num_threads()
    except ImportError:  # pragma: no cover - torch is a dependency
        threads = None
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"CPU: {cpu}, {os.cpu_count()} cores, torch threads={threads}"


def library_versions() -> dict[str, str]:
    """Return the versions of the libraries that shape the numbers."""
    versions = {"python": platform.python_version()}
    for name in ("torch", "transformers", "tokenizers", "triton", "numpy", "vllm"):
        module = sys.modules.get(name)
        if module is None:
            try:
                module = __import__(name)
            except Exception:  # noqa: BLE001 - an optional library that is absent or broken
                continue
        versions[name] = getattr(module, "__version__", "unknown")
    from inferlab import __version__

    versions["inferlab"] = __version__
    return versions


def portable_argument(argument: str) -> str:
    """Return a command-line argument without this machine's absolute paths (repo-relative, else the file name)."""
    flag, equals, value = argument.partition("=") if argument.startswith("-") else ("", "", argument)
    if not os.path.isabs(value):
        return argument
    path, root = Path(value), repo_root()
    if root is not None and path.resolve().is_relative_to(root.resolve()):
        portable = path.resolve().relative_to(root.resolve()).as_posix()
    else:
        portable = path.name  # somewhere on this machine only: keep what it is, not where
    return f"{flag}{equals}{portable}"


def reader_command(argv: list[str] | None = None) -> str:
    """Return the command of this run as a reader would type it: ``python -m inferlab.x.bench --flags``.

    ``python -m`` puts the module's absolute file path in ``sys.argv[0]``; the module's name is what a
    reader types, and it is the same on every machine.
    """
    argv = list(sys.argv if argv is None else argv)
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name not in (None, "__main__"):
        program = ["-m", spec.name.removesuffix(".__main__")]
    else:
        program = [portable_argument(argv[0])] if argv and argv[0] else []
    return " ".join(["python", *program, *(portable_argument(a) for a in argv[1:])])


def provenance(command: str | None = None) -> dict[str, Any]:
    """Return the provenance block stored with every result: command, device, versions, date."""
    if command is not None:
        command = " ".join(portable_argument(word) for word in command.split(" "))
    return {
        "command": command or reader_command(),
        "device": device_description(),
        "versions": library_versions(),
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


RESULT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")  # a plain file stem: no folders, no dots


def check_result_name(name: str) -> None:
    """Raise unless ``name`` is a plain file stem such as 'kv_naive_vs_cached' (no folder, no '.json')."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, a plain file stem like 'kv_naive_vs_cached', got {name!r}")
    if not RESULT_NAME.fullmatch(name):
        hint = " (leave out '.json': it is added)" if name.endswith(".json") else ""
        raise ValueError(f"name must be a plain file stem like 'kv_naive_vs_cached'{hint}, got {name!r}")


def json_problem(value: Any, where: str = "values") -> str | None:
    """Return where and why ``value`` is not strict JSON (NaN and inf are not JSON), or None if it is."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{where} must be a finite number (JSON has no NaN or inf), got {value}"
    if value is None or isinstance(value, (str, int, float)):  # bool is an int
        return None
    if isinstance(value, (list, tuple)):
        items = enumerate(value)
    elif isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):
            return f"{where} must have str keys, got {[k for k in value if not isinstance(k, str)][:3]}"
        items = value.items()
    else:
        return f"{where} must be a JSON value (number, str, list, dict, None), got {type(value).__name__}"
    return next((problem for key, item in items if (problem := json_problem(item, f"{where}[{key!r}]"))), None)


def write_result(name: str, values: dict[str, Any], command: str | None = None) -> Path:
    """Write ``values`` with provenance to ``<results_dir>/<name>.json`` and return the path.

    The file is written whole or not at all: the record goes to a temporary file beside it, which
    then replaces the old one, so a failure part-way never leaves a broken result behind.
    """
    check_result_name(name)
    if not isinstance(values, dict):
        raise TypeError(f"values must be a dict of measured values, got {values!r:.80}")
    if command is not None and not isinstance(command, str):
        raise TypeError(f"command must be a str or None, got {command!r}")
    problem = json_problem(values)
    if problem:
        raise ValueError(problem)
    record = {"name": name, "provenance": provenance(command), "values": values}
    text = json.dumps(record, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    path = results_dir() / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(temporary, path)  # atomic: readers see the old file or the new one, never half
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def read_result(name: str) -> dict[str, Any]:
    """Return the stored record (``name``, ``provenance``, ``values``) of a result file."""
    check_result_name(name)
    path = results_dir() / f"{name}.json"
    if not path.is_file():
        raise FileNotFoundError(f"no result file {path}; run the benchmark that writes it first")
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"result file {path} is not valid UTF-8 JSON: {error}") from None
    if not isinstance(record, dict) or not {"name", "provenance", "values"} <= set(record):
        raise ValueError(f"result file {path} must hold an object with name, provenance and values")
    return record


SPREAD_LIMIT = 1.5  # a figure whose repeats differ by more than this was measured on a busy machine


def spread(seconds: list[float]) -> float:
    """Return max / min of repeated timings: 1.0 means perfectly steady."""
    if not seconds or min(seconds) <= 0:
        raise ValueError(f"seconds must be a non-empty list of positive timings, got {seconds!r}")
    return round(max(seconds) / min(seconds), 3)


def unsteady(values: Any, limit: float = SPREAD_LIMIT, where: str = "values") -> list[str]:
    """Return where a result holds a spread above ``limit`` (every key named ``spread`` or ``*_spread``)."""
    found = []
    if isinstance(values, dict):
        for key, value in values.items():
            here = f"{where}.{key}"
            if (key == "spread" or key.endswith("_spread")) and isinstance(value, (int, float)) and value > limit:
                found.append(f"{here} = {value}")
            else:
                found += unsteady(value, limit, here)
    elif isinstance(values, list):
        for index, value in enumerate(values):
            found += unsteady(value, limit, f"{where}[{index}]")
    return found


@contextlib.contextmanager
def garbage_collector_off():
    """Collect garbage now, then keep Python's cycle collector off inside the block, as timeit does.

    A collection that starts inside one timed repeat makes that repeat alone slower: noise that the
    spread of the repeats would then blame on the machine.
    """
    gc.collect()
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def _check_counts(repeat: int, warmup: int) -> None:
    for name, value in (("repeat", repeat), ("warmup", warmup)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an integer, got {value!r}")


def time_call(fn: Callable[[], Any], repeat: int = 5, warmup: int = 1) -> dict[str, float]:
    """Time ``fn`` ``repeat`` times after ``warmup`` calls; return median/min/max seconds."""
    if not callable(fn):
        raise TypeError(f"fn must be callable with no arguments, got {fn!r}")
    _check_counts(repeat, warmup)
    if repeat < 1 or warmup < 0:
        raise ValueError(f"repeat must be >= 1 and warmup >= 0, got repeat={repeat}, warmup={warmup}")
    for _ in range(warmup):
        fn()
    seconds = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        seconds.append(time.perf_counter() - start)
    return {"median_s": statistics.median(seconds), "min_s": min(seconds), "max_s": max(seconds)}


def time_interleaved(
    fns: dict[str, Callable[[], Any]], repeat: int = 5, warmup: int = 1
) -> dict[str, dict[str, float]]:
    """Time several callables round-robin so that machine noise hits them all alike."""
    if not isinstance(fns, dict) or not fns or not all(callable(fn) for fn in fns.values()):
        raise TypeError(f"fns must be a non-empty dict of name -> callable, got {fns!r:.80}")
    _check_counts(repeat, warmup)
    if repeat < 1 or warmup < 0:
        raise ValueError(f"repeat must be >= 1 and warmup >= 0, got repeat={repeat}, warmup={warmup}")
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    seconds: dict[str, list[float]] = {key: [] for key in fns}
    for _ in range(repeat):
        for key, fn in fns.items():
            start = time.perf_counter()
            fn()
            seconds[key].append(time.perf_counter() - start)
    return {key: {"median_s": statistics.median(s), "min_s": min(s), "max_s": max(s)} for key, s in seconds.items()}
