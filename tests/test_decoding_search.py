"""Greedy, beam search, brute-force MAP and the k-th order DP, checked against independent references:
exact enumeration written here, a textbook Viterbi, closed-form operation counts, and transformers'
own generate() and loss."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.decoding import (
    MarkovModel,
    TableModel,
    beam_search,
    greedy_decode,
    map_decode_bruteforce,
    map_decode_dp,
    page_table_model,
    perplexity,
    sequence_logprob,
)
from inferlab.decoding.examples import FIRST, SECOND, THIRD


def joint_probability(model: MarkovModel, tokens) -> float:
    """p(x_1..x_T) by the chain rule, reading the model's raw probability tables directly."""
    p = 1.0
    for step, token in enumerate(tokens):
        table = model.tables[min(step, len(model.tables) - 1)]
        context = tokens[max(0, step - model.order) : step] if model.order else []
        p *= float(table[tuple(context) + (token,)])
    return p


def exhaustive_best(model: MarkovModel, length: int):
    """Brute force written independently: every sequence, plain Python products."""
    scored = {
        seq: joint_probability(model, list(seq)) for seq in itertools.product(range(model.vocab_size), repeat=length)
    }
    best = max(scored.values())
    return best, {seq for seq, p in scored.items() if math.isclose(p, best, rel_tol=1e-12)}


def textbook_viterbi(initial, transition, length):
    """Viterbi for a first-order chain, straight from the textbook, with Python lists."""
    vocab = len(initial)
    best = [math.log(p) if p > 0 else -math.inf for p in initial]
    pointers = []
    for _ in range(length - 1):
        new_best, pointer = [], []
        for nxt in range(vocab):
            options = [
                best[prev] + (math.log(transition[prev][nxt]) if transition[prev][nxt] > 0 else -math.inf)
                for prev in range(vocab)
            ]
            arg = max(range(vocab), key=options.__getitem__)
            new_best.append(options[arg])
            pointer.append(arg)
        best, pointers = new_best, pointers + [pointer]
    last = max(range(vocab), key=best.__getitem__)
    path = [last]
    for pointer in reversed(pointers):
        path.insert(0, pointer[path[0]])
    return path, best[last]


# ---- the guides' own table -------------------------------------------------------------------


def test_page_table_greedy_is_not_map():
    model = page_table_model()
    # Greedy by hand: argmax of each row along the path it takes.
    x1 = max(range(2), key=lambda a: FIRST[a])
    x2 = max(range(2), key=lambda b: SECOND[x1][b])
    x3 = max(range(2), key=lambda c: THIRD[x1][x2][c])
    greedy_p = FIRST[x1] * SECOND[x1][x2] * THIRD[x1][x2][x3]
    every = {(a, b, c): FIRST[a] * SECOND[a][b] * THIRD[a][b][c] for a in range(2) for b in range(2) for c in range(2)}
    map_sequence = max(every, key=every.get)
    assert map_sequence != (x1, x2, x3)  # the point of the example

    greedy = greedy_decode(model, 3)
    assert greedy.tokens == [x1, x2, x3]
    assert math.exp(greedy.logprob) == pytest.approx(greedy_p, rel=1e-12)

    assert beam_search(model, 3, beam_width=1).tokens == [x1, x2, x3]  # a beam of one is greedy
    for decoder in (map_decode_bruteforce(model, 3), map_decode_dp(model, 3), beam_search(model, 3, beam_width=2)):
        assert tuple(decoder.tokens) == map_sequence
        assert math.exp(decoder.logprob) == pytest.approx(every[map_sequence], rel=1e-12)


# ---- MAP: DP against brute force and Viterbi -------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    order=st.integers(1, 3),
    vocab=st.integers(2, 3),
    length=st.integers(1, 5),
    seed=st.integers(0, 10_000),
    concentration=st.sampled_from([0.2, 1.0, 5.0]),
)
def test_dp_equals_brute_force(order, vocab, length, seed, concentration):
    model = MarkovModel.random(order, vocab, seed=seed, concentration=concentration)
    best_p, best_sequences = exhaustive_best(model, length)
    for result in (map_decode_dp(model, length), map_decode_bruteforce(model, length)):
        assert math.exp(result.logprob) == pytest.approx(best_p, rel=1e-9)
        assert tuple(result.tokens) in best_sequences  # equal up to ties


def test_dp_on_a_time_varying_chain():
    # Order 1, but a different transition table at every step (tables[1], tables[2], tables[3]).
    steps = [MarkovModel.random(1, 3, seed=s).tables[1] for s in range(3)]
    model = MarkovModel(1, [MarkovModel.random(1, 3, seed=9).tables[0], *steps])
    best_p, best_sequences = exhaustive_best(model, 5)
    for result in (map_decode_dp(model, 5), map_decode_bruteforce(model, 5)):
        assert tuple(result.tokens) in best_sequences
        assert math.exp(result.logprob) == pytest.approx(best_p, rel=1e-9)


def test_dp_order_zero_against_brute_force():
    model = MarkovModel.random(0, 3, seed=5)  # independent tokens
    best_p, best_sequences = exhaustive_best(model, 4)
    result = map_decode_dp(model, 4)
    assert tuple(result.tokens) in best_sequences
    assert math.exp(result.logprob) == pytest.approx(best_p, rel=1e-9)


def test_dp_with_ties_returns_one_of_the_best():
    uniform = MarkovModel(1, [[0.5, 0.5], [[0.5, 0.5], [0.5, 0.5]]])
    result = map_decode_dp(uniform, 4)
    assert math.exp(result.logprob) == pytest.approx(0.5**4)


@pytest.mark.parametrize("seed", range(5))
def test_dp_order_one_is_textbook_viterbi(seed):
    model = MarkovModel.random(1, 4, seed=seed)
    initial, transition = model.tables[0].tolist(), model.tables[1].tolist()
    path, logprob = textbook_viterbi(initial, transition, 7)
    result = map_decode_dp(model, 7)
    assert result.tokens == path
    assert result.logprob == pytest.approx(logprob, rel=1e-12)


@pytest.mark.parametrize(
    ("vocab", "length", "order"), [(2, 1, 1), (3, 6, 1), (3, 6, 2), (2, 8, 3), (4, 2, 3), (3, 5, 0)]
)
def test_operation_counts_match_the_closed_form(vocab, length, order):
    model = MarkovModel.random(order, vocab, seed=1)
    # Steps t >= k each score V^(k+1) (state, next token) pairs; the first k steps are the boundary
    # terms V^1 + ... + V^k while the state is still filling up.
    full_steps = max(0, length - order)
    boundary = sum(vocab**j for j in range(1, min(order, length) + 1))
    assert map_decode_dp(model, length).operations == full_steps * vocab ** (order + 1) + boundary
    assert map_decode_bruteforce(model, length).operations == length * vocab**length


def test_dp_at_a_higher_order_gives_the_same_answer():
    model = MarkovModel.random(1, 3, seed=3)
    best_p, best_sequences = exhaustive_best(model, 5)
    result = map_decode_dp(model, 5, order=4)  # k = T - 1: the DP state holds the whole prefix
    assert tuple(result.tokens) in best_sequences
    assert math.exp(result.logprob) == pytest.approx(best_p, rel=1e-9)


def test_dp_refuses_an_order_below_the_models():
    with pytest.raises(ValueError, match="order must be an integer >= the model's order 2"):
        map_decode_dp(MarkovModel.random(2, 2), 4, order=1)


def test_dp_refuses_a_transformer(tiny_pair):
    with pytest.raises(TypeError, match="map_decode_dp needs a model of finite order"):
        map_decode_dp(tiny_pair[0], 3)


def test_brute_force_refuses_above_its_limit():
    model = MarkovModel.random(1, 3)
    with pytest.raises(ValueError, match=r"3\^12 = 531441 sequences, over max_sequences=200000"):
        map_decode_bruteforce(model, 12)


# ---- beam search -----------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_wide_enough_beam_is_exact(seed):
    model = MarkovModel.random(2, 3, seed=seed)
    best_p, best_sequences = exhaustive_best(model, 4)
    result = beam_search(model, 4, beam_width=3**3)  # keeps every prefix until the last step
    assert tuple(result.tokens) in best_sequences
    assert math.exp(result.logprob) == pytest.approx(best_p, rel=1e-9)


# ---- transformers as the reference -----------------------------------------------------------


def test_greedy_matches_transformers_generate(tiny_pair):
    model = tiny_pair[0]
    prompt = [5, 17, 42]
    reference = model.generate(
        torch.tensor([prompt]), max_new_tokens=8, do_sample=False, num_beams=1, pad_token_id=0, eos_token_id=None
    )
    assert greedy_decode(model, 8, prompt=prompt).tokens == reference[0, 3:].tolist()


@pytest.mark.parametrize("beams", [1, 3])
def test_beam_search_matches_transformers_generate(tiny_pair, beams):
    model = tiny_pair[0]
    prompt = [7, 3]
    reference = model.generate(
        torch.tensor([prompt]),
        max_new_tokens=5,
        do_sample=False,
        num_beams=beams,
        length_penalty=0.0,
        early_stopping=True,
        pad_token_id=0,
        eos_token_id=None,
    )
    assert beam_search(model, 5, beam_width=beams, prompt=prompt).tokens == reference[0, 2:].tolist()


def test_perplexity_matches_transformers_loss(tiny_pair):
    model = tiny_pair[0]
    ids = torch.tensor([[1, 9, 33, 33, 70, 2, 5, 60]])
    with torch.no_grad():
        loss = model(ids, labels=ids).loss.item()  # mean NLL of tokens 2..T given the ones before
    tokens = ids[0, 1:].tolist()
    assert perplexity(model, tokens, prompt=[1]) == pytest.approx(math.exp(loss), rel=1e-5)
    assert sequence_logprob(model, tokens, prompt=[1]) == pytest.approx(-loss * len(tokens), rel=1e-5)


def test_sequence_logprob_on_a_table_is_the_product_of_its_entries():
    model = page_table_model()
    assert math.exp(sequence_logprob(model, [0, 1, 0])) == pytest.approx(FIRST[0] * SECOND[0][1] * THIRD[0][1][0])
    assert perplexity(model, [1, 0, 0]) == pytest.approx((FIRST[1] * SECOND[1][0] * THIRD[1][0][0]) ** (-1 / 3))


# ---- tables and bad input --------------------------------------------------------------------


def test_markov_logits_are_the_table_entries():
    model = MarkovModel.random(2, 3, seed=9)
    tokens = [2, 0, 1, 1, 0]
    logits = model(torch.tensor([[model.bos_id, *tokens]]))
    for position in range(len(tokens)):
        context = tokens[max(0, position - 2) : position]
        expected = model.tables[min(position, 2)][tuple(context)].log()
        assert torch.equal(logits[0, position], expected)


@pytest.mark.parametrize(
    ("tables", "message"),
    [
        ([[0.5, 0.4]], r"tables\[0\] sums to 0.9;"),
        ([[0.5, 0.5], [[0.5, 0.5], [0.7, 0.2]]], r"tables\[1\] row \[1\] sums to 0.9;"),
        ([[1.2, -0.2]], r"tables\[0\] has an entry outside \[0, 1\]"),
        ([[0.5, 0.5], [0.5, 0.5]], r"tables\[1\] must have shape \(2, 2\)"),
    ],
)
def test_invalid_tables_are_refused_naming_the_row(tables, message):
    with pytest.raises(ValueError, match=message):
        TableModel(tables)


def test_row_tolerance_is_1e_9():
    TableModel([[0.5, 0.5 + 5e-10]])  # inside the tolerance
    with pytest.raises(ValueError, match="sums to"):
        TableModel([[0.5, 0.5 + 5e-9]])


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda m: greedy_decode(m, 0), ValueError, "length must be an integer >= 1"),
        (lambda m: greedy_decode(m, 4), ValueError, "length must be <= 3"),
        (lambda m: beam_search(m, 2, beam_width=0), ValueError, "beam_width must be an integer >= 1"),
        (lambda m: map_decode_dp(m, 0), ValueError, "length must be an integer >= 1"),
        (lambda m: map_decode_bruteforce(m, 2.5), TypeError, "length must be an integer >= 1"),
    ],
)
def test_bad_arguments_are_refused(call, error, message):
    with pytest.raises(error, match=message):
        call(page_table_model())


def test_markov_order_must_be_known():
    with pytest.raises(ValueError, match="order must be an integer >= 0"):
        MarkovModel(-1, [[1.0]])


def test_committed_page_table_result_matches_exact_enumeration():
    # The numbers the guides show come from this file: check them against the tables by hand.
    import json
    from pathlib import Path

    record = json.loads((Path(__file__).parent.parent / "docs/results/decoding_page_table.json").read_text())
    values = record["values"]
    names = "AB"
    for row in values["rows"]:
        a, b, c = (names.index(ch) for ch in row["x1 x2 x3"].split())
        assert row["p"] == pytest.approx(FIRST[a] * SECOND[a][b] * THIRD[a][b][c], abs=1e-6)
    every = {(a, b, c): FIRST[a] * SECOND[a][b] * THIRD[a][b][c] for a in range(2) for b in range(2) for c in range(2)}
    best = max(every, key=every.get)
    assert values["map"]["sequence"] == " ".join(names[t] for t in best)
    assert values["map"]["p"] == pytest.approx(every[best], abs=1e-6)
