"""No graded answer and no machine-specific path on the site, and proof that each check can fail.

The rule (CONTRIBUTING.md, "Academic honesty"): the site teaches with its own examples and never
prints an assignment's own table, numbers or final answers. These tests scan what a reader sees:
pages, result files, notebooks (sources and rendered), snippets and package modules.

INFERLAB_CHECK_ROOT points the scans at another checkout, e.g. a deliberately broken copy.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import honesty  # noqa: E402

SCANNED = Path(os.environ.get("INFERLAB_CHECK_ROOT", ROOT))
FILES = honesty.files_to_scan(SCANNED)


@pytest.mark.parametrize("kind", sorted(FILES))
def test_no_file_holds_the_cs181_table(kind):
    assert FILES[kind], f"no {kind} found under {SCANNED}: the scan would prove nothing"
    problems = [problem for path in FILES[kind] for problem in honesty.leaked_table_problems(path)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("kind", ["pages", "results", "notebooks"])
def test_no_page_notebook_or_result_file_shows_an_absolute_path(kind):
    problems = [problem for path in FILES[kind] for problem in honesty.absolute_path_problems(path)]
    assert not problems, "\n".join(problems)


# A result comes from a module of the package, or (maintainers' measurements such as the mutation
# score) from a script in tools/, run from the repository's root; never from an absolute path.
READER_COMMAND = re.compile(r"python (-m inferlab\.[\w.]+|tools/\w+\.py)( .*)?")


def test_result_commands_are_what_a_reader_types():
    for path in FILES["results"]:
        command = json.loads(path.read_text(encoding="utf-8"))["provenance"]["command"]
        assert READER_COMMAND.fullmatch(command), f"{path.name}: {command!r}"


@pytest.mark.parametrize(
    ("command", "allowed"),
    [
        ("python -m inferlab.speculative.bench --parts gamma --repeat 5", True),
        ("python tools/mutate.py tool --modules bench hooks --record", True),
        ("python /work/main/tools/mutate.py planted", False),
        ("python /home/me/inferlab/speculative/bench.py", False),
        ("python ../tools/mutate.py", False),
    ],
)
def test_reader_command_pattern(command, allowed):
    assert bool(READER_COMMAND.fullmatch(command)) == allowed


# ---- each check must be able to fail -------------------------------------------------------

# The assignment's table in the shapes it could come back in (this file is not scanned).
LEAKED = {
    "module.py": "FIRST = [0.6, 0.4]\nSECOND = [[0.55, 0.45], [0.95, 0.05]]\nTHIRD = [[[0.6, 0.4], [0.7, 0.3]], "
    "[[0.9, 0.1], [0.5, 0.5]]]\n",
    "reordered.py": "START = (0.4, 0.6)\nROWS = [(0.05, 0.95), (0.1, 0.9), (0.4, 0.6)]\n",
    "page.md": "The best path has probability \\(0.4 \\cdot 0.95 \\cdot 0.9\\), i.e. 0.4 × 0.95 × 0.9.\n",
    "result.json": '{"greedy": {"sequence": "A A A"}, "map": {"sequence": "B A A", "p": 0.342}}',
    "output.txt": "greedy: AAA p = 0.198\nMAP:    BAA p = 0.342\n",
}


@pytest.mark.parametrize("name", sorted(LEAKED))
def test_leak_check_catches_the_table_in_any_shape(tmp_path, name):
    path = tmp_path / name
    path.write_text(LEAKED[name], encoding="utf-8")
    problems = honesty.leaked_table_problems(path)
    assert problems and all(name in problem for problem in problems)


def test_leak_check_reads_notebook_outputs(tmp_path):
    cell = {"cell_type": "code", "source": ["print(table)"], "outputs": [{"text": ["MAP:    BAA p = 0.342\n"]}]}
    path = tmp_path / "lab.ipynb"
    path.write_text(json.dumps({"cells": [cell]}), encoding="utf-8")
    assert len(honesty.leaked_table_problems(path)) == 1


def test_leak_check_passes_the_sites_own_example():
    examples = ROOT / "code" / "inferlab" / "decoding" / "examples.py"
    assert honesty.leaked_table_problems(examples) == []
    assert honesty.leaked_table_problems(ROOT / "docs" / "results" / "decoding_page_table.json") == []


@pytest.mark.parametrize(
    "text, found",
    [
        ('"command": "python /work/main/code/inferlab/speculative/bench.py --parts gamma"', True),
        ("run `INFERLAB_RESULTS=/tmp/kv python -m inferlab.kvcache.bench` and read `/tmp/kv/x.json`", True),
        ("saved to /home/me/results/x.json", True),
        (r"C:\\Users\\me\\x.json", True),
        ("see [the KV cache](../kvcache/kv-cache.md) and https://huggingface.co/Qwen/Qwen2.5-1.5B", False),
        ("3.35 TB/s, 8 FLOP/byte, N/B_q, (0.2, 0.1, 0) / 0.3, INFERLAB_RESULTS=kv_results", False),
        ('"command": "python -m inferlab.flash.bench --traffic-only"', False),
    ],
)
def test_absolute_path_check(tmp_path, text, found):
    path = tmp_path / "page.md"
    path.write_text(text, encoding="utf-8")
    assert bool(honesty.absolute_path_problems(path)) == found


# ---- the NTU lab's own inputs stay the reader's ------------------------------------------------

LAB_SIZES = {1024, 2048}  # NTU HW3's FlashAttention questions use these N with the T4's specs


def test_flash_tables_and_presets_use_the_sites_own_sizes():
    values = json.loads((SCANNED / "docs" / "results" / "flash_traffic.json").read_text(encoding="utf-8"))["values"]
    shown = {row["N"] for key in ("traffic_rows", "runtime_rows", "runtime_rows_fp16") for row in values[key]}
    assert shown and not shown & LAB_SIZES, sorted(shown)
    assert values["example"]["N"] not in LAB_SIZES
    snippet = (SCANNED / "snippets" / "flash" / "hbm_calculator.py").read_text(encoding="utf-8")
    preset = re.search(r"^N, d = (\d+), \d+", snippet, re.MULTILINE)
    assert preset and int(preset.group(1)) not in LAB_SIZES, "the copied calculator's preset N"
    widget = (SCANNED / "docs" / "javascripts" / "calculators.js").read_text(encoding="utf-8")
    default = re.search(r'numberInput\("N", (\d+)', widget)
    assert default and int(default.group(1)) not in LAB_SIZES, "the calculator widget's default N"
