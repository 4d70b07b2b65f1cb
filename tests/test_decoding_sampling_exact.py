"""inferlab.decoding.sampling at its edges: exact ties, defaults, shapes other than (batch, vocab), and
the exact error messages.

References: transformers' own logits warpers, probabilities worked by hand, and the documented
message shape "<name> must be <what is allowed>, got <value>" (inferlab.checks). Most ties use
dyadic probabilities (1/2, 1/4, 1/8, ...), which float32 holds exactly, so a "<" against a "<=" shows.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from transformers.generation.logits_process import (
    EpsilonLogitsWarper,
    EtaLogitsWarper,
    MinPLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
    TypicalLogitsWarper,
)

from conftest import exactly
from inferlab.checks import NonFiniteError
from inferlab.decoding import (
    TableModel,
    ancestral_sample,
    distinct_n,
    epsilon_filter,
    eta_filter,
    filter_logits,
    filtered_probs,
    min_p_filter,
    sample_next,
    top_k_filter,
    top_p_filter,
    typical_filter,
)
from inferlab.decoding.sampling import MAX_SAMPLED_IDS, input_vocab_size, start_ids

INF = float("inf")
DYADIC_P = [0.5, 0.25, 0.125, 0.125]
PEAKED_P = [0.78125, 0.125, 0.0625, 0.03125]
DYADIC = torch.tensor([DYADIC_P]).log()
PEAKED = torch.tensor([PEAKED_P]).log()


def hf(warper, logits: torch.Tensor) -> torch.Tensor:
    """Apply a transformers warper to (batch, vocab) logits."""
    return warper(torch.zeros((logits.shape[0], 1), dtype=torch.long), logits)


def assert_exact_in_float32(logits: torch.Tensor, probs: list[float]) -> None:
    """Precondition of a tie test: softmax gives these probabilities back bit for bit."""
    assert logits.softmax(-1).tolist() == [probs]


# ---------------------------------------------------------------- check_filter_args (via filter_logits)

CUTOFF_NAMES = ("typical_p", "epsilon", "eta")


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"temperature": 0.0}, ValueError, "temperature must be > 0, got 0.0"),
        ({"temperature": -1.5}, ValueError, "temperature must be > 0, got -1.5"),
        ({"temperature": INF}, ValueError, "temperature must be a finite number > 0, got inf"),
    ],
)
def test_bad_temperature_is_named_with_its_range_and_the_greedy_hint(kwargs, error, message):
    with pytest.raises(error, match=exactly(f"{message}; for temperature 0 use greedy decoding (argmax)")):
        filter_logits(torch.zeros(1, 4), **kwargs)


def test_a_temperature_that_is_not_a_number_is_a_type_error_naming_the_range():
    with pytest.raises(TypeError, match=exactly("temperature must be a number > 0, got 'hot'")):
        filter_logits(torch.zeros(1, 4), temperature="hot")


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"min_p": -0.5}, ValueError, "min_p must be in [0, 1], got -0.5"),
        ({"min_p": 1.5}, ValueError, "min_p must be in [0, 1], got 1.5"),
        ({"min_p": "x"}, TypeError, "min_p must be a number in [0, 1], got 'x'"),
        *[
            ({name: value}, ValueError, f"{name} must be in (0, 1), got {value}")
            for name in CUTOFF_NAMES
            for value in (0.0, 1.0, -0.5, 1.5)
        ],
        *[
            ({name: math.nan}, ValueError, f"{name} must be a finite number in (0, 1), got nan")
            for name in CUTOFF_NAMES
        ],
    ],
)
def test_bad_cutoff_is_named_with_its_exact_interval(kwargs, error, message):
    """min_p is closed [0, 1]; typical_p, epsilon and eta are open (0, 1): the message says which."""
    with pytest.raises(error, match=exactly(message)):
        filter_logits(torch.zeros(1, 4), **kwargs)


# ---------------------------------------------------------------- check_logits / check_samplable

ROW_OF_ONLY_MINUS_INF = (
    "logits must give every row at least one finite logit, got a row of only -inf at {}: "
    "every token is ruled out, so there is nothing to sample"
)


@pytest.mark.parametrize(
    ("logits", "error", "message"),
    [
        ("abc", TypeError, "logits must be a torch.Tensor, got str"),
        (torch.tensor(1.0), ValueError, "logits must have shape (..., vocab), got a 0-dim tensor"),
        (torch.tensor([[1, 2]]), TypeError, "logits must be a floating-point tensor, got torch.int64"),
        (torch.zeros(2, 0), ValueError, "logits must have a vocabulary axis of size >= 1, got shape (2, 0)"),
        (
            torch.tensor([[0.0, math.nan]]),
            NonFiniteError,
            "logits must hold finite numbers or -inf, got nan at index (0, 1)",
        ),
        (torch.tensor([[0.0, 1.0], [-INF, -INF]]), NonFiniteError, ROW_OF_ONLY_MINUS_INF.format("(1,)")),
        # (batch, position, vocab): only the vocabulary axis decides whether a row is empty.
        (torch.tensor([[[-INF, -INF], [0.0, 0.0]]]), NonFiniteError, ROW_OF_ONLY_MINUS_INF.format("(0, 0)")),
    ],
    ids=["not a tensor", "0-dim", "integer", "empty vocab", "nan", "one empty row", "3-D empty row"],
)
def test_filtered_probs_refuses_bad_logits_by_name(logits, error, message):
    with pytest.raises(error, match=exactly(message)):
        filtered_probs(logits)


def test_sample_next_refuses_a_batch_with_one_empty_row():
    with pytest.raises(NonFiniteError, match=exactly(ROW_OF_ONLY_MINUS_INF.format("(1,)"))):
        sample_next(torch.tensor([[0.0, 1.0], [-INF, -INF]]))


def test_a_vocabulary_of_one_token_is_certain():
    logits = torch.tensor([[3.0], [-1.0]])
    assert torch.equal(filtered_probs(logits), torch.ones(2, 1))
    assert sample_next(logits).tolist() == [0, 0]


def test_filtered_probs_on_a_single_row_is_its_softmax_at_temperature_one():
    """A 1-D row is (..., vocab) with no batch axis; the default temperature 1 leaves p unchanged."""
    probs = torch.tensor([0.5, 0.25, 0.125, 0.125])
    assert torch.equal(filtered_probs(probs.log()), probs)


# ---------------------------------------------------------------- top_k_filter


def test_top_k_filter_keeps_only_k_tokens_by_default():
    logits = torch.tensor([[1.0, 4.0, 2.0, 3.0]])
    ours = top_k_filter(logits, 1)
    assert torch.equal(ours, hf(TopKLogitsWarper(1), logits))
    assert torch.isfinite(ours).tolist() == [[False, True, False, False]]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((0,), "k must be an integer >= 1, got 0"),
        ((2, 0), "min_tokens_to_keep must be an integer >= 1, got 0"),
    ],
)
def test_top_k_filter_names_a_bad_argument(args, message):
    with pytest.raises(ValueError, match=exactly(message)):
        top_k_filter(torch.zeros(1, 4), *args)


# ---------------------------------------------------------------- top_p_filter


def test_top_p_filter_keeps_only_the_most_probable_token_by_default():
    # 1/2 alone reaches p = 0.3.
    ours = top_p_filter(DYADIC, 0.3)
    assert torch.equal(ours, hf(TopPLogitsWarper(0.3), DYADIC))
    assert torch.isfinite(ours).sum().item() == 1


@pytest.mark.parametrize("p", [1.0, 1])
def test_top_p_filter_accepts_p_equal_to_one(p):
    logits = torch.tensor([[2.0, 1.0, 1.0, -3.0, -INF]])
    assert torch.equal(top_p_filter(logits, p), hf(TopPLogitsWarper(1.0), logits))


def test_filter_logits_with_top_p_one_leaves_the_filter_off_as_generate_does():
    """generate() adds TopPLogitsWarper only for top_p < 1. Applied anyway, it would drop a token whose
    float32 probability underflows to 0 (exp(-200)); with the filter off that logit stays as it is."""
    logits = torch.tensor([[0.0, -200.0]])
    assert torch.isinf(hf(TopPLogitsWarper(1.0), logits)[0, 1])  # what applying it would do
    assert torch.equal(filter_logits(logits, top_p=1.0), logits)


# ---------------------------------------------------------------- min-p, typical, epsilon and eta

NEW_FILTERS = {
    "min_p": (min_p_filter, MinPLogitsWarper),
    "typical_p": (typical_filter, TypicalLogitsWarper),
    "epsilon": (epsilon_filter, EpsilonLogitsWarper),
    "eta": (eta_filter, EtaLogitsWarper),
}


@pytest.mark.parametrize(
    ("name", "value", "logits"),
    [("min_p", 0.9, DYADIC), ("typical_p", 0.2, DYADIC), ("epsilon", 0.3, DYADIC), ("eta", 0.2, PEAKED)],
)
def test_each_filter_keeps_a_single_token_by_default(name, value, logits):
    """min_tokens_to_keep defaults to 1, as in transformers: these settings keep exactly one token."""
    ours, warper = NEW_FILTERS[name]
    result = ours(logits, value)
    assert torch.equal(result, hf(warper(value), logits))
    assert torch.isfinite(result).sum().item() == 1


ROW = torch.tensor([3.0, 3.0, 1.0, 0.5, 0.0, -2.0, -INF])


@pytest.mark.parametrize("shape", [(7,), (2, 3, 7)], ids=["1-D", "3-D"])
@pytest.mark.parametrize("min_tokens_to_keep", [1, 2])
@pytest.mark.parametrize(("name", "value"), [("min_p", 0.3), ("typical_p", 0.5), ("epsilon", 0.05), ("eta", 0.1)])
def test_each_filter_works_along_the_last_axis_of_any_shape(name, value, min_tokens_to_keep, shape):
    """(vocab,) and (batch, position, vocab) logits: the same as transformers on the flattened rows."""
    logits = ROW.expand(*shape).clone()
    if len(shape) == 3:
        logits[1, 2, :2] = torch.tensor([-1.0, 0.25])  # rows that differ, so a wrong axis shows
        logits[0, 1] = logits[0, 1].flip(-1)
    ours, warper = NEW_FILTERS[name]
    reference = hf(warper(value, min_tokens_to_keep=min_tokens_to_keep), logits.reshape(-1, 7)).reshape(shape)
    assert torch.equal(ours(logits, value, min_tokens_to_keep), reference)
    assert torch.equal(filter_logits(logits, min_tokens_to_keep=min_tokens_to_keep, **{name: value}), reference)


@pytest.mark.parametrize(
    ("function", "value", "message"),
    [
        (min_p_filter, 1.5, "min_p must be a number in [0, 1], got 1.5"),
        (min_p_filter, -0.1, "min_p must be a number in [0, 1], got -0.1"),
        (typical_filter, 1.0, "typical_p must be a number in (0, 1), got 1.0"),
        (epsilon_filter, 0.0, "epsilon must be a number in (0, 1), got 0.0"),
        (eta_filter, 0.0, "eta must be a number in (0, 1), got 0.0"),
    ],
)
def test_each_filter_names_its_bad_cutoff(function, value, message):
    with pytest.raises(ValueError, match=exactly(message)):
        function(torch.zeros(1, 4), value)


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (0, ValueError),
        (-1, ValueError),
        # Not an integer at all: the message is what matters here (inferlab.checks would make it a
        # TypeError; these inline checks raise ValueError, and either is a clear refusal).
        (2.5, (TypeError, ValueError)),
        (True, (TypeError, ValueError)),
        ("3", (TypeError, ValueError)),
    ],
)
@pytest.mark.parametrize(
    ("function", "value"), [(min_p_filter, 0.5), (typical_filter, 0.5), (epsilon_filter, 0.1), (eta_filter, 0.1)]
)
def test_each_filter_names_a_bad_min_tokens_to_keep(function, value, bad, error):
    with pytest.raises(error, match=exactly(f"min_tokens_to_keep must be an integer >= 1, got {bad!r}")):
        function(torch.zeros(1, 4), value, bad)


def test_typical_stops_at_the_first_token_whose_running_mass_reaches_typical_p_exactly():
    """p = 1/2, 1/4, 1/8, 1/8: entropy 1.75 bits, surprises 1, 2, 3, 3 bits, so the most typical order
    is token 1 (|2 - 1.75|), token 0, then tokens 2 and 3. Running mass 1/4, 3/4: typical_p = 3/4 is
    reached exactly by the second token, and the two tokens of 1/8 go."""
    assert_exact_in_float32(DYADIC, DYADIC_P)
    ours = typical_filter(DYADIC, 0.75)
    assert torch.isfinite(ours).tolist() == [[True, True, False, False]]
    assert torch.equal(ours, hf(TypicalLogitsWarper(0.75), DYADIC))


def test_typical_keeps_the_least_typical_token_when_only_it_reaches_typical_p():
    """Distinct surprises: the most atypical token is needed to reach 0.999, so all five stay."""
    logits = torch.tensor([[0.0, 1.0, 2.0, 3.0, 4.0]])
    assert torch.equal(typical_filter(logits, 0.999), logits)
    assert torch.equal(typical_filter(logits, 0.999), hf(TypicalLogitsWarper(0.999), logits))


def test_typical_keeps_every_token_when_the_float32_mass_never_reaches_typical_p():
    """This row's float32 running mass ends at 0.99999988, below typical_p = 1 - 2**-24: no token
    reaches it, so the cut-off is the last token (transformers clamps the same way) and all stay."""
    logits = torch.tensor([[3.1, -0.6, -4.4, 1.1, -2.2]])
    typical_p = 1 - 2**-24
    assert torch.equal(typical_filter(logits, typical_p), logits)
    assert torch.equal(typical_filter(logits, typical_p), hf(TypicalLogitsWarper(typical_p), logits))


@pytest.mark.parametrize(
    ("name", "value", "probs", "kept"),
    [
        # epsilon = 1/8 on 1/2, 1/4, 1/8, 1/8: the two tokens at exactly 1/8 stay.
        ("epsilon", 0.125, DYADIC_P, [True, True, True, True]),
        # epsilon = 1/16 on 0.78125, 1/8, 1/16, 1/32: only 1/32 is below it.
        ("epsilon", 0.0625, PEAKED_P, [True, True, True, False]),
        # eta = 1/16: the cut-off min(1/16, sqrt(1/16) * exp(-H)) is 1/16, as H = 0.73 nats makes the
        # second term 0.12 (checked below), so the same tokens go.
        ("eta", 0.0625, PEAKED_P, [True, True, True, False]),
    ],
)
def test_epsilon_and_eta_keep_a_token_exactly_at_the_cutoff(name, value, probs, kept):
    logits = torch.tensor([probs]).log()
    assert_exact_in_float32(logits, probs)
    entropy = -sum(p * math.log(p) for p in probs)
    assert name != "eta" or value < math.sqrt(value) * math.exp(-entropy)  # the eta branch of the cut-off
    ours, warper = NEW_FILTERS[name]
    result = ours(logits, value)
    assert torch.isfinite(result).tolist() == [kept]
    assert torch.equal(result, hf(warper(value), logits))


# ---------------------------------------------------------------- filtered_probs and sample_next


@pytest.mark.parametrize(
    "filters",
    [{"min_p": 0.5}, {"epsilon": 0.2}, {"typical_p": 0.7}, {"top_k": 1, "min_tokens_to_keep": 2}],
)
def test_filtered_probs_applies_the_extra_filters(filters):
    """Each of these keeps tokens 0 and 1 of 1/2, 1/4, 1/8, 1/8: renormalised, 2/3 and 1/3."""
    expected = torch.tensor([[2 / 3, 1 / 3, 0.0, 0.0]])
    torch.testing.assert_close(filtered_probs(DYADIC, **filters), expected)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"top_k": 0}, "top_k must be an integer >= 1, got 0"),
        ({"top_p": 0.0}, "top_p must be in (0, 1], got 0.0"),
        ({"min_p": 1.5}, "min_p must be in [0, 1], got 1.5"),
        ({"eta": 1.0}, "eta must be in (0, 1), got 1.0"),
    ],
)
def test_filtered_probs_names_a_bad_setting_before_looking_at_the_logit_values(setting, message):
    """The settings are checked first: a bad one is named even when the logits have no distribution."""
    with pytest.raises(ValueError, match=exactly(message)):
        filtered_probs(torch.full((1, 3), -INF), **setting)


def test_sample_next_applies_the_extra_filters():
    """min_p = 1 keeps only the most probable token, so every draw is it (unfiltered: p = 0.67 each)."""
    logits = torch.tensor([[1.0, 2.0, 3.0]]).expand(500, -1)
    draws = sample_next(logits, min_p=1.0, generator=torch.Generator().manual_seed(0))
    assert draws.tolist() == [2] * 500


# ---------------------------------------------------------------- input_vocab_size and start_ids


def two_step_table(vocab: int = 2) -> TableModel:
    uniform = torch.full((vocab,), 1 / vocab, dtype=torch.float64)
    return TableModel([uniform, uniform.expand(vocab, vocab).clone()])


class Fake:
    """A logits function with the attributes a model may carry; uniform logits over 3 tokens."""

    def __init__(self, **attributes):
        self.__dict__.update(attributes)

    def __call__(self, ids):
        return torch.zeros(ids.shape[0], ids.shape[1], 3)


def plain_logits_fn(ids):
    return torch.zeros(ids.shape[0], ids.shape[1], 3)


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        (two_step_table(3), 4),  # tokens 0..2 and the start symbol 3
        (Fake(vocab_size=5), 5),
        (Fake(vocab_size=5, get_input_embeddings=lambda: torch.nn.Embedding(7, 2)), 7),  # the embedding decides
        (Fake(get_input_embeddings=lambda: torch.nn.Embedding(7, 2)), 7),
        (Fake(vocab_size=True), None),
        (Fake(vocab_size="5"), None),
        (Fake(vocab_size=5.0), None),
        (plain_logits_fn, None),
    ],
    ids=["table", "vocab_size", "embeddings and vocab_size", "embeddings", "bool", "str", "float", "function"],
)
def test_input_vocab_size(model, expected):
    assert input_vocab_size(model) == expected


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [(torch.tensor([[1, 2]]), [[1, 2]]), (torch.tensor([2]), [[2]]), ([0, 1, 2], [[0, 1, 2]])],
    ids=["(1, length) tensor", "1-D tensor of one", "list"],
)
def test_start_ids_gives_a_one_row_long_tensor(prompt, expected):
    ids = start_ids(plain_logits_fn, prompt)
    assert ids.dtype == torch.long
    assert ids.tolist() == expected


def test_start_ids_uses_the_start_symbol_as_a_long_tensor():
    assert torch.equal(start_ids(two_step_table(3), None), torch.tensor([[3]]))
    ids = start_ids(Fake(bos_id=np.int32(3)), None)  # a start symbol taken from a NumPy table
    assert ids.dtype == torch.long
    assert ids.tolist() == [[3]]


@pytest.mark.parametrize(
    ("model", "prompt", "error", "message"),
    [
        (
            plain_logits_fn,
            None,
            ValueError,
            "prompt is required for a model without a start symbol (give a list of token ids)",
        ),
        (
            plain_logits_fn,
            [-1],
            ValueError,
            "prompt must be a list or 1-D tensor of integer token ids >= 0, got -1 among them",
        ),
        (
            Fake(vocab_size=5),
            [1, 5],
            ValueError,
            "prompt must be a list or 1-D tensor of integer token ids in 0..4, got 5 among them",
        ),
        (
            plain_logits_fn,
            torch.tensor([[1], [2]]),
            TypeError,
            "prompt must be a list or 1-D tensor of integer token ids >= 0, got an array of shape (2, 1) and torch.int64",
        ),
    ],
    ids=["no start symbol", "negative id", "id past the vocabulary", "a batch of two"],
)
def test_start_ids_names_a_bad_prompt(model, prompt, error, message):
    with pytest.raises(error, match=exactly(message)):
        start_ids(model, prompt)
    with pytest.raises(error, match=exactly(message)):
        ancestral_sample(model, 1, prompt=prompt)


# ---------------------------------------------------------------- ancestral_sample


def test_ancestral_sample_draws_one_sample_by_default():
    assert ancestral_sample(plain_logits_fn, 3, prompt=[0]).shape == (1, 3)


def test_a_table_model_generates_exactly_its_number_of_steps():
    """A two-step table has p(x1) and p(x2 | x1): two tokens from the start symbol, one after one token."""
    model = two_step_table(2)
    assert ancestral_sample(model, 2, num_samples=4).shape == (4, 2)
    assert ancestral_sample(model, 1, prompt=[model.bos_id, 0]).shape == (1, 1)
    with pytest.raises(
        ValueError, match=exactly("length must be <= 2 for this TableModel (2 steps, 0 of them in the prompt), got 3")
    ):
        ancestral_sample(model, 3)
    with pytest.raises(
        ValueError, match=exactly("length must be <= 1 for this TableModel (2 steps, 1 of them in the prompt), got 2")
    ):
        ancestral_sample(model, 2, prompt=[model.bos_id, 0])


def never_called(ids):
    pytest.fail("the model was called although the arguments were bad")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_samples": 0}, "num_samples must be an integer >= 1, got 0"),
        ({"top_k": 0}, "top_k must be an integer >= 1, got 0"),
        ({"top_p": 0.0}, "top_p must be in (0, 1], got 0.0"),
        ({"top_p": 1.5}, "top_p must be in (0, 1], got 1.5"),
    ],
)
def test_ancestral_sample_refuses_bad_settings_before_calling_the_model(kwargs, message):
    with pytest.raises(ValueError, match=exactly(message)):
        ancestral_sample(never_called, 2, prompt=[0], **kwargs)


def test_ancestral_sample_refuses_more_ids_than_the_limit_before_calling_the_model():
    # One sample of 2**27 new tokens after a prompt of one: 2**27 + 1 ids, one over the limit.
    message = (
        f"num_samples would need {MAX_SAMPLED_IDS + 1:,} token ids in memory, over the limit of "
        f"{MAX_SAMPLED_IDS:,}; choose a smaller num_samples"
    )
    with pytest.raises(ValueError, match=exactly(message)):
        ancestral_sample(never_called, MAX_SAMPLED_IDS, prompt=[0])


def test_ancestral_sample_names_the_step_where_the_model_gave_nan():
    def nan_at_second_step(ids):
        logits = torch.zeros(ids.shape[0], ids.shape[1], 3)
        if ids.shape[1] == 2:  # the prompt of one token plus one generated token: step 1
            logits[..., 0] = math.nan
        return logits

    message = "model's next-token logits at step 1 must hold finite numbers or -inf, got nan at index (0, 0)"
    with pytest.raises(NonFiniteError, match=exactly(message)):
        ancestral_sample(nan_at_second_step, 3, prompt=[0])


def test_ancestral_sample_applies_top_p_at_every_step():
    """p = 0.6, 0.3, 0.1 at every step: top_p = 0.5 is reached by token 0 alone, so every token is 0."""

    def fixed(ids):
        return torch.tensor([0.6, 0.3, 0.1]).log().expand(ids.shape[0], ids.shape[1], 3)

    samples = ancestral_sample(
        fixed, 2, prompt=[0], top_p=0.5, num_samples=300, generator=torch.Generator().manual_seed(0)
    )
    assert samples.tolist() == [[0, 0]] * 300


# ---------------------------------------------------------------- distinct_n


@pytest.mark.parametrize(
    ("sequences", "shown"), [([5], "[5]"), (["ab"], "['ab']"), ([[0, 1], {2, 3}], "[[0, 1], {2, 3}]")]
)
def test_distinct_n_refuses_elements_that_are_not_token_lists(sequences, shown):
    with pytest.raises(TypeError, match=exactly(f"sequences must be a list of token-id lists, got {shown}")):
        distinct_n(sequences, 1)
