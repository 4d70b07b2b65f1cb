"""Bad input and faults (issue 18): every public function refuses what it cannot do, names what is
wrong, hangs on nothing and loses nothing.

The cases live in tools/bad_input_sweep.py, which also prints the sweep's report. Here each case is
a test of its own, and hypothesis draws further bad values of each kind for every argument.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import bad_input_sweep as sweep  # noqa: E402

CASES = sweep.all_cases()
SPECS = sweep.argument_specs()


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_bad_input_is_handled_well(case):
    outcome, detail = sweep.outcome(case)
    assert outcome == "handled well", f"{outcome}: {detail}"


def test_the_sweep_meets_its_goal_and_counts_every_outcome():
    """The report's rule itself: >= 95% handled well, and no wrong result, hang or corrupted state."""
    fake = [(CASES[0], "handled well", "")] * 95 + [(CASES[0], "unclear message", "")] * 5
    assert sweep.passed(fake)
    assert not sweep.passed(fake[:-1] + [(CASES[0], "silently wrong result", "")])
    assert not sweep.passed([(CASES[0], "handled well", "")] * 94 + [(CASES[0], "obscure crash", "")] * 6)
    assert "| all | 95 | 5 | 0 | 0 | 0 | 0 | 100 |" in sweep.report(fake)


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (lambda: 1 + 1, "silently wrong result"),  # a refusal was due
        (lambda: {}["key"], "obscure crash"),
        (lambda: (_ for _ in ()).throw(ValueError("something is off")), "unclear message"),
        (lambda: (_ for _ in ()).throw(ValueError("gamma must be >= 1")), "handled well"),
    ],
)
def test_the_sweep_classifies_each_outcome(call, expected):
    assert sweep.outcome(sweep.Case("demo", "f", "x", call, "gamma"))[0] == expected


def test_the_sweep_notices_a_hang_and_a_state_change():
    def spin():
        while True:
            pass

    assert sweep.outcome(sweep.Case("demo", "f", "x", spin, "x"), time_limit_s=0.2)[0] == "hang"
    state = []

    def refuse_after_work():
        state.append(1)  # the work started, then the refusal came
        raise ValueError("x must be 1")

    case = sweep.Case("demo", "f", "x", refuse_after_work, "x", state=lambda: list(state))
    assert sweep.outcome(case)[0] == "corrupted state"


# ---------------------------------------------------------------- hypothesis: more bad values

INTEGER_LIKE = st.one_of(st.booleans(), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=3))
NOT_A_NUMBER = st.one_of(st.booleans(), st.text(max_size=3), st.just(math.nan), st.just([1.0]))
ABOVE_ONE = st.floats(min_value=1.0, exclude_min=True)
BAD_ID = st.one_of(
    st.integers(max_value=-1),
    st.integers(min_value=10**6, max_value=10**12),
    st.booleans(),
    st.floats(allow_nan=True),
    st.text(max_size=2),
)
BAD_ID_ANY_SIZE = st.one_of(st.integers(max_value=-1), st.booleans(), st.floats(allow_nan=True), st.text(max_size=2))


def ids_with_a_bad_one(bad: st.SearchStrategy) -> st.SearchStrategy:
    """A list of good ids (0..2) with one bad element somewhere, an empty list, or not a list at all."""
    good = st.lists(st.integers(0, 2), max_size=4)
    with_bad = st.tuples(good, bad, good).map(lambda parts: [*parts[0], parts[1], *parts[2]])
    return st.one_of(with_bad, st.just([]), st.text(min_size=1, max_size=4), st.just(3))


STRATEGIES = {
    "count>=1": st.one_of(st.integers(max_value=0), INTEGER_LIKE, st.none()),
    "count>=1 or None": st.one_of(st.integers(max_value=0), INTEGER_LIKE),
    "count>=0": st.one_of(st.integers(max_value=-1), INTEGER_LIKE, st.none()),
    "count>=0 or None": st.one_of(st.integers(max_value=-1), INTEGER_LIKE),
    "positive": st.one_of(st.floats(max_value=0.0), st.just(math.inf), NOT_A_NUMBER, st.none()),
    "positive or None": st.one_of(st.floats(max_value=0.0), st.just(math.inf), NOT_A_NUMBER),
    "nonnegative": st.one_of(st.floats(max_value=-1e-300), st.just(math.inf), NOT_A_NUMBER, st.none()),
    "probability (0, 1]": st.one_of(st.floats(max_value=0.0), ABOVE_ONE, NOT_A_NUMBER, st.none()),
    "probability (0, 1] or None": st.one_of(st.floats(max_value=0.0), ABOVE_ONE, NOT_A_NUMBER),
    "probability [0, 1]": st.one_of(st.floats(max_value=0.0, exclude_max=True), ABOVE_ONE, NOT_A_NUMBER, st.none()),
    "probability [0, 1] or None": st.one_of(st.floats(max_value=0.0, exclude_max=True), ABOVE_ONE, NOT_A_NUMBER),
    "probability (0, 1)": st.one_of(st.floats(max_value=0.0), st.floats(min_value=1.0), NOT_A_NUMBER, st.none()),
    "probability (0, 1) or None": st.one_of(st.floats(max_value=0.0), st.floats(min_value=1.0), NOT_A_NUMBER),
    "bool": st.one_of(st.integers(), st.floats(), st.text(max_size=3), st.none()),
    "token ids": st.one_of(ids_with_a_bad_one(BAD_ID), st.none()),
    "token ids or None": ids_with_a_bad_one(BAD_ID),
    "token ids, any size": st.one_of(ids_with_a_bad_one(BAD_ID_ANY_SIZE), st.none()),
    "tensor": st.one_of(st.text(max_size=3), st.none(), st.floats(), st.lists(st.floats(), max_size=3)),
}


def test_every_kind_of_argument_has_a_strategy():
    assert {spec[3] for spec in SPECS} <= set(STRATEGIES)


@pytest.mark.parametrize("spec", SPECS, ids=[f"{s[0]}.{s[1]}({s[2]})" for s in SPECS])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_drawn_bad_values_are_refused_by_name_without_changing_anything(spec, data):
    value = data.draw(STRATEGIES[spec[3]], label=spec[2])
    outcome, detail = sweep.outcome(sweep.argument_case(spec, value), time_limit_s=30)
    assert outcome == "handled well", f"{spec[1]}({spec[2]}={value!r}): {outcome}: {detail}"


def test_the_fixed_table_and_the_strategies_name_the_same_kinds():
    assert set(sweep.KINDS) == set(STRATEGIES)
