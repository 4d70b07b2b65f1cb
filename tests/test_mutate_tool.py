"""tools/mutate.py: the arithmetic of the mutation score (the runs themselves are too slow for CI)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import mutate  # noqa: E402


def wilson_bound_by_bisection(killed: int, n: int, z: float, upper: bool) -> float:
    """Solve |p_hat - p| = z * sqrt(p (1 - p) / n) for p on one side of p_hat: the interval's definition."""
    p_hat = killed / n
    low, high = (p_hat, 1.0) if upper else (0.0, p_hat)
    for _ in range(100):
        mid = (low + high) / 2
        inside = abs(p_hat - mid) <= z * math.sqrt(mid * (1 - mid) / n)
        if inside == upper:
            low = mid
        else:
            high = mid
    return (low + high) / 2


@pytest.mark.parametrize("killed, lost", [(19, 1), (180, 20), (50, 50), (0, 7), (7, 0)])
def test_wilson_interval_solves_its_defining_equation(killed, lost):
    low, high = mutate.wilson_interval(killed, lost)
    n = killed + lost
    assert low == pytest.approx(wilson_bound_by_bisection(killed, n, 1.96, upper=False), abs=1e-4)
    assert high == pytest.approx(wilson_bound_by_bisection(killed, n, 1.96, upper=True), abs=1e-4)
    assert 0 <= low <= killed / n <= high <= 1
    assert mutate.wilson_interval(0, 0) is None


def test_package_score_weighs_a_sampled_module_by_all_its_mutants():
    full = {"killed": 90, "survived": 10, "no_tests": 0}  # 100 counted, score 0.9
    sampled = {"killed": 150, "survived": 40, "no_tests": 10, "mutants": 1000}  # score 0.75 for 1000
    assert mutate.package_score({"a": full}) == 0.9
    assert mutate.package_score({"a": full, "b": sampled}) == pytest.approx((100 * 0.9 + 1000 * 0.75) / 1100, abs=1e-4)
    # Without samples it is killed over counted, pooled.
    other = {"killed": 30, "survived": 0, "no_tests": 10}
    assert mutate.package_score({"a": full, "c": other}) == pytest.approx(120 / 140, abs=1e-4)
    assert mutate.package_score({"empty": {"killed": 0, "survived": 0}}) is None


def test_count_results_reads_mutmut_exit_codes_and_keeps_to_the_sample(tmp_path):
    meta = tmp_path / "mutants" / "src" / "pkg" / "m.py.meta"
    meta.parent.mkdir(parents=True)
    codes = {"m.x_f__mutmut_1": 1, "m.x_f__mutmut_2": 0, "m.x_f__mutmut_3": 33, "m.x_f__mutmut_4": 36}
    codes |= {"m.x_f__mutmut_5": None, "m.x_f__mutmut_6": 0}
    meta.write_text(json.dumps({"exit_code_by_key": codes}))
    equivalents = {"m.x_f__mutmut_6": (None, "cannot change behaviour")}  # not fingerprinted: trusted
    counts = mutate.count_results(tmp_path, equivalents, chosen=None)
    assert (counts["killed"], counts["survived"], counts["no_tests"], counts["equivalent"]) == (2, 1, 1, 1)
    assert counts["survivors"] == ["m.x_f__mutmut_2", "m.x_f__mutmut_3"]
    assert counts["score"] == 0.5  # an untested mutant counts against the score
    sample = mutate.count_results(tmp_path, equivalents, chosen={"m.x_f__mutmut_1", "m.x_f__mutmut_2"})
    assert (sample["killed"], sample["survived"], sample["score"]) == (1, 1, 0.5)


def test_the_sample_is_reproducible_from_its_seed_and_never_larger_than_the_population():
    names = [f"m.x_f__mutmut_{i}" for i in range(500)]
    draw = mutate.draw_sample(names, 50, seed=7)
    assert len(draw) == 50 and draw <= set(names)
    assert draw == mutate.draw_sample(list(reversed(names)), 50, seed=7)  # the order of discovery does not matter
    assert draw != mutate.draw_sample(names, 50, seed=8)
    assert mutate.draw_sample(names[:10], 50, seed=7) == set(names[:10])


@pytest.mark.parametrize("argv", [["tool", "--sample", "0"], ["tool", "--jobs", "0"]])
def test_bad_sample_or_jobs_is_refused_before_any_work(argv, capsys):
    with pytest.raises(SystemExit):
        mutate.main(argv)
    assert "--jobs and --sample must be integers >= 1" in capsys.readouterr().err


def test_a_retest_of_survivors_moves_the_newly_killed_and_keeps_the_rest():
    previous = {"killed": 90, "survived": 8, "no_tests": 2, "equivalent": 1, "survivors": list("abcdefghij")}
    previous |= {"date": "2026-12-01", "sources_sha256": "x"}
    retest = {"killed": 6, "survived": 2, "no_tests": 1, "equivalent": 1, "survivors": ["a", "b", "j"]}
    merged = mutate.merge_retest(previous, retest)
    assert (merged["killed"], merged["survived"], merged["no_tests"], merged["equivalent"]) == (96, 2, 1, 2)
    assert merged["survivors"] == ["a", "b", "j"] and merged["retested_survivors"] == 10
    assert merged["score"] == round(96 / 99, 4)  # the reviewed equivalent left the denominator
    assert previous["killed"] == 90  # the recorded run is not changed in place


def test_sources_digest_follows_every_mutated_file(tmp_path, monkeypatch):
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text("x = 1\n")
    monkeypatch.setattr(mutate, "ROOT", tmp_path)
    monkeypatch.setitem(mutate.MODULES, "toy", (["a.py", "b.py"], []))
    before = mutate.sources_digest("toy")
    assert before == mutate.sources_digest("toy")
    (tmp_path / "b.py").write_text("x = 2\n")
    assert mutate.sources_digest("toy") != before


def test_survivors_refuses_a_run_recorded_with_other_sources_or_as_a_sample(monkeypatch):
    import inferlab.bench

    monkeypatch.setitem(mutate.MODULES, "toy", (["tools/mutate.py"], []))
    current = mutate.sources_digest("toy")
    recorded = {"killed": 1, "survived": 1, "survivors": ["a"], "sources_sha256": current, "date": "d"}
    for entry, allowed in (
        (recorded, True),
        (recorded | {"sources_sha256": "old"}, False),
        (recorded | {"sampled": 5}, False),
    ):
        monkeypatch.setattr(
            inferlab.bench, "read_result", lambda name, entry=entry: {"values": {"tool": {"toy": entry}}}
        )
        if allowed:
            assert mutate.previous_full_run("toy") == entry
        else:
            with pytest.raises(SystemExit, match="run the module in full"):
                mutate.previous_full_run("toy")
    monkeypatch.setattr(inferlab.bench, "read_result", lambda name: {"values": {"tool": {}}})
    with pytest.raises(SystemExit, match="needs a recorded full mutmut run of toy"):
        mutate.previous_full_run("toy")


@pytest.mark.parametrize("argv", [["tool", "--survivors", "--sample", "3"], ["all", "--survivors"]])
def test_survivors_goes_with_the_tool_kind_alone(argv, capsys):
    with pytest.raises(SystemExit):
        mutate.main(argv)
    assert "--survivors goes with the tool kind alone" in capsys.readouterr().err


# A module as mutmut 3 writes it: the original function and each mutant as a sibling function.
MUTATED_MODULE = """
def x_area__mutmut_orig(width, height):
    \"\"\"Return the area.\"\"\"
    return width * height

def x_area__mutmut_1(width, height):
    \"\"\"Return the area.\"\"\"
    return width / height

def x_area__mutmut_2(width, height):
    \"\"\"Return the area.\"\"\"
    return width * height * 1

class Box:
    def xǁBoxǁside__mutmut_orig(self):
        return self.size

    def xǁBoxǁside__mutmut_1(self):
        return None
"""


def mutated_package(root: Path, codes: dict[str, int | None]) -> Path:
    source = root / "mutants" / "src" / "pkg" / "shapes.py"
    source.parent.mkdir(parents=True)
    source.write_text(MUTATED_MODULE, encoding="utf-8")
    source.with_name("shapes.py.meta").write_text(json.dumps({"exit_code_by_key": codes}))
    return root


def test_a_mutants_change_is_read_from_mutmuts_copy(tmp_path):
    work = mutated_package(tmp_path, {})
    assert mutate.mutant_change(work, "pkg.shapes.x_area__mutmut_1") == [
        "-return width * height",
        "+return width / height",
    ]
    assert mutate.mutant_change(work, "pkg.shapes.xǁBoxǁside__mutmut_1") == ["-return self.size", "+return None"]
    assert mutate.mutant_change(work, "pkg.shapes.x_area__mutmut_9") is None  # no such mutant
    assert mutate.mutant_change(work, "pkg.other.x_area__mutmut_1") is None  # no such file
    one, two = (mutate.mutant_fingerprint(work, f"pkg.shapes.x_area__mutmut_{i}") for i in (1, 2))
    assert one != two and len(one) == 12


def test_a_fingerprint_names_the_change_not_the_number(tmp_path):
    first = mutated_package(tmp_path / "a", {})
    moved = mutated_package(tmp_path / "b", {})
    shapes = moved / "mutants" / "src" / "pkg" / "shapes.py"  # the same change, renumbered 1 -> 7
    shapes.write_text(MUTATED_MODULE.replace("x_area__mutmut_1(", "x_area__mutmut_7("), encoding="utf-8")
    assert mutate.mutant_fingerprint(first, "pkg.shapes.x_area__mutmut_1") == mutate.mutant_fingerprint(
        moved, "pkg.shapes.x_area__mutmut_7"
    )


def test_an_equivalent_whose_number_now_names_another_change_counts_as_a_survivor(tmp_path):
    work = mutated_package(tmp_path, {"pkg.shapes.x_area__mutmut_1": 0, "pkg.shapes.x_area__mutmut_2": 0})
    reviewed_two = mutate.mutant_fingerprint(work, "pkg.shapes.x_area__mutmut_2")  # "* 1" changes nothing
    right = {"pkg.shapes.x_area__mutmut_2": (reviewed_two, "multiplying by 1 changes nothing")}
    counts = mutate.count_results(work, right, chosen=None)
    assert (counts["equivalent"], counts["survived"], counts["stale_equivalents"]) == (1, 1, [])
    # The same review filed under mutant 1 (as after a renumbering): mutant 1 divides, so it stays a survivor.
    stale = {"pkg.shapes.x_area__mutmut_1": (reviewed_two, "multiplying by 1 changes nothing")}
    counts = mutate.count_results(work, stale, chosen=None)
    assert (counts["equivalent"], counts["survived"]) == (0, 2)
    assert counts["stale_equivalents"] == ["pkg.shapes.x_area__mutmut_1"]
    assert counts["score"] == 0.0


def test_reviewed_equivalents_reads_names_fingerprints_and_reasons(tmp_path, monkeypatch):
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "mutation_equivalent.txt").write_text(
        "# a comment line\n\npkg.m.x_f__mutmut_1 @0123456789ab  # why one\npkg.m.x_f__mutmut_2  # why two\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(mutate, "ROOT", tmp_path)
    assert mutate.reviewed_equivalents() == {
        "pkg.m.x_f__mutmut_1": ("0123456789ab", "why one"),
        "pkg.m.x_f__mutmut_2": (None, "why two"),
    }


def test_stamping_writes_each_unstamped_entrys_fingerprint_and_keeps_the_rest(tmp_path, monkeypatch, capsys):
    (tmp_path / "tools").mkdir()
    listed = tmp_path / "tools" / "mutation_equivalent.txt"
    listed.write_text(
        "# header\npkg.shapes.x_area__mutmut_2  # times one\npkg.shapes.x_area__mutmut_1 @feedfeedfeed  # kept\n",
        encoding="utf-8",
    )
    mutated_package(tmp_path / ".mutation" / "tool-shapes", {})
    monkeypatch.setattr(mutate, "ROOT", tmp_path)
    monkeypatch.setattr(mutate, "WORK", tmp_path / ".mutation")
    mutate.stamp_equivalents(["shapes"])
    stamp = mutate.mutant_fingerprint(tmp_path / ".mutation" / "tool-shapes", "pkg.shapes.x_area__mutmut_2")
    assert listed.read_text(encoding="utf-8").splitlines() == [
        "# header",
        f"pkg.shapes.x_area__mutmut_2 @{stamp}  # times one",
        "pkg.shapes.x_area__mutmut_1 @feedfeedfeed  # kept",
    ]
    assert "+return width * height * 1" in capsys.readouterr().out  # the change is shown for review
