"""Exact behaviour of the decoders and the table models at their edges: boundaries of every size and
length check, the whole error messages (naming the argument, what is allowed and what was given),
prompts, start symbols and operation counts.

References are independent of the code under test: the chain rule over small tables written here,
enumeration of every sequence or prefix, and transformers' own GPT-2.
"""

from __future__ import annotations

import itertools
import math
import re

import pytest
import torch

from inferlab.checks import NonFiniteError
from inferlab.decoding import (
    MarkovModel,
    TableModel,
    beam_search,
    enumerate_sequences,
    greedy_decode,
    map_decode_bruteforce,
    map_decode_dp,
    page_model,
    perplexity,
    sequence_logprob,
    token_logprobs,
)
from inferlab.decoding.examples import NEXT, START
from inferlab.decoding.search import dp_pairs_per_step, viterbi, vocab_size

# A three-step table model of this file's own: p(x1), p(x2 | x1), p(x3 | x1, x2).
THREE_STEPS = [
    [0.7, 0.3],
    [[0.2, 0.8], [0.75, 0.25]],
    [[[0.35, 0.65], [0.3, 0.7]], [[0.15, 0.85], [0.45, 0.55]]],
]


def three_step_model() -> TableModel:
    return TableModel(THREE_STEPS)


def chain_rule(model: MarkovModel, tokens) -> float:
    """p(x_1..x_T) by the chain rule, reading the model's raw probability tables."""
    p = 1.0
    for step, token in enumerate(tokens):
        table = model.tables[min(step, len(model.tables) - 1)]
        context = tuple(tokens[max(0, step - model.order) : step]) if model.order else ()
        p *= float(table[context + (token,)])
    return p


def every_sequence(model: MarkovModel, length: int) -> dict[tuple[int, ...], float]:
    return {seq: chain_rule(model, seq) for seq in itertools.product(range(model.vocab_size), repeat=length)}


def greedy_by_hand(model: MarkovModel, length: int) -> list[int]:
    tokens: list[int] = []
    for _ in range(length):
        options = [chain_rule(model, [*tokens, x]) for x in range(model.vocab_size)]
        tokens.append(max(range(model.vocab_size), key=options.__getitem__))
    return tokens


def after_last_token(ids: torch.Tensor) -> torch.Tensor:
    """A bare logits function (no vocab_size, no start symbol): the page model's NEXT row of the last id."""
    return torch.tensor(NEXT, dtype=torch.float64).log()[ids]


class StartSymbolOnly:
    """A logits function with a start symbol that does not say how many tokens it has."""

    bos_id = 3

    def __call__(self, ids: torch.Tensor) -> torch.Tensor:
        return page_model()(ids)


def nan_logits(ids: torch.Tensor) -> torch.Tensor:
    return torch.full((*ids.shape, 2), math.nan)


def certain_logits(nll_of_token_1: float):
    """Two tokens; token 1 has log-probability -nll_of_token_1 (to rounding) at every position."""

    def logits_fn(ids: torch.Tensor) -> torch.Tensor:
        logits = torch.zeros(*ids.shape, 2, dtype=torch.float64)
        logits[..., 1] = -nll_of_token_1
        return logits

    return logits_fn


@pytest.fixture(scope="module")
def tiny_gpt2():
    """A tiny GPT-2: it has no vocab_size attribute, only its embedding and output layers say 11."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=11, n_embd=8, n_layer=1, n_head=2, n_positions=16, bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(config).eval()


# ---- token_logprobs, sequence_logprob, perplexity ----------------------------------------------


@pytest.mark.parametrize(("tokens", "bad"), [([0, 3], 3), ([-1], -1), ([2, 1, 4], 4)])
def test_tokens_outside_a_table_models_vocabulary_are_refused(tokens, bad):
    # The start symbol (id 3) is read but never predicted, so 3 is not a token to score.
    message = f"tokens must be a list or 1-D tensor of integer token ids in 0..2, got {bad} among them"
    with pytest.raises(ValueError, match=re.escape(message)):
        sequence_logprob(page_model(), tokens)


def test_a_model_without_vocab_size_is_sized_by_its_layers(tiny_gpt2):
    assert not hasattr(tiny_gpt2, "vocab_size"), "this check needs a model that does not state vocab_size"
    assert vocab_size(tiny_gpt2) == 11  # read from the output layer: no prompt, no call needed
    message = "tokens must be a list or 1-D tensor of integer token ids in 0..10, got 11 among them"
    with pytest.raises(ValueError, match=re.escape(message)):
        token_logprobs(tiny_gpt2, [3, 11], prompt=[1])


def test_sequence_logprob_of_gpt2_matches_transformers_loss(tiny_gpt2):
    ids = torch.tensor([[1, 7, 3, 10, 0]])
    with torch.no_grad():
        loss = tiny_gpt2(ids, labels=ids).loss.item()  # mean NLL of tokens 2..T
    tokens = ids[0, 1:].tolist()
    assert sequence_logprob(tiny_gpt2, tokens, prompt=[1]) == pytest.approx(-loss * len(tokens), rel=1e-5)


def test_scoring_past_a_table_models_last_step_is_refused():
    # Two tables know two steps; a third token has no table, so its logits are NaN.
    model = TableModel(THREE_STEPS[:2])
    message = "model's logits must hold finite numbers or -inf, got nan at index (2, 0)"
    with pytest.raises(NonFiniteError, match=re.escape(message)):
        sequence_logprob(model, [0, 1, 0])
    assert math.exp(sequence_logprob(model, [1, 0])) == pytest.approx(0.3 * 0.75, rel=1e-12)


def test_perplexity_beyond_float_range_is_inf():
    # p(token 1) = e^-1000, so the perplexity e^1000 is past the largest float.
    assert perplexity(certain_logits(1000.0), [1, 1], prompt=[0]) == math.inf
    assert perplexity(certain_logits(700.0), [1], prompt=[0]) == pytest.approx(math.exp(700.0), rel=1e-9)


def test_perplexity_at_the_largest_finite_exp_is_finite():
    """exp(log(float max)) rounds just below the largest float: finite, so not inf (the next float up overflows)."""
    import sys

    at_the_edge = math.log(sys.float_info.max)
    model = certain_logits(at_the_edge)
    nll = -sequence_logprob(model, [1], prompt=[0])
    assert nll == at_the_edge  # log(1 + e^-x) vanishes in float64 at this size
    assert perplexity(model, [1], prompt=[0]) == math.exp(nll) < math.inf


def test_impossible_sequence_has_log_probability_minus_inf():
    alternating = MarkovModel(1, [[0.5, 0.5], [[0.0, 1.0], [1.0, 0.0]]])  # zeros are probabilities too
    assert sequence_logprob(alternating, [0, 0]) == -math.inf
    assert sequence_logprob(alternating, [0, 1, 0]) == pytest.approx(math.log(0.5))


# ---- the length of a fixed-length table model --------------------------------------------------


def test_every_decoder_accepts_length_equal_to_the_number_of_tables():
    model = three_step_model()
    every = every_sequence(model, 3)
    best = max(every, key=every.get)
    greedy = greedy_decode(model, 3)
    assert greedy.tokens == greedy_by_hand(model, 3)
    assert math.exp(greedy.logprob) == pytest.approx(every[tuple(greedy.tokens)], rel=1e-12)
    for result in (beam_search(model, 3, beam_width=8), map_decode_bruteforce(model, 3), map_decode_dp(model, 3)):
        assert tuple(result.tokens) == best
        assert math.exp(result.logprob) == pytest.approx(every[best], rel=1e-12)
    assert len(enumerate_sequences(model, 3)) == 8


@pytest.mark.parametrize(
    "decode",
    [
        lambda m: greedy_decode(m, 4),
        lambda m: beam_search(m, 4, beam_width=2),
        lambda m: enumerate_sequences(m, 4),
        lambda m: map_decode_bruteforce(m, 4),
        lambda m: map_decode_dp(m, 4),
    ],
    ids=["greedy", "beam", "enumerate", "bruteforce", "dp"],
)
def test_every_decoder_refuses_a_length_past_the_number_of_tables(decode):
    with pytest.raises(ValueError, match=re.escape("length must be <= 3 for this TableModel, got 4")):
        decode(three_step_model())


# ---- operation counts of greedy and beam search ------------------------------------------------


@pytest.mark.parametrize("length", [1, 4])
def test_greedy_scores_every_token_once_per_step(length):
    # Greedy compares the 3 next tokens at each step, nothing else.
    assert greedy_decode(page_model(), length).operations == 3 * length


@pytest.mark.parametrize(("beam_width", "length"), [(1, 4), (2, 3), (5, 3), (9, 3)])
def test_beam_search_counts_every_candidate_it_scores(beam_width, length):
    # At step t the beam holds min(width, number of prefixes of length t) prefixes, each scored
    # against all 3 next tokens.
    kept = [min(beam_width, len(list(itertools.product(range(3), repeat=t)))) for t in range(length)]
    assert beam_search(page_model(), length, beam_width=beam_width).operations == 3 * sum(kept)


# ---- vocab_size, enumerate_sequences, map_decode_bruteforce ------------------------------------


def test_vocab_size_asks_a_bare_logits_function_with_the_prompt():
    assert vocab_size(after_last_token, prompt=[2]) == 3


def test_vocab_size_asks_a_model_with_a_start_symbol_from_that_symbol():
    assert vocab_size(StartSymbolOnly()) == 3


def test_enumerate_sequences_from_a_start_symbol_without_a_prompt():
    results = enumerate_sequences(StartSymbolOnly(), 2)
    assert [tuple(tokens) for tokens, _ in results] == list(itertools.product(range(3), repeat=2))
    for (a, b), logprob in results:
        assert math.exp(logprob) == pytest.approx(START[a] * NEXT[a][b], rel=1e-12)


@pytest.mark.parametrize(
    ("model", "prompt"),
    [(page_model(), [3, 2]), (after_last_token, [2])],  # start symbol then Z, or a bare Z
    ids=["table-model", "logits-function"],
)
def test_enumerate_sequences_continues_the_prompt(model, prompt):
    results = enumerate_sequences(model, 2, prompt=prompt)
    assert [tuple(tokens) for tokens, _ in results] == list(itertools.product(range(3), repeat=2))
    for (a, b), logprob in results:  # the prompt ends in Z (token 2)
        assert math.exp(logprob) == pytest.approx(NEXT[2][a] * NEXT[a][b], rel=1e-12)


def test_bruteforce_map_continues_the_prompt():
    after_z = {(a, b): NEXT[2][a] * NEXT[a][b] for a, b in itertools.product(range(3), repeat=2)}
    best = max(after_z, key=after_z.get)
    assert best != tuple(map_decode_bruteforce(page_model(), 2).tokens)  # the prompt matters here
    result = map_decode_bruteforce(page_model(), 2, prompt=[3, 2])
    assert tuple(result.tokens) == best
    assert math.exp(result.logprob) == pytest.approx(after_z[best], rel=1e-12)


def test_max_sequences_is_the_largest_number_scored():
    assert len(enumerate_sequences(page_model(), 2, max_sequences=9)) == 9  # exactly 3^2: allowed
    assert map_decode_bruteforce(page_model(), 2, max_sequences=9).operations == 18
    message = (
        "brute force would score V^T = 3^2 = 9 sequences, over max_sequences=8; "
        "lower length, or raise max_sequences if you mean it"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        map_decode_bruteforce(page_model(), 2, max_sequences=8)
    with pytest.raises(ValueError, match=re.escape(message)):
        enumerate_sequences(page_model(), 2, max_sequences=8)


@pytest.mark.parametrize(("value", "error"), [(0, ValueError), (2.5, TypeError)])
def test_max_sequences_must_be_a_positive_integer(value, error):
    with pytest.raises(error, match=re.escape(f"max_sequences must be an integer >= 1, got {value}")):
        enumerate_sequences(page_model(), 2, max_sequences=value)


def test_enumerate_sequences_refuses_nan_logits():
    message = "model's logits must hold finite numbers or -inf, got nan at index (0, 0, 0)"
    with pytest.raises(NonFiniteError, match=re.escape(message)):
        enumerate_sequences(nan_logits, 1, prompt=[0])


# ---- viterbi -----------------------------------------------------------------------------------


def first_order_chain_rule(start, transition, tokens) -> float:
    p = start[tokens[0]]
    for prev, nxt in itertools.pairwise(tokens):
        p *= transition[prev][nxt]
    return p


@pytest.mark.parametrize(
    ("start", "transition"),
    [
        ([1.0, 0.0], [[0.0, 1.0], [1.0, 0.0]]),  # probabilities 0 and 1 exactly: 0 1 0 1
        ([0.5, 0.3, 0.2], [[0.1, 0.8, 0.1], [0.1, 0.1, 0.8], [0.8, 0.1, 0.1]]),  # a cycle 0 -> 1 -> 2 -> 0
    ],
    ids=["deterministic", "cycle"],
)
def test_viterbi_path_of_distinct_tokens_matches_brute_force(start, transition):
    every = {
        seq: first_order_chain_rule(start, transition, seq) for seq in itertools.product(range(len(start)), repeat=4)
    }
    best = max(every, key=every.get)
    assert len(set(best)) > 1  # the path changes token, so the back-pointers' order matters
    tokens, probability, _, _ = viterbi(start, transition, 4)
    assert tuple(tokens) == best
    assert probability == pytest.approx(every[best], rel=1e-12)


@pytest.mark.parametrize(
    ("start", "transition"),
    [([1.5, 0.0], [[0.5, 0.5], [0.5, 0.5]]), ([1.0, 0.0], [[0.5, 0.5], [-0.5, 1.5]])],
)
def test_viterbi_refuses_probabilities_outside_0_1(start, transition):
    table = [start, *transition]
    message = f"start and transition must hold probabilities in [0, 1], got {table}"
    with pytest.raises(ValueError, match=re.escape(message)):
        viterbi(start, transition, 3)


# ---- map_decode_dp -----------------------------------------------------------------------------


@pytest.mark.parametrize("order", [True, 2.0, "2"])
def test_dp_refuses_an_order_that_is_not_an_integer(order):
    message = f"order must be an integer >= the model's order 1, got {order!r}: a smaller state would forget context"
    with pytest.raises(ValueError, match=re.escape(message)):
        map_decode_dp(MarkovModel.random(1, 2, seed=3), 3, order=order)


def test_dp_size_limit_refuses_before_scoring_and_names_order():
    independent = MarkovModel(0, [[0.7, 0.3]])  # two tokens, no context
    message_start = "order would need 268,435,456 scores per DP step, "
    message_end = "over the limit of 134,217,728; choose a smaller order"
    with pytest.raises(ValueError, match=re.escape(message_start) + ".*" + re.escape(message_end)):
        map_decode_dp(independent, 3, order=27)
    # One order lower is just inside the limit, and a three-token DP at that order is still exact.
    result = map_decode_dp(independent, 3, order=26)
    assert result.tokens == [0, 0, 0]
    assert result.logprob == pytest.approx(3 * math.log(0.7), rel=1e-12)


# ---- dp_pairs_per_step -------------------------------------------------------------------------


def pairs_by_listing_prefixes(vocab, length, order):
    """Per step: list every prefix so far, keep the distinct last-k endings, times V next tokens."""
    counts = []
    for step in range(length):
        window = min(step, order)
        endings = {prefix[step - window :] for prefix in itertools.product(range(vocab), repeat=step)}
        counts.append(len(endings) * vocab)
    return counts


@pytest.mark.parametrize(
    ("vocab", "length", "order"),
    [(1, 4, 2), (3, 6, 5), (2, 9, 7), (4, 3, 6), (1001, 1, 5), (2, 4, 0)],
)
def test_pairs_per_step_match_listing_every_prefix(vocab, length, order):
    assert dp_pairs_per_step(vocab, length, order) == pairs_by_listing_prefixes(vocab, length, order)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ((0, 3, 1), "vocab must be an integer >= 1, got 0"),
        ((True, 3, 1), "vocab must be an integer >= 1, got True"),
        ((2, 0, 1), "length must be an integer >= 1, got 0"),
        ((2, 3.0, 1), "length must be an integer >= 1, got 3.0"),
        ((2, 3, -1), "order must be an integer >= 0, got -1"),
        ((2, 3, "1"), "order must be an integer >= 0, got '1'"),
    ],
)
def test_pair_count_names_the_bad_argument(arguments, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        dp_pairs_per_step(*arguments)


def test_pair_count_follows_exactly_a_million_states_without_building_a_step_more():
    """The guard allows 10^6 states; the count must not then extend them once more for an unscored step.

    Order 6 over 10 tokens, 7 steps: 1, 10, ..., 10^6 states (every ending is possible), each times 10.
    Built one step too far, the last set would take 10^7 windows and several seconds.
    """
    import time

    start = time.perf_counter()
    assert dp_pairs_per_step(10, 7, 6) == [10 ** (step + 1) for step in range(7)]
    assert dp_pairs_per_step(1000, 3, 2) == [1000, 1000**2, 1000**3]
    assert time.perf_counter() - start < 30  # about 1 s; the old loop took minutes on the second call


def test_pair_count_refuses_more_than_a_million_states():
    # 21 steps at order 20 over two tokens would follow 2^20 = 1,048,576 states.
    message = "order must keep vocab^order states <= 10^6 to follow, got 2^20"
    with pytest.raises(ValueError, match=re.escape(message)):
        dp_pairs_per_step(2, 21, 20)


# ---- MarkovModel and TableModel construction ---------------------------------------------------


@pytest.mark.parametrize("order", [True, 1.5, -1])
def test_markov_order_must_be_a_nonnegative_integer(order):
    with pytest.raises(ValueError, match=re.escape(f"order must be an integer >= 0, got {order!r}")):
        MarkovModel(order, [[0.5, 0.5], [[0.5, 0.5], [0.5, 0.5]]])


def test_markov_model_needs_a_table_per_order():
    message = "an order-2 model needs at least 3 tables (p(x1), p(x2 | x1), ..., p(x3 | x1..x2)), got 2"
    with pytest.raises(ValueError, match=re.escape(message)):
        MarkovModel(2, THREE_STEPS[:2])


def test_a_table_that_is_not_numbers_is_named_by_index():
    with pytest.raises(TypeError, match=re.escape("tables[1] must be a nested list or tensor of probabilities: ")):
        MarkovModel(1, [[0.5, 0.5], [[0.5, "x"], [0.5, 0.5]]])


@pytest.mark.parametrize(("first", "shape"), [([[0.5, 0.5], [0.5, 0.5]], "(2, 2)"), ([], "(0,)"), (1.0, "()")])
def test_first_table_must_be_a_nonempty_distribution(first, shape):
    message = f"tables[0] must be a 1-D distribution p(x1), got shape {shape}"
    with pytest.raises(ValueError, match=re.escape(message)):
        MarkovModel(0, [first])


def test_an_entry_outside_0_1_is_reported_with_its_row():
    tables = [[0.5, 0.5], [[0.5, 0.5], [1.2, -0.2]]]
    message = "tables[1] row [1] has an entry outside [0, 1]: [1.2, -0.2]"
    with pytest.raises(ValueError, match=re.escape(message)):
        MarkovModel(1, tables)


def test_one_token_vocabulary_is_a_model():
    model = MarkovModel(0, [[1.0]])
    assert model.vocab_size == 1 and model.bos_id == 1
    for result in (greedy_decode(model, 3), map_decode_dp(model, 3), map_decode_bruteforce(model, 3)):
        assert result.tokens == [0, 0, 0] and result.logprob == 0.0


def test_names_default_to_token_ids_and_can_be_given():
    assert MarkovModel(0, [[0.5, 0.25, 0.25]]).names == ["0", "1", "2"]
    assert page_model().names == ["X", "Y", "Z"]
    assert TableModel(THREE_STEPS[:2], names=["a", "b"]).names == ["a", "b"]
    with pytest.raises(ValueError, match=re.escape("names must give one name per token (3), got 2")):
        MarkovModel(0, [[0.5, 0.25, 0.25]], names=["a", "b"])


def test_repr_names_the_class_order_and_vocabulary():
    assert repr(page_model()) == "MarkovModel(order=1, vocab_size=3)"
    assert repr(three_step_model()) == "TableModel(order=2, vocab_size=2)"


# ---- MarkovModel.random ------------------------------------------------------------------------


def same_tables(a: MarkovModel, b: MarkovModel) -> bool:
    return len(a.tables) == len(b.tables) and all(torch.equal(x, y) for x, y in zip(a.tables, b.tables, strict=True))


def test_random_model_is_reproducible_by_seed():
    assert same_tables(MarkovModel.random(2, 3, seed=4), MarkovModel.random(2, 3, seed=4))
    assert not same_tables(MarkovModel.random(2, 3, seed=4), MarkovModel.random(2, 3, seed=5))


def test_random_model_defaults_are_seed_0_and_concentration_half():
    default = MarkovModel.random(2, 3)
    assert same_tables(default, MarkovModel.random(2, 3, seed=0, concentration=0.5))
    assert not same_tables(default, MarkovModel.random(2, 3, seed=1))
    assert not same_tables(default, MarkovModel.random(2, 3, concentration=1.5))


@pytest.mark.parametrize(("order", "vocab"), [(0, 1), (1, 3), (2, 4)])
def test_random_model_rows_are_float64_distributions(order, vocab):
    model = MarkovModel.random(order, vocab, seed=7)
    assert (model.order, model.vocab_size) == (order, vocab)
    assert [tuple(t.shape) for t in model.tables] == [(vocab,) * (i + 1) for i in range(order + 1)]
    for table in model.tables:
        assert table.dtype == torch.float64
        assert torch.isfinite(table).all() and (table >= 0).all()
        assert torch.allclose(table.sum(-1), torch.ones((), dtype=torch.float64), atol=1e-12)


def test_small_concentration_gives_peaked_rows():
    def mean_top_probability(concentration):
        return float(MarkovModel.random(1, 5, seed=2, concentration=concentration).tables[1].max(-1).values.mean())

    # Five tokens: a uniform row's top probability is 0.2, a one-hot row's is 1.
    assert mean_top_probability(0.05) > 0.7 > 0.3 > mean_top_probability(50.0)


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"order": 1.5}, TypeError, "order must be an integer >= 0, got 1.5"),
        ({"vocab_size": 0}, ValueError, "vocab_size must be an integer >= 1, got 0"),
        ({"seed": -1}, ValueError, "seed must be an integer >= 0, got -1"),
        ({"seed": 1.5}, TypeError, "seed must be an integer >= 0, got 1.5"),
        ({"concentration": 0}, ValueError, "concentration must be > 0, got 0"),
    ],
)
def test_random_model_refuses_bad_arguments_by_name(arguments, error, message):
    with pytest.raises(error, match=re.escape(message)):
        MarkovModel.random(**{"order": 1, "vocab_size": 3, **arguments})


def test_random_model_refuses_tables_too_large_to_draw():
    # An order-3 model over 10^4 tokens holds V + V^2 + V^3 + V^4 probabilities.
    message = (
        "order would need 10,001,000,100,010,000 table entries at vocab_size=10000, "
        "over the limit of 16,777,216; choose a smaller order"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        MarkovModel.random(3, 10_000)


# ---- table_at and log_conditional --------------------------------------------------------------


def test_markov_table_at_repeats_the_last_table_and_refuses_negative_steps():
    model = page_model()
    assert model.table_at(0).tolist() == START
    assert model.table_at(7).tolist() == NEXT  # a Markov model runs forever on its last table
    with pytest.raises(ValueError, match=re.escape("step must be an integer >= 0, got -1")):
        model.table_at(-1)


def test_table_model_table_at_covers_exactly_its_steps():
    model = three_step_model()
    assert model.table_at(2).tolist() == THREE_STEPS[2]
    for step in (3, -1):
        with pytest.raises(ValueError, match=re.escape(f"step must be an integer in [0, 2], got {step}")):
            model.table_at(step)


def test_log_conditional_defaults_to_the_models_order():
    model = page_model()
    assert torch.equal(model.log_conditional(0), torch.tensor(START, dtype=torch.float64).log())
    assert torch.equal(model.log_conditional(3), torch.tensor(NEXT, dtype=torch.float64).log())


def test_log_conditional_at_a_higher_order_ignores_the_older_tokens():
    model = page_model()
    table = model.log_conditional(2, order=3)  # two context tokens, of which only the last matters
    assert tuple(table.shape) == (3, 3, 3)
    for older, last, nxt in itertools.product(range(3), repeat=3):
        assert float(table[older, last, nxt]) == pytest.approx(math.log(NEXT[last][nxt]), rel=1e-15)
    assert tuple(model.log_conditional(5, order=3).shape) == (3, 3, 3, 3)


@pytest.mark.parametrize("model", [page_model(), three_step_model()], ids=["markov", "table"])
def test_log_conditional_refuses_a_negative_step(model):
    with pytest.raises(ValueError, match=re.escape("step must be an integer >= 0, got -1")):
        model.log_conditional(-1)


def test_log_conditional_refuses_an_order_below_the_models():
    with pytest.raises(ValueError, match=re.escape("order must be an integer >= 1, got 0")):
        page_model().log_conditional(1, order=0)


# ---- MarkovModel as a logits function ----------------------------------------------------------


@pytest.mark.parametrize(
    "ids", [torch.tensor([[True, False]]), torch.tensor([[3.0, 0.0]]), torch.tensor([[3 + 0j, 0j]])]
)
def test_logits_refuse_ids_that_are_not_integers(ids):
    with pytest.raises(TypeError, match=re.escape(f"input_ids must hold integer token ids, got dtype {ids.dtype}")):
        page_model()(ids)


@pytest.mark.parametrize("ids", [torch.tensor([3, 0]), torch.zeros((1, 0), dtype=torch.long)])
def test_logits_refuse_ids_of_the_wrong_shape(ids):
    message = f"input_ids must have shape (batch, length >= 1), got {tuple(ids.shape)}"
    with pytest.raises(ValueError, match=re.escape(message)):
        page_model()(ids)


@pytest.mark.parametrize("bad", [3, 4, -1])
def test_logits_refuse_ids_outside_the_vocabulary(bad):
    with pytest.raises(ValueError, match=re.escape("token ids after the start symbol must be in 0..2")):
        page_model()(torch.tensor([[3, 1, bad]]))


def test_table_model_logits_past_its_steps_are_nan():
    model = TableModel(THREE_STEPS[:2])
    logits = model(torch.tensor([[model.bos_id, 1, 0, 1], [model.bos_id, 0, 1, 1]]))
    assert tuple(logits.shape) == (2, 4, 2)
    assert torch.allclose(logits[:, 0].exp(), torch.tensor([[0.7, 0.3], [0.7, 0.3]], dtype=torch.float64))
    assert torch.allclose(logits[:, 1].exp(), torch.tensor([[0.75, 0.25], [0.2, 0.8]], dtype=torch.float64))
    assert torch.isnan(logits[:, 2:]).all()  # no table for a third or fourth token
