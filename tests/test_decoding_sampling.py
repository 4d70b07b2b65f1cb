"""Sampling filters and samplers, checked against transformers' own warpers and exact probabilities."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chisquare
from transformers.generation.logits_process import (
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from inferlab.decoding import ancestral_sample, distinct_n, filter_logits, sample_next


def hf_filter(logits, temperature=1.0, top_k=None, top_p=None):
    """The reference: transformers' warpers, in the order generate() applies them."""
    ids = torch.zeros((logits.shape[0], 1), dtype=torch.long)
    if temperature != 1.0:
        logits = TemperatureLogitsWarper(float(temperature))(ids, logits)
    if top_k is not None:
        logits = TopKLogitsWarper(top_k)(ids, logits)
    if top_p is not None and top_p < 1.0:
        logits = TopPLogitsWarper(top_p)(ids, logits)
    return logits


def awkward_logits(seed: int, batch: int = 4, vocab: int = 50) -> torch.Tensor:
    """Random logits with deliberate ties (rounded values) and some -inf entries."""
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch, vocab, generator=generator) * 3
    logits[:, : vocab // 2] = logits[:, : vocab // 2].round()  # ties
    mask = torch.rand(batch, vocab, generator=generator) < 0.2
    return logits.masked_fill(mask, float("-inf"))


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    temperature=st.sampled_from([1.0, 0.3, 0.7, 1.5, 4.0]),
    top_k=st.one_of(st.none(), st.integers(1, 60)),
    top_p=st.one_of(st.none(), st.floats(0.01, 1.0)),
)
def test_filter_logits_equals_transformers_warpers(seed, temperature, top_k, top_p):
    logits = awkward_logits(seed)
    ours = filter_logits(logits, temperature=temperature, top_k=top_k, top_p=top_p)
    reference = hf_filter(logits, temperature, top_k, top_p)
    assert torch.equal(ours, reference)


def test_top_k_keeps_ties_with_the_kth_token():
    logits = torch.tensor([[3.0, 1.0, 2.0, 2.0, 0.0]])
    kept = torch.isfinite(filter_logits(logits, top_k=2))
    # The 2nd largest value 2.0 appears twice: both copies stay, so three tokens survive.
    assert kept.tolist() == [[True, False, True, True, False]]


def test_top_p_keeps_smallest_set_reaching_p():
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    kept = torch.isfinite(filter_logits(probs.log(), top_p=0.75))
    assert kept.tolist() == [[True, True, False, False]]  # 0.5 + 0.3 = 0.8 is the first to reach 0.75


# Exact ties at the boundary. Random top_p values never land exactly on a cumulative sum, so the
# "<=" against "<" choice is only visible here. Four or eight equal logits give probabilities
# 1/4 or 1/8 and cumulative sums that are exact in binary floating point.
@pytest.mark.parametrize("vocab", [4, 8])
@pytest.mark.parametrize("top_p", [0.125, 0.25, 0.5, 0.75, 0.875])
def test_top_p_on_equal_logits_keeps_exactly_enough_tokens_to_reach_p(vocab, top_p):
    logits = torch.zeros(1, vocab)
    ours = filter_logits(logits, top_p=top_p)
    assert torch.equal(ours, hf_filter(logits, top_p=top_p))
    # Each token holds 1/vocab: the smallest set reaching p has ceil(p * vocab) tokens (at least one).
    assert torch.isfinite(ours).sum().item() == max(1, math.ceil(top_p * vocab))


def test_top_p_boundary_tie_in_a_peaked_distribution():
    # Probabilities 1/2, 1/4, 1/8, 1/8: top_p = 3/4 is reached exactly by the first two tokens.
    logits = torch.tensor([[0.5, 0.25, 0.125, 0.125]]).log()
    kept = torch.isfinite(filter_logits(logits, top_p=0.75))
    assert kept.tolist() == [[True, True, False, False]]
    assert torch.equal(filter_logits(logits, top_p=0.75), hf_filter(logits, top_p=0.75))


@pytest.mark.parametrize("min_p", [0.25, 0.5, 1.0])
def test_min_p_keeps_tokens_exactly_at_the_threshold(min_p):
    from transformers.generation.logits_process import MinPLogitsWarper

    # Probabilities 1/2, 1/4, 1/8, 1/8 (exact in binary): min_p * 1/2 lands exactly on a token's
    # probability, so "below the threshold" and "at or below" keep different sets.
    logits = torch.tensor([[0.5, 0.25, 0.125, 0.125]]).log()
    ours = filter_logits(logits, min_p=min_p)
    reference = MinPLogitsWarper(min_p)(torch.zeros((1, 1), dtype=torch.long), logits)
    assert torch.equal(ours, reference)
    kept = {0.25: 4, 0.5: 2, 1.0: 1}[min_p]  # threshold 1/8, 1/4, 1/2: tokens at it stay
    assert torch.isfinite(ours).sum().item() == kept


@pytest.mark.parametrize("top_k", [1, 2, 3, 4, 5])
def test_top_k_on_tied_logits_matches_transformers(top_k):
    # Rows with every value tied, and ties that straddle the k-th place.
    logits = torch.tensor([[1.0, 1.0, 1.0, 1.0, 1.0], [2.0, 1.0, 1.0, 1.0, 0.0], [3.0, 3.0, 2.0, 2.0, 2.0]])
    assert torch.equal(filter_logits(logits, top_k=top_k), hf_filter(logits, top_k=top_k))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"temperature": 0.0}, "temperature must be > 0"),
        ({"temperature": -1.0}, "temperature must be > 0"),
        ({"top_k": 0}, "top_k must be an integer >= 1"),
        ({"top_p": 0.0}, r"top_p must be in \(0, 1\]"),
        ({"top_p": 1.5}, r"top_p must be in \(0, 1\]"),
    ],
)
def test_bad_filter_arguments_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        filter_logits(torch.zeros(1, 4), **kwargs)


def test_top_k_must_be_an_integer():
    with pytest.raises(TypeError, match="top_k must be an integer"):
        filter_logits(torch.zeros(1, 4), top_k=2.5)


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"temperature": 0.5}, {"top_k": 3}, {"top_p": 0.8}, {"temperature": 2.0, "top_k": 4, "top_p": 0.9}],
)
def test_sampler_matches_exact_filtered_distribution(kwargs):
    # Exact reference: softmax of transformers' filtered logits. 50k draws; reject at p < 1e-3.
    logits = torch.tensor([[2.0, 1.5, 1.5, 0.5, 0.0, -1.0, float("-inf"), -2.0]])
    exact = hf_filter(logits, kwargs.get("temperature", 1.0), kwargs.get("top_k"), kwargs.get("top_p"))
    exact = exact.softmax(-1)[0].double()
    generator = torch.Generator().manual_seed(1234)
    draws = sample_next(logits.expand(50_000, -1), generator=generator, **kwargs)
    counts = torch.bincount(draws, minlength=logits.shape[-1]).double()
    support = exact > 0
    assert counts[~support].sum() == 0, "sampled a token the filter rules out"
    expected = exact[support] / exact[support].sum() * counts.sum()  # float32 softmax sums to 1 +- 1e-7
    _, p_value = chisquare(counts[support].numpy(), expected.numpy())
    assert p_value > 1e-3


def test_ancestral_sampling_on_a_table_follows_the_chain_rule():
    # A logits function over 2 tokens whose next-token law depends on the previous token only:
    # p(x1=1) = 0.3, p(x_t = x_{t-1}) = 0.8. Exact joint probability by hand for 3 tokens.
    start = 2  # a start symbol outside the output vocabulary

    def logits_fn(ids):
        previous = ids
        probs = torch.where(
            (previous == start).unsqueeze(-1),
            torch.tensor([0.7, 0.3]),
            torch.where(previous.unsqueeze(-1) == torch.tensor([0, 1]), 0.8, 0.2),
        )
        return probs.log()

    generator = torch.Generator().manual_seed(7)
    samples = ancestral_sample(logits_fn, 3, prompt=[start], num_samples=50_000, generator=generator)
    codes = samples[:, 0] * 4 + samples[:, 1] * 2 + samples[:, 2]
    counts = torch.bincount(codes, minlength=8).double()
    exact = []
    for code in range(8):
        x = [(code >> 2) & 1, (code >> 1) & 1, code & 1]
        p = (0.3 if x[0] else 0.7) * (0.8 if x[1] == x[0] else 0.2) * (0.8 if x[2] == x[1] else 0.2)
        exact.append(p)
    assert math.isclose(sum(exact), 1.0)
    expected = torch.tensor(exact, dtype=torch.float64) / sum(exact) * counts.sum()
    _, p_value = chisquare(counts.numpy(), expected.numpy())
    assert p_value > 1e-3


def test_distinct_n_by_hand():
    # "a b a b" has bigrams ab, ba, ab: 2 distinct of 3.
    assert distinct_n([[0, 1, 0, 1]], 2) == pytest.approx(2 / 3)
    assert distinct_n([[0, 1, 0, 1], [2, 2]], 1) == pytest.approx(3 / 6)
    with pytest.raises(ValueError, match="n must be an integer >= 1"):
        distinct_n([[0, 1]], 0)


def test_tiny_top_p_still_keeps_the_most_probable_token():
    logits = awkward_logits(3)
    ours = filter_logits(logits, top_p=1e-9)
    assert torch.equal(ours, hf_filter(logits, top_p=1e-9))
    assert (torch.isfinite(ours).sum(-1) >= 1).all()


def test_generator_makes_sampling_reproducible():
    logits = torch.zeros(1000, 10)
    torch.manual_seed(0)
    first = sample_next(logits, generator=torch.Generator().manual_seed(5))
    torch.manual_seed(1)  # the global seed must not matter when a generator is given
    second = sample_next(logits, generator=torch.Generator().manual_seed(5))
    assert torch.equal(first, second)


def test_cached_generation_in_the_benchmark_draws_what_ancestral_sample_draws(tiny_pair):
    # The benchmark reuses transformers' KV cache for speed; it must sample the same tokens.
    from inferlab.decoding.bench import generate_cached

    model, prompt = tiny_pair[0], [4, 8, 15]
    settings = {"temperature": 1.3, "top_k": 30, "top_p": 0.95}
    plain = ancestral_sample(
        model, 6, prompt=prompt, num_samples=3, generator=torch.Generator().manual_seed(2), **settings
    )
    cached = generate_cached(model, torch.tensor([prompt] * 3), 6, torch.Generator().manual_seed(2), **settings)
    assert torch.equal(plain, cached)


def test_filter_logits_accepts_a_single_row():
    logits = awkward_logits(11, batch=1)
    ours = filter_logits(logits[0], temperature=0.8, top_k=20, top_p=0.7)
    assert torch.equal(ours, hf_filter(logits, 0.8, 20, 0.7)[0])


# ----------------------------------------------------------------------------------------------
# Issue 18: min_tokens_to_keep, min-p, typical, epsilon and eta sampling, against transformers'
# own warpers on random, tied and -inf logits (the same awkward logits as the filters above).


def hf_warpers(min_tokens_to_keep=1, top_k=None, top_p=None, min_p=None, typical_p=None, epsilon=None, eta=None):
    """The reference: transformers' warpers, in the order generate() applies them."""
    from transformers.generation.logits_process import (
        EpsilonLogitsWarper,
        EtaLogitsWarper,
        MinPLogitsWarper,
        TypicalLogitsWarper,
    )

    keep = {"min_tokens_to_keep": min_tokens_to_keep}
    warpers = [
        TopKLogitsWarper(top_k, **keep) if top_k is not None else None,
        TopPLogitsWarper(top_p, **keep) if top_p is not None and top_p < 1 else None,
        MinPLogitsWarper(min_p, **keep) if min_p is not None else None,
        TypicalLogitsWarper(typical_p, **keep) if typical_p is not None else None,
        EpsilonLogitsWarper(epsilon, **keep) if epsilon is not None else None,
        EtaLogitsWarper(eta, **keep) if eta is not None else None,
    ]
    return [w for w in warpers if w is not None]


CUTOFFS = st.floats(0.001, 0.999)


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    min_tokens_to_keep=st.sampled_from([1, 2, 5, 60]),
    top_k=st.one_of(st.none(), st.integers(1, 60)),
    top_p=st.one_of(st.none(), CUTOFFS),
    min_p=st.one_of(st.none(), st.floats(0.0, 1.0)),
    typical_p=st.one_of(st.none(), CUTOFFS),
    epsilon=st.one_of(st.none(), CUTOFFS),
    eta=st.one_of(st.none(), CUTOFFS),
)
def test_every_filter_and_min_tokens_to_keep_equal_transformers(seed, min_tokens_to_keep, **cutoffs):
    logits = awkward_logits(seed)
    ids = torch.zeros((logits.shape[0], 1), dtype=torch.long)
    reference = logits
    for warper in hf_warpers(min_tokens_to_keep, **cutoffs):
        reference = warper(ids, reference)
    ours = filter_logits(logits, min_tokens_to_keep=min_tokens_to_keep, **cutoffs)
    assert torch.equal(ours, reference)


@pytest.mark.parametrize("name", ["min_p", "typical_p", "epsilon", "eta"])
@pytest.mark.parametrize("value", [0.05, 0.3, 0.9])
@pytest.mark.parametrize("min_tokens_to_keep", [1, 3])
def test_each_new_filter_alone_on_tied_logits_equals_transformers(name, value, min_tokens_to_keep):
    """Equal logits in pairs: ties at every cut-off, where a < against a <= would show."""
    logits = torch.tensor([[3.0, 3.0, 1.0, 1.0, 0.0, 0.0, -2.0, float("-inf")]])
    (warper,) = hf_warpers(min_tokens_to_keep, **{name: value})
    ours = filter_logits(logits, min_tokens_to_keep=min_tokens_to_keep, **{name: value})
    assert torch.equal(ours, warper(torch.zeros((1, 1), dtype=torch.long), logits))


def test_min_tokens_to_keep_lifts_top_k_and_top_p_as_in_transformers():
    logits = torch.tensor([[4.0, 1.0, 0.5, 0.0]])
    assert torch.isfinite(filter_logits(logits, top_k=1, min_tokens_to_keep=3)).sum() == 3
    # top-p = 0.5 would keep only the first token (it holds 0.9 of the mass): three stay anyway.
    assert torch.isfinite(filter_logits(logits, top_p=0.5, min_tokens_to_keep=3)).sum() == 3


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"min_p": 1.5}, "min_p must be"),
        ({"typical_p": 1.0}, "typical_p must be"),
        ({"epsilon": 0.0}, "epsilon must be"),
        ({"eta": float("nan")}, "eta must be"),
        ({"min_tokens_to_keep": 0}, "min_tokens_to_keep must be"),
    ],
)
def test_bad_new_filter_settings_are_refused_by_name(kwargs, words):
    with pytest.raises(ValueError, match=words):
        filter_logits(torch.zeros(1, 4), **kwargs)


def test_a_tiny_temperature_gives_the_argmax_not_nan():
    """logits / 1e-39 overflows float32 to inf, and softmax(inf, ...) is NaN; shifting by the max first
    keeps the exact limit, all mass on the argmax (PyTorch's own softmax on the shifted logits agrees)."""
    from inferlab.decoding import filtered_probs

    logits = torch.tensor([[2.0, 1.0, 0.5, -1.0], [0.0, 0.1, 0.2, 0.3]])
    assert torch.isnan(torch.softmax(logits / 1e-39, dim=-1)).any()  # the naive way
    probs = filtered_probs(logits, temperature=1e-39)
    assert torch.equal(probs, torch.nn.functional.one_hot(logits.argmax(-1), 4).float())
    # Elsewhere the shift changes nothing: the same probabilities as transformers' warper + softmax.
    reference = TemperatureLogitsWarper(0.7)(torch.zeros((2, 1), dtype=torch.long), logits).softmax(-1)
    torch.testing.assert_close(filtered_probs(logits, temperature=0.7), reference)


@pytest.mark.parametrize(
    "logits",
    [
        torch.tensor([[0.0, float("nan"), 1.0]]),
        torch.tensor([[0.0, float("inf"), 1.0]]),
        torch.full((2, 3), float("-inf")),
    ],
    ids=["nan", "+inf", "all -inf"],
)
def test_samplers_refuse_logits_with_no_distribution(logits):
    """softmax would give NaN probabilities and multinomial a plausible-looking id: refuse by name."""
    from inferlab.checks import NonFiniteError
    from inferlab.decoding import filtered_probs

    for sampler in (filtered_probs, sample_next):
        with pytest.raises(NonFiniteError, match="logits"):
            sampler(logits)
    assert issubclass(NonFiniteError, ValueError)
    # filter_logits alone propagates, the way transformers' warpers do.
    assert torch.equal(torch.isnan(filter_logits(logits, top_k=2)), torch.isnan(TopKLogitsWarper(2)(None, logits)))
