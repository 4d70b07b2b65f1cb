"""Greedy, beam search, brute-force MAP and the k-th order DP, checked against independent references:
exact enumeration written here, a textbook Viterbi, operation counts found by listing prefixes, and
transformers' own generate() and loss."""

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
    page_model,
    perplexity,
    sequence_logprob,
)
from inferlab.decoding.examples import NEXT, START, TOKENS
from inferlab.decoding.search import dp_pairs_per_step, viterbi


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


# ---- the guides' own model -------------------------------------------------------------------


def chain_rule(tokens) -> float:
    """p(x_1..x_T) of the guides' first-order model, from its two tables by hand."""
    p = START[tokens[0]]
    for t in range(1, len(tokens)):
        p *= NEXT[tokens[t - 1]][tokens[t]]
    return p


def greedy_by_hand(length):
    tokens = [max(range(3), key=lambda x: START[x])]
    while len(tokens) < length:
        row = NEXT[tokens[-1]]
        tokens.append(max(range(3), key=row.__getitem__))
    return tokens


@pytest.mark.parametrize("length", [2, 3, 4])
def test_page_model_greedy_is_not_map(length):
    model = page_model()
    every = {seq: chain_rule(seq) for seq in itertools.product(range(3), repeat=length)}
    map_sequence = max(every, key=every.get)
    greedy_tokens = greedy_by_hand(length)
    assert map_sequence != tuple(greedy_tokens)  # the point of the example
    assert START.index(max(START)) != map_sequence[0]  # the tempting first token is not the best start

    greedy = greedy_decode(model, length)
    assert greedy.tokens == greedy_tokens
    assert math.exp(greedy.logprob) == pytest.approx(every[tuple(greedy_tokens)], rel=1e-12)
    assert beam_search(model, length, beam_width=1).tokens == greedy_tokens  # a beam of one is greedy
    for decoder in (map_decode_bruteforce(model, length), map_decode_dp(model, length)):
        assert tuple(decoder.tokens) == map_sequence
        assert math.exp(decoder.logprob) == pytest.approx(every[map_sequence], rel=1e-12)


@pytest.mark.parametrize("length", [1, 2, 4, 6])
def test_viterbi_matches_brute_force_and_the_textbook(length):
    tokens, probability, trellis, back_pointers = viterbi(START, NEXT, length)
    every = {seq: chain_rule(seq) for seq in itertools.product(range(3), repeat=length)}
    assert probability == pytest.approx(max(every.values()), rel=1e-12)
    assert every[tuple(tokens)] == pytest.approx(probability, rel=1e-12)
    textbook_path, textbook_logprob = textbook_viterbi(START, NEXT, length)
    assert tokens == textbook_path and math.log(probability) == pytest.approx(textbook_logprob, rel=1e-12)
    # trellis[t][x]: the best prefix of t + 1 tokens ending in x, by enumerating those prefixes.
    for step, row in enumerate(trellis):
        for x in range(3):
            ending = [chain_rule(seq) for seq in itertools.product(range(3), repeat=step + 1) if seq[-1] == x]
            assert row[x] == pytest.approx(max(ending), rel=1e-12)
    assert len(back_pointers) == length - 1


def test_viterbi_refuses_a_bad_length():
    with pytest.raises(ValueError, match="length must be an integer >= 1, got 0"):
        viterbi(START, NEXT, 0)


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


def pairs_by_listing_prefixes(vocab, length, order):
    """Independent count: list every prefix of each length, keep the distinct last-k endings, times V."""
    total = 0
    for step in range(length):
        window = min(step, order)
        endings = {prefix[step - window :] for prefix in itertools.product(range(vocab), repeat=step)}
        total += len(endings) * vocab
    return total


@pytest.mark.parametrize(
    ("vocab", "length", "order"), [(2, 1, 1), (3, 6, 1), (3, 6, 2), (2, 8, 3), (4, 2, 3), (3, 5, 0), (2, 5, 4)]
)
def test_operation_counts_match_an_independent_count(vocab, length, order):
    model = MarkovModel.random(order, vocab, seed=1)
    expected = pairs_by_listing_prefixes(vocab, length, order)
    assert map_decode_dp(model, length).operations == expected
    assert sum(dp_pairs_per_step(vocab, length, order)) == expected  # what the reader's checker uses
    assert map_decode_bruteforce(model, length).operations == length * vocab**length


@pytest.mark.parametrize("arguments", [(0, 3, 1), (2, 0, 1), (2, 3, -1), (2, 3.0, 1)])
def test_pair_count_refuses_bad_sizes(arguments):
    with pytest.raises(ValueError, match="must be an integer"):
        dp_pairs_per_step(*arguments)


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
    model = page_model()
    assert math.exp(sequence_logprob(model, [0, 1, 0])) == pytest.approx(START[0] * NEXT[0][1] * NEXT[1][0])
    assert perplexity(model, [1, 2, 2]) == pytest.approx((START[1] * NEXT[1][2] * NEXT[2][2]) ** (-1 / 3))


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
    three_step_table = TableModel(MarkovModel.random(2, 2, seed=0).tables)  # knows only three steps
    with pytest.raises(error, match=message):
        call(three_step_table)


def test_markov_order_must_be_known():
    with pytest.raises(ValueError, match="order must be an integer >= 0"):
        MarkovModel(-1, [[1.0]])


def test_committed_page_table_result_matches_exact_enumeration():
    # The numbers the guides show come from this file: check them against the tables by hand.
    import json
    from pathlib import Path

    record = json.loads((Path(__file__).parent.parent / "docs/results/decoding_page_table.json").read_text())
    values = record["values"]
    length = values["length"]
    every = {seq: chain_rule(seq) for seq in itertools.product(range(3), repeat=length)}
    assert len(values["rows"]) == len(every)
    for row in values["rows"]:
        tokens = tuple(TOKENS.index(name) for name in row["sequence"].split())
        assert row["p"] == pytest.approx(every[tokens], abs=1e-6)
    best = max(every, key=every.get)
    assert values["map"]["sequence"] == " ".join(TOKENS[t] for t in best)
    assert values["map"]["p"] == pytest.approx(every[best], abs=1e-6)
    assert values["greedy"]["sequence"] == " ".join(TOKENS[t] for t in greedy_by_hand(length))

    trellis = values["viterbi"]
    every = {seq: chain_rule(seq) for seq in itertools.product(range(3), repeat=trellis["length"])}
    best = max(every, key=every.get)
    assert trellis["sequence"] == " ".join(TOKENS[t] for t in best)
    assert trellis["p"] == pytest.approx(every[best], abs=1e-6)
    assert len(trellis["rows"]) == trellis["length"]
