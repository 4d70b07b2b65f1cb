"""Speculative decoding, exactly: every refusal with its whole message at each boundary, and every
counter of a run against a walk worked out independently.

References used (never the code's own output):
- the rules the docstrings and messages state (max_new_tokens >= 0, gamma >= 1, top_p in (0, 1], ...);
- Leviathan et al. (2022), Section 3, for the closed forms at their smallest allowed arguments;
- plain greedy decoding written here (an argmax loop), and the rule of greedy verification, walked by
  hand round by round;
- brute-force enumeration of every draft path and its probability for the dynamic token tree.
"""

from __future__ import annotations

import math
import re

import pytest
import torch

from inferlab.speculative import (
    arithmetic_cost_increase,
    best_gamma,
    expected_accepted_fraction,
    expected_speedup,
    expected_tokens_per_step,
    prompt_lookup_decode,
    speculative_sample,
    speculative_sample_reference,
    tree_speculative_decode,
)
from inferlab.speculative.alpha import fit_draft_temperature, greedy_agreement, greedy_alpha
from inferlab.speculative.formulas import expected_run_speedup, run_speedup, run_steps
from inferlab.speculative.sampler import (
    check_decode_args,
    check_models_fit,
    check_positions,
    check_sampling_args,
    check_token_ids,
    model_vocab_size,
)
from inferlab.speculative.tree import (
    DynamicTree,
    RowsOnDemand,
    TreeModel,
    TreeNode,
    check_branching,
    draft_dynamic_tree,
    draft_tree,
    path_to,
    tree_cache_room,
)

SAMPLERS = [speculative_sample, speculative_sample_reference]


pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest


def refused(error: type[Exception], message: str):
    """pytest.raises demanding exactly this type and exactly this whole message."""
    return pytest.raises(error, match="^" + re.escape(message) + "$")


class Table:
    """A first-order table model: the next token's logits depend only on the last token."""

    def __init__(self, vocab: int, seed: int, scale: float = 2.0):
        self.table = torch.randn(vocab, vocab, generator=torch.Generator().manual_seed(seed)) * scale
        self.vocab_size = vocab

    def __call__(self, ids: torch.Tensor) -> torch.Tensor:
        return self.table[ids]


def noisy_copy(target: Table, seed: int, noise: float) -> Table:
    draft = Table(target.vocab_size, 0)
    draft.table = target.table + torch.randn(target.table.shape, generator=torch.Generator().manual_seed(seed)) * noise
    return draft


def plain_greedy(model, prompt: list[int], new: int) -> list[int]:
    """The definition of greedy decoding: append the argmax of the last row, ``new`` times."""
    tokens = list(prompt)
    for _ in range(new):
        tokens.append(int(model(torch.tensor([tokens]))[0, -1].argmax()))
    return tokens


class Refuser:
    """A logits function that fails the test if it runs: refusals must come before any work."""

    vocab_size = 5

    def __call__(self, ids):
        raise AssertionError("the model ran before the arguments were checked")


def nan_fn(ids):
    return torch.full((ids.shape[0], ids.shape[1], 5), float("nan"))


def limited_llama(limit: int, seed: int = 0):
    """A tiny Hugging Face Llama that declares ``limit`` positions."""
    from conftest import tiny_llama

    model = tiny_llama(hidden=16, layers=1, heads=2, kv_heads=1, seed=seed)
    model.config.max_position_embeddings = limit
    return model


# ----------------------------------------------------------------------------------------------
# formulas.py


@pytest.mark.parametrize("alpha", [-1e-9, 1 + 1e-9, True, "0.5", None, math.nan])
def test_alpha_outside_zero_one_is_refused_by_value(alpha):
    with refused(ValueError, f"alpha must be a probability in [0, 1], got {alpha!r}"):
        expected_tokens_per_step(alpha, 2)


@pytest.mark.parametrize("gamma", [0, -1, True, 2.0, None])
def test_gamma_below_one_or_not_an_int_is_refused(gamma):
    with refused(ValueError, f"gamma must be an integer >= 1, got {gamma!r}"):
        expected_tokens_per_step(0.5, gamma)
    with refused(ValueError, f"gamma must be an integer >= 1, got {gamma!r}"):
        best_gamma(0.5, 0.1, max_gamma=gamma)


def test_the_ends_of_alpha_and_gamma_are_allowed():
    assert expected_tokens_per_step(0, 1) == 1.0  # nothing accepted: the target's own token only
    assert expected_tokens_per_step(1, 1) == 2.0  # the draft and the bonus token
    assert expected_tokens_per_step(0.5, 1) == pytest.approx(1.5)  # 1 + alpha
    assert best_gamma(0.5, 0.1, max_gamma=1) == 1


@pytest.mark.parametrize("bad", [-1e-12, math.inf, math.nan, True, "1", None])
def test_cost_ratios_are_refused_by_name(bad):
    def message(name):
        return f"{name} must be a finite number >= 0 (a ratio of two costs), got {bad!r}"

    with refused(ValueError, message("c")):
        expected_speedup(0.5, 2, bad)
    with refused(ValueError, message("verify")):
        expected_speedup(0.5, 2, 0.1, verify=bad)
    with refused(ValueError, message("c_hat")):
        arithmetic_cost_increase(0.5, 2, bad)
    with refused(ValueError, message("round_cost")):
        expected_run_speedup(0.5, 2, 10, bad, 1.0)
    with refused(ValueError, message("prompt")):
        expected_run_speedup(0.5, 2, 10, 1.5, bad)
    with refused(ValueError, message("draft_prompt")):
        expected_run_speedup(0.5, 2, 10, 1.5, 1.0, draft_prompt=bad)


def test_zero_costs_are_allowed_where_the_formula_stays_finite():
    # c = 0: the draft is free, so the speed-up is the tokens per step over one verification.
    assert expected_speedup(0.5, 2, 0) == pytest.approx(1.75)
    assert arithmetic_cost_increase(0.5, 2, 0) == pytest.approx(3 / 1.75)
    with refused(ValueError, "verify must be > 0: the target's check of the drafts takes some time"):
        expected_speedup(0.5, 2, 0.1, verify=0)
    with refused(ValueError, "round_cost must be > 0: a round calls the target at least once"):
        expected_run_speedup(0.5, 2, 10, 0, 1.0)


@pytest.mark.parametrize("new_tokens", [0, -1, True, 1.0, None])
def test_run_speedup_refuses_a_token_count_below_one(new_tokens):
    with refused(ValueError, f"new_tokens must be an integer >= 1, got {new_tokens!r}"):
        expected_run_speedup(0.5, 2, new_tokens, 1.5, 1.0)


def test_run_speedup_of_a_single_token_is_the_closed_form():
    # E[tokens per round] = (1 - 0.5^3) / 0.5 = 1.75; one token takes 1 / 1.75 rounds.
    plain, speculative = 2.0 + 1, 2.0 + 0.5 + 1.5 / 1.75
    assert expected_run_speedup(0.5, 2, 1, 1.5, 2.0, draft_prompt=0.5) == pytest.approx(plain / speculative)
    assert expected_run_speedup(1.0, 3, 1, 2.0, 0.0) == pytest.approx(1 / (2.0 / 4))


def test_accepted_fraction_at_the_ends():
    assert expected_accepted_fraction(0, 3) == 0.0
    assert expected_accepted_fraction(1, 3) == 1.0
    assert expected_accepted_fraction(0.5, 1) == pytest.approx(0.5)


# ----------------------------------------------------------------------------------------------
# alpha.py


def test_greedy_agreement_counts_from_a_single_token_on():
    target = Table(7, seed=3)
    rolled = Table(7, seed=3)
    rolled.table = target.table.roll(1, dims=-1)  # every argmax moves to the next id: never agrees
    prompt = torch.tensor([[2]])
    assert greedy_agreement(target, target, prompt, 1) == (1, 1)
    assert greedy_agreement(target, rolled, prompt, 1) == (0, 1)
    assert greedy_agreement(target, target, prompt, 4) == (4, 4)
    assert greedy_alpha(target, rolled, prompt, 1) == 0.0
    for bad in (0, -2):
        with refused(ValueError, f"new_tokens must be >= 1, got {bad}"):
            greedy_agreement(target, target, prompt, bad)


def test_greedy_agreement_on_a_draft_that_misses_some_positions():
    target, draft = Table(6, seed=4), noisy_copy(Table(6, seed=4), seed=9, noise=2.0)
    path = plain_greedy(target, [1], 12)
    agree = sum(int(draft(torch.tensor([path[: i + 1]]))[0, -1].argmax()) == path[i + 1] for i in range(12))
    assert 0 < agree < 12
    assert greedy_agreement(target, draft, torch.tensor([[1]]), 12) == (agree, 12)


@pytest.mark.parametrize("new_tokens", [0, True, 1.0, None])
def test_fit_draft_temperature_refuses_a_token_count_below_one(new_tokens):
    target = Table(5, seed=1)
    with refused(ValueError, f"new_tokens must be an integer >= 1, got {new_tokens!r}"):
        fit_draft_temperature(target, target, [torch.tensor([[0]])], new_tokens)


@pytest.mark.parametrize(
    ("prompt", "shown"),
    [([1, 2], "list"), (torch.tensor([1, 2]), "(2,)"), (torch.tensor([[1], [2]]), "(2, 1)"),
     (torch.zeros((1, 0), dtype=torch.long), "(1, 0)"), (None, "NoneType")],
)  # fmt: skip
def test_fit_draft_temperature_refuses_what_is_not_one_prompt(prompt, shown):
    target = Table(5, seed=1)
    with refused(ValueError, f"prompts must be (1, T) tensors of token ids with T >= 1, got {shown}"):
        fit_draft_temperature(target, target, [torch.tensor([[0]]), prompt], 2)
    with refused(ValueError, "prompts must hold at least one (1, T) tensor of token ids, got none"):
        fit_draft_temperature(target, target, [], 2)


def test_fit_draft_temperature_takes_one_token_of_one_one_token_prompt():
    target = Table(5, seed=1)
    grid = torch.logspace(-2, 1, 61).tolist()
    # A draft equal to the target is always right: the sharpest temperature fits best.
    assert fit_draft_temperature(target, target, [torch.tensor([[0]])], 1) == grid[0]


# ----------------------------------------------------------------------------------------------
# sampler.py: the argument checks, through every decoder that uses them


def decoders(**overrides):
    """Each public decoder, called with a valid argument set that ``overrides`` spoils."""
    base = {"input_ids": torch.tensor([[1, 2]]), "max_new_tokens": 4} | overrides
    return [
        lambda: speculative_sample(Refuser(), Refuser(), gamma=2, **base),
        lambda: speculative_sample_reference(Refuser(), Refuser(), gamma=2, **base),
        lambda: prompt_lookup_decode(Refuser(), **base),
        lambda: tree_speculative_decode(Refuser(), Refuser(), **base),
    ]


@pytest.mark.parametrize(
    ("input_ids", "message"),
    [
        ([[1, 2]], "input_ids must be a LongTensor of shape (1, length), got list"),
        (None, "input_ids must be a LongTensor of shape (1, length), got NoneType"),
        (torch.tensor([[1.0, 2.0]]), "input_ids must be a LongTensor of shape (1, length), got Tensor of dtype torch.float32"),
        (torch.tensor([[1, 2]], dtype=torch.int32), "input_ids must be a LongTensor of shape (1, length), got Tensor of dtype torch.int32"),
    ],
)  # fmt: skip
def test_a_prompt_that_is_not_a_long_tensor_is_a_type_error(input_ids, message):
    for call in decoders(input_ids=input_ids):
        with refused(TypeError, message):
            call()
    with refused(TypeError, message):
        check_decode_args(input_ids, 4)


@pytest.mark.parametrize(
    ("input_ids", "message"),
    [
        (torch.tensor([1, 2]), "input_ids must have shape (1, length >= 1), got (2,)"),
        (torch.zeros((1, 0), dtype=torch.long), "input_ids must have shape (1, length >= 1), got (1, 0)"),
        (torch.zeros((1, 1, 1), dtype=torch.long), "input_ids must have shape (1, length >= 1), got (1, 1, 1)"),
        (torch.tensor([[1], [2]]), "input_ids batch size must be 1, got 2: each sequence accepts a different "
         "number of drafts per round, so run sequences one at a time"),
    ],
)  # fmt: skip
def test_a_prompt_of_the_wrong_shape_is_refused(input_ids, message):
    for call in decoders(input_ids=input_ids):
        with refused(ValueError, message):
            call()


@pytest.mark.parametrize("max_new_tokens", [-1, True, False, 2.0, None, "3"])
def test_a_token_budget_below_zero_or_not_an_int_is_refused(max_new_tokens):
    for call in decoders(max_new_tokens=max_new_tokens):
        with refused(ValueError, f"max_new_tokens must be an integer >= 0, got {max_new_tokens!r}"):
            call()


def test_a_budget_of_zero_returns_the_prompt_without_calling_the_target():
    target, draft, prompt = Table(5, seed=0), Table(5, seed=1), torch.tensor([[1, 2]])
    for result in (
        speculative_sample(target, draft, prompt, 0, 2, temperature=0),
        speculative_sample_reference(target, draft, prompt, 0, 2),
        prompt_lookup_decode(target, prompt, 0),
        tree_speculative_decode(target, draft, prompt, 0),
    ):
        assert result.sequences.tolist() == [[1, 2]] and result.prompt_length == 2
        assert (result.rounds, result.target_calls, result.accepted, result.drafted) == (0, 0, 0, 0)


@pytest.mark.parametrize("gamma", [0, True, 2.0, None])
@pytest.mark.parametrize("sampler", SAMPLERS)
def test_gamma_is_refused_by_name(sampler, gamma):
    with refused(ValueError, f"gamma must be an integer >= 1, got {gamma!r}"):
        sampler(Refuser(), Refuser(), torch.tensor([[1]]), 4, gamma)


@pytest.mark.parametrize("name", ["max_ngram", "num_draft"])
@pytest.mark.parametrize("value", [0, True, 1.5])
def test_prompt_lookup_names_its_bad_count(name, value):
    with refused(ValueError, f"{name} must be an integer >= 1, got {value!r}"):
        prompt_lookup_decode(Refuser(), torch.tensor([[1]]), 4, **{name: value})


SAMPLING_REFUSALS = [
    ({"temperature": True}, TypeError, "temperature must be a number >= 0 (0 means greedy), got True"),
    ({"temperature": "1"}, TypeError, "temperature must be a number >= 0 (0 means greedy), got '1'"),
    ({"temperature": None}, TypeError, "temperature must be a number >= 0 (0 means greedy), got None"),
    ({"temperature": -0.5}, ValueError, "temperature must be >= 0 (0 means greedy), got -0.5"),
    ({"temperature": math.nan}, ValueError, "temperature must be >= 0 (0 means greedy), got nan"),
    ({"top_k": 0}, ValueError, "top_k must be an integer >= 1 or None, got 0"),
    ({"top_k": True}, ValueError, "top_k must be an integer >= 1 or None, got True"),
    ({"top_k": 2.0}, ValueError, "top_k must be an integer >= 1 or None, got 2.0"),
    ({"top_p": 0}, ValueError, "top_p must be a number in (0, 1] or None, got 0"),
    ({"top_p": 1.0000001}, ValueError, "top_p must be a number in (0, 1] or None, got 1.0000001"),
    ({"top_p": True}, ValueError, "top_p must be a number in (0, 1] or None, got True"),
    ({"top_p": "0.5"}, ValueError, "top_p must be a number in (0, 1] or None, got '0.5'"),
    ({"top_p": math.nan}, ValueError, "top_p must be a number in (0, 1] or None, got nan"),
    ({"generator": "seed"}, TypeError, "generator must be None or a CPU torch.Generator, got 'seed'"),
    ({"generator": 0}, TypeError, "generator must be None or a CPU torch.Generator, got 0"),
]


@pytest.mark.parametrize(("kwargs", "error", "message"), SAMPLING_REFUSALS)
@pytest.mark.parametrize("sampler", SAMPLERS)
def test_sampling_settings_are_refused_with_their_whole_message(sampler, kwargs, error, message):
    with refused(error, message):
        sampler(Refuser(), Refuser(), torch.tensor([[1]]), 4, 2, **kwargs)
    settings = {"temperature": 1.0, "top_k": None, "top_p": None, "generator": None} | kwargs
    with refused(error, message):
        check_sampling_args(**settings)


@pytest.mark.parametrize(
    "kwargs",
    [{"temperature": 0}, {"temperature": 1}, {"top_k": 1}, {"top_p": 1}, {"top_p": 1e-9}, {"top_k": 5, "top_p": 0.5}],
)
def test_the_smallest_and_largest_allowed_settings_pass(kwargs):
    settings = {"temperature": 1.0, "top_k": None, "top_p": None, "generator": torch.Generator()} | kwargs
    check_sampling_args(**settings)  # no error
    target, draft = Table(5, seed=0), Table(5, seed=1)
    result = speculative_sample(target, draft, torch.tensor([[1]]), 3, 2, **settings)
    assert result.sequences.shape == (1, 4)


# ----------------------------------------------------------------------------------------------
# sampler.py: vocabulary, token ids, positions


class WithEmbeddings:
    """A logits function that also has ``get_output_embeddings`` (but no config): not a HF model."""

    def get_output_embeddings(self):
        return torch.nn.Linear(4, 11)

    def __call__(self, ids):
        return torch.zeros(ids.shape[0], ids.shape[1], 7)


class WithConfig:
    """A logits function that also has a ``config`` (but no output embedding): not a HF model."""

    config = object()

    def __call__(self, ids):
        return torch.zeros(ids.shape[0], ids.shape[1], 7)


class ZeroOnly:
    """A logits function with 6 logits that fails on any token id but 0 (no ``vocab_size``)."""

    def __call__(self, ids):
        if bool((ids != 0).any()):
            raise AssertionError("asked about a prompt token to learn the vocabulary size")
        return torch.zeros(ids.shape[0], ids.shape[1], 6)


def test_model_vocab_size_counts_the_logits_a_model_produces():
    from conftest import tiny_llama

    prompt = torch.tensor([[1, 2]])
    assert model_vocab_size(WithEmbeddings(), prompt) == 7
    assert model_vocab_size(WithConfig(), prompt) == 7
    assert model_vocab_size(ZeroOnly(), torch.tensor([[3, 5]])) == 6
    assert model_vocab_size(Table(9, seed=0), prompt) == 9
    # A Hugging Face model with an output layer wider than its config's vocab_size (padded vocabularies):
    # its logits have as many entries as the output layer has rows.
    model = tiny_llama(hidden=16, layers=1, heads=2, kv_heads=1, seed=0)
    model.lm_head = torch.nn.Linear(16, 100, bias=False)
    assert model(prompt).logits.shape[-1] == 100
    assert model_vocab_size(model, prompt) == 100


def test_the_vocabulary_comes_from_token_zero_not_from_the_bad_prompt():
    with refused(ValueError, "input_ids must be token ids in 0..5 (the model's vocabulary), got 6"):
        check_models_fit(ZeroOnly(), None, torch.tensor([[6]]), 2)
    with refused(ValueError, "input_ids must be token ids in 0..5 (the model's vocabulary), got 9"):
        check_models_fit(ZeroOnly(), ZeroOnly(), torch.tensor([[9, 3]]), 2)


@pytest.mark.parametrize(
    ("ids", "bad"), [([[-3, 2]], -3), ([[2, -1, 4]], -1), ([[2, 5]], 5), ([[5, 0, 4]], 5), ([[7, 1]], 7)]
)
def test_the_reported_id_is_the_offending_one(ids, bad):
    message = f"input_ids must be token ids in 0..4 (the model's vocabulary), got {bad}"
    with refused(ValueError, message):
        check_token_ids(torch.tensor(ids), 5)
    for call in decoders(input_ids=torch.tensor(ids)):
        with refused(ValueError, message):
            call()


def test_the_first_and_last_ids_of_the_vocabulary_are_allowed():
    check_token_ids(torch.tensor([[0, 4]]), 5)
    target = Table(5, seed=0)
    assert speculative_sample(target, target, torch.tensor([[0, 4]]), 1, 1, temperature=0).sequences.shape == (1, 3)


@pytest.mark.parametrize(("target_vocab", "draft_vocab"), [(5, 6), (6, 5)])
def test_a_vocabulary_mismatch_names_both_sizes_whichever_is_larger(target_vocab, draft_vocab):
    target, draft, prompt = Table(target_vocab, 0), Table(draft_vocab, 1), torch.tensor([[1]])
    message = (
        f"target and draft vocabularies differ: target has {target_vocab} logits, draft has {draft_vocab}; "
        "the draft must propose tokens of the target's vocabulary"
    )
    for sampler in SAMPLERS:
        with refused(ValueError, message):
            sampler(target, draft, prompt, 3, 2)
    with refused(ValueError, message):
        tree_speculative_decode(target, draft, prompt, 3)


def positions_message(prompt, new, extra, needed, who, limit, at_most):
    slots = f" + {extra} tree slots" if extra else ""
    return (
        f"prompt length {prompt} + max_new_tokens {new}{slots} = {needed} exceeds the {who}'s {limit} positions; "
        f"shorten the prompt or lower max_new_tokens to at most {at_most}"
    )


@pytest.fixture(scope="module")
def short_and_long():
    """A 97-token llama that can read 10 positions, and one that can read 256."""
    from conftest import tiny_llama

    return limited_llama(10, seed=2), tiny_llama(hidden=16, layers=1, heads=2, kv_heads=1, seed=1)


def test_the_positions_check_names_the_model_that_is_too_short(short_and_long):
    short, long = short_and_long
    prompt = torch.tensor([[1, 2, 3]])
    for sampler in SAMPLERS:  # 3 + 7 = 10 fits exactly; 3 + 8 does not
        assert sampler(long, short, prompt, 7, 3, temperature=0).sequences.shape == (1, 10)
        assert sampler(short, long, prompt, 7, 3, temperature=0).sequences.shape == (1, 10)
        with refused(ValueError, positions_message(3, 8, 0, 11, "draft", 10, 7)):
            sampler(long, short, prompt, 8, 3, temperature=0)
        with refused(ValueError, positions_message(3, 8, 0, 11, "target", 10, 7)):
            sampler(short, long, prompt, 8, 3, temperature=0)
    assert prompt_lookup_decode(short, prompt, 7).sequences.shape == (1, 10)
    with refused(ValueError, positions_message(3, 8, 0, 11, "target", 10, 7)):
        prompt_lookup_decode(short, prompt, 8)
    with refused(ValueError, positions_message(3, 8, 0, 11, "target", 10, 7)):
        check_positions({"target": short, "draft": long}, prompt, 8)
    with refused(ValueError, positions_message(3, 8, 0, 11, "draft", 10, 7)):
        check_models_fit(long, short, prompt, 8)
    check_models_fit(long, short, prompt, 7)  # fits exactly


def test_tree_decoding_needs_room_for_one_whole_tree(short_and_long):
    short, long = short_and_long
    prompt = torch.tensor([[1, 2]])
    # Branching (2, 1): a tree holds 2 + 2 = 4 nodes. 2 + 4 + 4 = 10 fits exactly; 2 + 5 + 4 does not,
    # although the prompt and the tokens alone (7) would fit.
    for target, draft, who in ((short, long, "target"), (long, short, "draft")):
        result = tree_speculative_decode(target, draft, prompt, 4, branching=(2, 1))
        assert result.sequences.shape == (1, 6)
        with refused(ValueError, positions_message(2, 5, 4, 11, who, 10, 4)):
            tree_speculative_decode(target, draft, prompt, 5, branching=(2, 1))
    # A dynamic tree's target holds the nodes kept (4 here), its draft the nodes it grew (2: the root
    # needs no node), whichever is more.
    tree_speculative_decode(short, long, prompt, 4, branching=DynamicTree(4, 2, 2))
    with refused(ValueError, positions_message(2, 5, 4, 11, "target", 10, 4)):
        tree_speculative_decode(short, long, prompt, 5, branching=DynamicTree(4, 2, 2))
    # Grown 3 deep, 2 paths a depth: 2 + 2 = 4 nodes in the draft's cache, more than the 2 kept.
    assert tree_cache_room(DynamicTree(2, 3, 2)) == 4
    tree_speculative_decode(short, long, prompt, 4, branching=DynamicTree(2, 3, 2))
    with refused(ValueError, positions_message(2, 5, 4, 11, "target", 10, 4)):
        tree_speculative_decode(short, long, prompt, 5, branching=DynamicTree(2, 3, 2))
    with refused(ValueError, positions_message(2, 5, 4, 11, "target", 10, 4)):
        check_positions({"target": short}, prompt, 5, extra=4)
    check_positions({"target": short}, prompt, 4, extra=4)


# ----------------------------------------------------------------------------------------------
# tree.py: its own checks, and the model it names


@pytest.mark.parametrize("branching", [(), [], (2, 0), (True,), (2.0,), "ab", 3, None, (1, -1)])
def test_a_bad_branching_is_refused_with_its_whole_message(branching):
    message = (
        "branching must be a DynamicTree or a non-empty sequence of integers >= 1 "
        f"(children per node at each depth), got {branching!r}"
    )
    with refused(ValueError, message):
        check_branching(branching)
    with refused(ValueError, message):
        tree_speculative_decode(Refuser(), Refuser(), torch.tensor([[1]]), 3, branching=branching)


@pytest.mark.parametrize("name", ["nodes", "depth", "width", "children"])
@pytest.mark.parametrize("value", [0, -1, True, 1.0, None])
def test_dynamic_tree_names_its_bad_count(name, value):
    if name == "children" and value is None:
        assert DynamicTree(1, 1, 2, children=None).top_k == 2  # None: as many as width, like EAGLE-2
        return
    arguments = {"nodes": 1, "depth": 1, "width": 1} | {name: value}
    with refused(ValueError, f"DynamicTree {name} must be an integer >= 1, got {value!r}"):
        DynamicTree(**arguments)


def test_dynamic_tree_budget_boundaries():
    assert DynamicTree(1, 1, 1).nodes == 1
    # Width 3: the root's 3 children, then 3 under each of the 3 paths grown: 12 drafted, all may be kept.
    assert DynamicTree(12, 2, 3).nodes == 12
    with refused(
        ValueError, "DynamicTree nodes must be at most the 12 tokens drafted (depth 2, width 3, children 3), got 13"
    ):
        DynamicTree(13, 2, 3)
    # One path grown, 2 guesses under each of its 3 tokens and under the root: 2 + 2 + 2 = 6.
    assert DynamicTree(6, 3, 1, children=2).drafted == 6
    with refused(
        ValueError, "DynamicTree nodes must be at most the 6 tokens drafted (depth 3, width 1, children 2), got 7"
    ):
        DynamicTree(7, 3, 1, children=2)
    # Width 2 of 3 children: 3 at depth 1, then 2 paths grown, 6 children each depth after.
    assert DynamicTree(1, 3, 2, children=3).drafted == 3 + 6 + 6
    assert DynamicTree(1, 4, 1).drafted == 4  # a chain: one token a depth
    for bad in (True, "1", None):
        with refused(ValueError, f"DynamicTree temperature must be a number > 0, got {bad!r}"):
            DynamicTree(1, 1, 1, temperature=bad)
    for bad in (0, 0.0, -1.0, math.inf, math.nan):
        with refused(ValueError, f"DynamicTree temperature must be a finite number > 0, got {bad!r}"):
            DynamicTree(1, 1, 1, temperature=bad)
    assert DynamicTree(1, 1, 1, temperature=1e-6).temperature == 1e-6


def nan_message(who):
    return f"the {who} returned NaN or +inf logits; no distribution has them (check its weights/inputs)"


def test_tree_models_name_themselves_in_errors():
    ids = torch.tensor([[1, 2]])
    with refused(ValueError, nan_message("model")):
        TreeModel(nan_fn).tree_logits(ids, [], [])
    for who in ("target", "draft"):
        with refused(ValueError, nan_message(who)):
            TreeModel(nan_fn, who).tree_logits(ids, [], [])
    healthy = Table(5, seed=0)
    with refused(ValueError, nan_message("draft")):
        tree_speculative_decode(healthy, nan_fn, ids, 4)
    with refused(ValueError, nan_message("target")):
        tree_speculative_decode(nan_fn, healthy, ids, 4)


# ----------------------------------------------------------------------------------------------
# What a run records, against walks worked out here


def walk_greedy_rounds(target, draft_proposal, prompt, new, drafts_for):
    """Greedy verification by hand: each round's drafts are kept while they equal the target's greedy
    tokens; then the target's own token. Returns (accepted per round, drafted per round, acceptance probs)."""
    greedy = plain_greedy(target, prompt, new)
    produced, per_round, drafted, probs = 0, [], [], []
    while produced < new:
        start = len(prompt) + produced
        proposal = draft_proposal(greedy[:start], drafts_for(new - produced - 1))
        agree = next((i for i, t in enumerate(proposal) if t != greedy[start + i]), len(proposal))
        per_round.append(agree)
        drafted.append(len(proposal))
        probs += [1.0] * agree + [0.0] * (agree < len(proposal))
        produced += agree + 1
    return greedy, per_round, drafted, probs


@pytest.mark.parametrize("gamma", [1, 3])
def test_greedy_speculative_sample_records_each_round(gamma):
    target = Table(6, seed=5)

    def draft(ids):  # the target's logits, but at every fifth position the argmax moves to the next id
        logits = target(ids).clone()
        wrong = torch.arange(ids.shape[1]) % 5 == 3
        logits[:, wrong] = logits[:, wrong].roll(1, dims=-1)
        return logits

    prompt, new = [1, 2], 30

    def propose(context, count):
        return plain_greedy(draft, context, count)[len(context) :]

    greedy, per_round, drafted, probs = walk_greedy_rounds(
        target, propose, prompt, new, lambda still: min(gamma, still)
    )
    assert 0.0 in probs and 1.0 in probs  # the walk meets rejections and acceptances
    for sampler in SAMPLERS:
        result = sampler(target, draft, torch.tensor([prompt]), new, gamma, temperature=0)
        assert result.sequences.tolist() == [greedy]
        assert result.new_tokens.tolist() == [greedy[len(prompt) :]]
        assert result.accepted_per_round == per_round
        assert result.acceptance_probs == probs
        assert result.accepted == sum(per_round) == new - len(per_round)
        assert result.drafted == sum(drafted) == result.draft_calls
        assert result.rounds == result.target_calls == len(per_round)
        assert result.alpha_per_token == pytest.approx(sum(probs) / len(probs))


def latest_lookup(tokens, max_ngram, count):
    """The docstring's rule, written out: the longest n-gram (n <= max_ngram) ending the sequence that
    also occurs earlier; from its latest earlier occurrence, the ``count`` tokens that followed it."""
    for n in range(min(max_ngram, len(tokens) - 1), 0, -1):
        starts = [s for s in range(len(tokens) - n) if tokens[s : s + n] == tokens[len(tokens) - n :]]
        if starts:
            return tokens[starts[-1] + n : starts[-1] + n + count]
    return []


class SecondOrder:
    """A table model whose next token depends on the last two: a one-token match can mislead the lookup."""

    def __init__(self, vocab: int, seed: int):
        self.table = torch.randn(vocab, vocab, vocab, generator=torch.Generator().manual_seed(seed)) * 3.0
        self.vocab_size = vocab

    def __call__(self, ids):
        return self.table[torch.cat([ids[:, :1], ids[:, :-1]], 1), ids]


def test_prompt_lookup_records_each_round():
    target = SecondOrder(8, seed=11)
    prompt, new, max_ngram, num_draft = [3, 1, 4, 1, 5, 2, 6], 30, 2, 4
    greedy, per_round, drafted, probs = walk_greedy_rounds(
        target,
        lambda context, count: latest_lookup(context, max_ngram, count) if count else [],
        prompt,
        new,
        lambda still: min(num_draft, still),
    )
    assert 0.0 in probs and 1.0 in probs
    result = prompt_lookup_decode(target, torch.tensor([prompt]), new, max_ngram=max_ngram, num_draft=num_draft)
    assert result.sequences.tolist() == [greedy]
    assert result.accepted_per_round == per_round
    assert result.acceptance_probs == probs
    assert result.accepted == sum(per_round) == new - len(per_round)
    assert result.drafted == sum(drafted)
    assert result.rounds == result.target_calls == len(per_round)
    assert result.draft_calls == 0


def test_a_chain_tree_with_a_perfect_draft_keeps_every_node():
    target = Table(6, seed=2)
    prompt, new = [1], 7
    result = tree_speculative_decode(target, target, torch.tensor([prompt]), new, branching=(1, 1, 1))
    # Round 1: 6 tokens still to come after the target's own, so a 3-deep chain, all kept, + 1 = 4 tokens.
    # Round 2: 7 - 4 - 1 = 2 tokens of budget: a 2-deep chain, all kept, + 1 = 3 tokens.
    assert result.sequences.tolist() == [plain_greedy(target, prompt, new)]
    assert result.accepted_per_round == [3, 2]
    assert (result.accepted, result.drafted, result.rounds) == (5, 5, 2)
    assert result.target_calls == 2  # one tree per target call
    assert result.draft_calls == 3 + 2  # one draft call per depth


@pytest.mark.parametrize("branching", [(2, 2, 1), DynamicTree(4, 3, 2), (1,)])
def test_tree_decoding_counts_match_greedy_verification(tiny_pair, branching):
    target, draft = tiny_pair
    prompt, new = torch.tensor([[5, 17, 3]]), 12
    result = tree_speculative_decode(target, draft, prompt, new, branching=branching)
    expected = target.generate(prompt, max_new_tokens=new, do_sample=False, attention_mask=torch.ones_like(prompt))
    assert result.sequences.tolist() == expected.tolist()
    # Each round adds the accepted drafts and one token of the target's own.
    assert sum(result.accepted_per_round) == result.accepted == new - result.rounds
    assert result.rounds == result.target_calls == len(result.accepted_per_round)


# ----------------------------------------------------------------------------------------------
# The trees drafted, against brute force over every path


def all_paths(draft: Table, context: list[int], depth: int, temperature: float) -> dict[tuple, float]:
    """Every path of 1..depth tokens after ``context`` with its log-probability under logits / temperature."""
    out, level = {}, {(): 0.0}
    for _ in range(depth):
        nxt = {}
        for path, lp in level.items():
            row = (draft(torch.tensor([context + list(path)]))[0, -1].double() / temperature).log_softmax(-1)
            for token in range(draft.vocab_size):
                nxt[path + (token,)] = lp + float(row[token])
        out |= nxt
        level = nxt
    return out


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("nodes", "width", "temperature"), [(3, 3, 1.0), (2, 2, 0.5), (4, 4, 2.0)])
def test_dynamic_tree_keeps_the_likeliest_paths(seed, nodes, width, temperature):
    # With nodes <= width no likely path can fall out of the beam, so the tree is the global top-nodes.
    draft = Table(5, seed=seed, scale=1.0)
    context = [seed % 5]
    paths = all_paths(draft, context, 3, temperature)
    best = sorted(paths, key=lambda p: -paths[p])[:nodes]
    tree = draft_dynamic_tree(
        TreeModel(draft, "draft"), torch.tensor([context]), DynamicTree(nodes, 3, width, temperature)
    )
    assert sorted(tuple(path_to(tree, i)) for i in range(len(tree))) == sorted(best)
    for i, node in enumerate(tree):
        assert node.depth == len(path_to(tree, i))
        assert node.parent < i


def eagle2_candidates(draft: Table, context: list[int], shape: DynamicTree) -> dict[tuple, float]:
    """EAGLE-2's candidate pool, written over paths: at each depth, top_k children of every grown path
    are candidates, and the width likeliest of that depth's candidates are grown further."""
    pool, grown = {}, [()]
    for _ in range(shape.depth):
        level = {}
        for path in grown:
            base = pool.get(path, 0.0)
            row = (draft(torch.tensor([context + list(path)]))[0, -1].double() / shape.temperature).log_softmax(-1)
            for token in sorted(range(draft.vocab_size), key=lambda t: -float(row[t]))[: shape.top_k]:
                level[path + (token,)] = base + float(row[token])
        pool |= level
        grown = sorted(level, key=lambda p: -level[p])[: shape.width]
    return pool


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(
    "shape",
    [
        DynamicTree(6, 3, 1, temperature=1.0, children=2),  # every drafted token: the chain and its second guesses
        DynamicTree(4, 3, 1, temperature=0.5, children=2),
        DynamicTree(5, 3, 2, temperature=1.0),
        DynamicTree(7, 3, 2, temperature=2.0, children=3),
    ],
)
def test_dynamic_tree_keeps_the_likeliest_of_every_drafted_candidate(seed, shape):
    # Children left ungrown are candidates too (EAGLE-2's rerank takes them all): the tree is the
    # top `nodes` of the whole pool, and no two candidates share a path probability here.
    draft = Table(6, seed=seed, scale=1.5)
    context = [seed % 6]
    pool = eagle2_candidates(draft, context, shape)
    assert len(pool) == shape.drafted
    best = sorted(pool, key=lambda p: -pool[p])[: shape.nodes]
    tree = draft_dynamic_tree(TreeModel(draft, "draft"), torch.tensor([context]), shape)
    assert sorted(tuple(path_to(tree, i)) for i in range(len(tree))) == sorted(best)


def test_greedy_path_names_the_target_when_it_returns_nan():
    from inferlab.speculative.alpha import greedy_path

    def nan_fn(ids):
        return torch.full((1, ids.shape[1], 5), math.nan)

    message = "the target returned NaN or +inf logits; no distribution has them (check its weights/inputs)"
    with refused(ValueError, message):
        greedy_path(nan_fn, torch.tensor([[1, 2]]), 3)


def test_run_steps_charges_no_draft_prompt_unless_given():
    # 10 tokens after a prompt of 4 steps: plain 4 + 10; speculative 4 + 3 rounds of 2.5 steps.
    assert run_steps(10, 3, 2.5, 4) == (14, 11.5)
    assert run_steps(10, 3, 2.5, 4, draft_prompt=0.5) == (14, 12.0)
    assert run_speedup(10, 3, 2.5, 4) == pytest.approx(14 / 11.5)  # the same default, as a ratio
    assert run_speedup(10, 3, 2.5, 4, draft_prompt=0.5) == pytest.approx(14 / 12.0)


def test_a_dynamic_tree_near_the_end_is_drafted_shallower_with_what_that_depth_drafts():
    # Second guesses 11 deep 8 with 3 tokens to go: 3 depths of 1 grown path x 2 children = 6 drafted.
    assert DynamicTree(11, 8, 1, 0.5, children=2).shallower(3) == DynamicTree(6, 3, 1, 0.5, children=2)
    assert DynamicTree(4, 8, 2).shallower(3) == DynamicTree(4, 3, 2)  # 2 + 4 + 4 drafted: all 4 fit
    assert DynamicTree(4, 2, 2).shallower(9) == DynamicTree(4, 2, 2)  # never deeper than asked


def test_second_guesses_cost_the_draft_no_more_calls_than_the_chain(tiny_pair):
    from inferlab.kvcache import LlamaDecoder

    draft = LlamaDecoder.from_pretrained(tiny_pair[1])
    chain_model, tree_model = TreeModel(draft, "draft"), TreeModel(draft, "draft")
    chain = draft_tree(chain_model, torch.tensor([[2, 7]]), (1, 1, 1, 1))
    tree = draft_dynamic_tree(tree_model, torch.tensor([[2, 7]]), DynamicTree(8, 4, 1, children=2))
    assert chain_model.calls == tree_model.calls == 4  # one call a depth, one token read in each
    assert chain_model.nodes_cached == tree_model.nodes_cached == 3  # the chain's nodes but the last
    assert {tuple(path_to(chain, i)) for i in range(4)} <= {tuple(path_to(tree, i)) for i in range(8)}


@pytest.mark.parametrize("seed", range(3))
def test_rows_on_demand_equal_the_projected_rows_and_project_only_the_walked_chains(tiny_pair, seed):
    from inferlab.kvcache import LlamaDecoder

    target = LlamaDecoder.from_pretrained(tiny_pair[0])
    generator = torch.Generator().manual_seed(seed)
    nodes = []
    for i in range(7):  # a random tree, parents first
        parent = -1 if i == 0 else int(torch.randint(-1, i, (1,), generator=generator))
        nodes.append(
            TreeNode(
                int(torch.randint(0, 97, (1,), generator=generator)),
                parent,
                1 if parent < 0 else nodes[parent].depth + 1,
            )
        )
    prefix = torch.tensor([[4, 8, 15, 16]])
    full = TreeModel(target, "target").tree_logits(prefix, nodes, list(range(len(nodes))))
    model = TreeModel(target, "target")
    rows = RowsOnDemand(model, model.tree_logits(prefix, nodes, list(range(len(nodes))), project=False), nodes)
    projected = []
    original = model.project
    model.project = lambda hidden: projected.append(len(hidden)) or original(hidden)
    first_child_chain = [-1]
    while any(n.parent == first_child_chain[-1] for n in nodes):
        first_child_chain.append(next(i for i, n in enumerate(nodes) if n.parent == first_child_chain[-1]))
    torch.testing.assert_close(rows.root, full[0])
    assert projected == [len(first_child_chain)]  # the root with its first-child chain, in one product
    for i in range(len(nodes)):  # parents first, as a walk asks
        torch.testing.assert_close(rows[i], full[1 + i])
    assert sum(projected) == 1 + len(nodes)  # every row projected once, never twice
    later_children = [i for i, n in enumerate(nodes) if any(m.parent == n.parent for m in nodes[:i])]
    assert len(projected) == 1 + len(later_children)  # one product per chain: the root's, then each later child's


@pytest.mark.parametrize("depth", [1, 3, 5])
@pytest.mark.parametrize("perfect_draft", [False, True])
def test_the_draft_keeps_its_accepted_chain_and_reads_each_kept_token_once(tiny_pair, depth, perfect_draft):
    from inferlab.kvcache import LlamaDecoder

    # The random tiny draft rarely gets more than one token accepted; a copy of the target as the
    # draft gets every one accepted, so whole branches have to be kept.
    target = LlamaDecoder.from_pretrained(tiny_pair[0])
    draft = LlamaDecoder.from_pretrained(tiny_pair[0] if perfect_draft else tiny_pair[1])
    prompt, new = torch.tensor([[5, 17, 3, 42, 8]]), 30
    result = tree_speculative_decode(target, draft, prompt, new, (1,) * depth)
    if perfect_draft:
        assert max(result.accepted_per_round) == depth
    # Round r drafts min(depth, budget) nodes and reads all but the last of them; its next call reads
    # the kept tokens it did not read: a accepted + 1 of the target's, less the min(a, read) it had.
    read, generated, expected = prompt.shape[1], 0, 0
    for accepted in result.accepted_per_round:
        budget = new - generated - 1
        drafted = min(depth, budget)
        nodes_read = max(drafted - 1, 0)
        if budget:
            expected += read + nodes_read
        read = accepted + 1 - min(accepted, nodes_read) if budget else read + accepted + 1
        generated += accepted + 1
    assert draft.keys_computed == draft.num_layers * expected
    # The target reads the prompt, every node, and then one token of its own per round.
    assert target.keys_computed == target.num_layers * (prompt.shape[1] + result.drafted + result.rounds - 1)
    assert result.sequences.tolist() == [plain_greedy(target, prompt[0].tolist(), new)]
    assert result.accepted > 0


def test_keep_tokens_keeps_as_much_of_the_branch_as_the_model_read(tiny_pair):
    from inferlab.kvcache import LlamaDecoder

    decoder = LlamaDecoder.from_pretrained(tiny_pair[0])  # 2 layers: a key past the first depends on its branch
    prefix = torch.tensor([[3, 1, 4]])
    # Both branches drafted a 20: the branch kept is found by its parent as well as its token.
    nodes = [TreeNode(10, -1, 1), TreeNode(11, -1, 1), TreeNode(20, 0, 2), TreeNode(20, 1, 2), TreeNode(30, 3, 3)]
    model = TreeModel(decoder, "draft")
    model.tree_logits(prefix, nodes, [])
    model.tree_logits(prefix, nodes, [0, 1, 2, 3])  # node 4 is drafted but never read
    model.keep_tokens(3, [11, 20, 30])
    assert (model.seen, model.cache.length, model.nodes_cached) == (5, 5, 0)  # 11 and its 20 kept, 30 unread
    after = model.new_logits(torch.tensor([[3, 1, 4, 11, 20, 30]]))  # reads only 30
    with torch.no_grad():
        torch.testing.assert_close(
            after[-1], decoder(torch.tensor([[3, 1, 4, 11, 20, 30]]))[0, -1], atol=1e-5, rtol=1e-5
        )
    assert after.shape[0] == 1
    model.tree_logits(torch.tensor([[3, 1, 4, 11, 20, 30]]), [TreeNode(7, -1, 1)], [])
    model.keep_tokens(6, [99])  # no cached branch starts with 99: back to the prefix
    assert (model.seen, model.cache.length) == (6, 6)


@pytest.mark.parametrize("branching", [(2,), (3, 2), (2, 1, 2)])
def test_fixed_tree_gives_every_node_its_likeliest_children(branching):
    draft = Table(5, seed=3, scale=1.0)
    context = [2]
    expected, level = set(), [()]
    for width in branching:
        nxt = []
        for path in level:
            row = draft(torch.tensor([context + list(path)]))[0, -1]
            nxt += [path + (t,) for t in sorted(range(5), key=lambda t: -float(row[t]))[:width]]
        expected |= set(nxt)
        level = nxt
    tree = draft_tree(TreeModel(draft, "draft"), torch.tensor([context]), branching)
    paths = [tuple(path_to(tree, i)) for i in range(len(tree))]
    assert len(paths) == len(set(paths)) and set(paths) == expected


# ----------------------------------------------------------------------------------------------
# sampler.py: the distributions and drafts the pieces take


@pytest.mark.parametrize(
    ("probs", "message"),
    [
        ([0.5, 0.5], "probs must be a non-empty 1-D tensor of probabilities, got [0.5, 0.5]"),
        (torch.tensor([[0.5, 0.5]]), "probs must be a non-empty 1-D tensor of probabilities, got torch.Size([1, 2])"),
        (torch.tensor([]), "probs must be a non-empty 1-D tensor of probabilities, got torch.Size([0])"),
        (torch.tensor([0.5, math.nan]), "probs must be finite, got NaN or inf (did the model or the temperature overflow?)"),
        (torch.tensor([0.5, math.inf]), "probs must be finite, got NaN or inf (did the model or the temperature overflow?)"),
        (torch.tensor([-0.5, 1.0]), "probs must be non-negative with a positive sum, got min -0.5, sum 0.5"),
        (torch.tensor([0.0, 0.0]), "probs must be non-negative with a positive sum, got min 0.0, sum 0.0"),
    ],
)  # fmt: skip
def test_sample_token_refuses_what_is_not_a_distribution_with_its_whole_message(probs, message):
    from inferlab.speculative import sample_token

    with refused(ValueError, message):
        sample_token(probs)


def test_sample_token_takes_a_single_weight_and_unnormalised_weights():
    from inferlab.speculative import sample_token

    assert sample_token(torch.tensor([3.0])) == 0
    assert sample_token(torch.tensor([0.0, 2.0, 0.0])) == 1  # all the weight on one id


@pytest.mark.parametrize(
    ("drafts", "error", "message"),
    [
        ("01", TypeError, "drafts must be a list of token ids, got str"),
        ([True], ValueError, "drafts must be token ids in 0..2, got True"),
        ([1.0], ValueError, "drafts must be token ids in 0..2, got 1.0"),
        ([3], ValueError, "drafts must be token ids in 0..2, got 3"),
        ([-1], ValueError, "drafts must be token ids in 0..2, got -1"),
        ([0, 1, 2], ValueError, "p_rows must hold at least 4 rows for 3 drafts, got 3"),
    ],
)
def test_verify_drafts_refuses_bad_drafts_with_the_whole_message(drafts, error, message):
    from inferlab.speculative import verify_drafts

    rows = torch.full((3, 3), 1 / 3)
    with refused(error, message):
        verify_drafts(rows, rows, drafts)


def test_verify_drafts_names_the_short_q_rows():
    from inferlab.speculative import verify_drafts

    with refused(ValueError, "q_rows must hold at least 2 rows for 2 drafts, got 1"):
        verify_drafts(torch.full((3, 3), 1 / 3), torch.full((1, 3), 1 / 3), [0, 2])
    kept, accepted, _ = verify_drafts(torch.eye(3)[[0, 2, 1]], torch.eye(3)[[0, 2]], [0, 2])
    assert (kept, accepted) == ([0, 2, 1], 2)  # p = q one-hot: both kept, the bonus is p's last row


@pytest.mark.parametrize("row", [[0.0, math.nan], [-math.inf, -math.inf]])
def test_next_token_probs_refuses_logits_without_a_distribution(row):
    from inferlab.speculative.sampler import next_token_probs

    with refused(ValueError, "logits must not be NaN or all -inf: no distribution has them"):
        next_token_probs(torch.tensor([row]), 1.0, None, None)


def test_tree_model_refuses_nodes_out_of_order(tiny_pair):
    from inferlab.speculative.tree import TreeNode

    _, draft = tiny_pair
    ids = torch.tensor([[1, 2]])
    nodes = [TreeNode(3, -1, 1), TreeNode(4, -1, 1)]
    message = "read the prefix first, then tree nodes in list order, each exactly once"
    model = TreeModel(draft, "draft")
    with refused(RuntimeError, message):
        model.tree_logits(ids, nodes, [1])  # node 1 before node 0
    model = TreeModel(draft, "draft")
    assert model.tree_logits(ids, nodes, [0]).shape == (2, 97)  # the prefix's last token and node 0
    with refused(RuntimeError, message):
        model.tree_logits(torch.tensor([[1, 2, 5]]), nodes, [1])  # a new prefix token after tree nodes
