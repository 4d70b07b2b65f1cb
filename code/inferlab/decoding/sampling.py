"""Sampling strategies: temperature, top-k, top-p (nucleus) and ancestral sampling.

Each filter takes logits of shape ``(..., vocab)`` and returns logits of the same shape in which
the tokens it rules out are set to ``-inf`` (so a softmax gives them probability exactly 0). The
three filters reproduce Hugging Face's ``TemperatureLogitsWarper``, ``TopKLogitsWarper`` and
``TopPLogitsWarper`` exactly, ties and ``-inf`` included, and :func:`filter_logits` applies them
in the order ``generate`` does: temperature, then top-k, then top-p.

References: temperature (Ackley, Hinton and Sejnowski 1985; Hinton et al. 2015), top-k (Fan, Lewis
and Dauphin 2018, "Hierarchical Neural Story Generation"), top-p / nucleus (Holtzman et al. 2020,
"The Curious Case of Neural Text Degeneration", section 3.1); distinct-n (Li et al. 2016, "A
Diversity-Promoting Objective Function for Neural Conversation Models").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from inferlab.checks import (
    NonFiniteError,
    require_finite,
    require_int,
    require_number,
    require_size,
    require_tensor,
    require_token_ids,
)
from inferlab.models import as_logits_fn

MAX_SAMPLED_IDS = 2**27  # 1 GiB of int64 ids: more samples than that is a mistake, not a lab


def check_filter_args(
    temperature: float,
    top_k: int | None,
    top_p: float | None,
    min_p: float | None = None,
    typical_p: float | None = None,
    epsilon: float | None = None,
    eta: float | None = None,
    min_tokens_to_keep: int = 1,
) -> None:
    """Raise ValueError/TypeError for a sampling setting outside its allowed range (None = filter off)."""
    try:
        require_number(temperature, "temperature", minimum=0, min_open=True)
    except ValueError as error:
        raise ValueError(f"{error}; for temperature 0 use greedy decoding (argmax)") from None
    if top_k is not None:
        require_int(top_k, "top_k", minimum=1)
    if top_p is not None:
        require_number(top_p, "top_p", minimum=0, maximum=1, min_open=True)
    if min_p is not None:
        require_number(min_p, "min_p", minimum=0, maximum=1)
    for name, value in (("typical_p", typical_p), ("epsilon", epsilon), ("eta", eta)):
        if value is not None:
            require_number(value, name, minimum=0, maximum=1, min_open=True, max_open=True)
    require_int(min_tokens_to_keep, "min_tokens_to_keep", minimum=1)


def check_logits(logits: torch.Tensor, name: str = "logits") -> None:
    """Raise unless logits is a floating tensor of shape (..., vocab >= 1)."""
    require_tensor(logits, name)
    if logits.dim() < 1:
        raise ValueError(f"{name} must have shape (..., vocab), got a 0-dim tensor")
    if not logits.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got {logits.dtype}")
    if logits.shape[-1] < 1:
        raise ValueError(f"{name} must have a vocabulary axis of size >= 1, got shape {tuple(logits.shape)}")


def check_samplable(logits: torch.Tensor, name: str = "logits") -> None:
    """Raise NonFiniteError for NaN or +inf logits, or a row with no finite logit: no distribution to draw from."""
    require_finite(logits, name, allow_negative_infinity=True)
    empty = ~torch.isfinite(logits).any(dim=-1)
    if empty.any():
        row = tuple(int(i) for i in empty.nonzero()[0])
        raise NonFiniteError(
            f"{name} must give every row at least one finite logit, got a row of only -inf at {row}: "
            "every token is ruled out, so there is nothing to sample"
        )


# --8<-- [start:temperature]
def apply_temperature(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Return logits / temperature: below 1 sharpens the softmax, above 1 flattens it."""
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not 0 < temperature < float("inf"):
        raise ValueError(f"temperature must be > 0 and finite (for 0 use greedy decoding, argmax), got {temperature!r}")
    # softmax(z / t): as t -> 0 all mass goes to the argmax, as t -> infinity it becomes uniform.
    return logits / temperature


# --8<-- [end:temperature]


# --8<-- [start:top_k]
def top_k_filter(logits: torch.Tensor, k: int, min_tokens_to_keep: int = 1) -> torch.Tensor:
    """Return logits with every token scoring below the k-th largest set to -inf."""
    for name, value in (("k", k), ("min_tokens_to_keep", min_tokens_to_keep)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    k = min(max(k, min_tokens_to_keep), logits.shape[-1])  # more tokens than exist: keep them all
    kth_largest = torch.topk(logits, k, dim=-1).values[..., -1:]
    # "Below the k-th value", not "outside the top-k indices": a tie with the k-th token survives.
    return logits.masked_fill(logits < kth_largest, float("-inf"))


# --8<-- [end:top_k]


# --8<-- [start:top_p]
def top_p_filter(logits: torch.Tensor, p: float, min_tokens_to_keep: int = 1) -> torch.Tensor:
    """Return logits keeping the most probable tokens whose total probability first reaches p."""
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p <= 1:
        raise ValueError(f"p must be a number in (0, 1], got {p!r}")
    if isinstance(min_tokens_to_keep, bool) or not isinstance(min_tokens_to_keep, int) or min_tokens_to_keep < 1:
        raise ValueError(f"min_tokens_to_keep must be an integer >= 1, got {min_tokens_to_keep!r}")
    # Walk the tokens from least to most probable: a token may go while the mass of everything
    # dropped so far (it included) stays <= 1 - p, so what is kept still holds at least p.
    ascending, order = torch.sort(logits, dim=-1, descending=False)
    tail_mass = ascending.softmax(dim=-1).cumsum(dim=-1)
    drop_sorted = tail_mass <= 1 - p
    drop_sorted[..., -min_tokens_to_keep:] = False  # the most probable token(s) always stay
    drop = drop_sorted.scatter(-1, order, drop_sorted)  # back to vocabulary order
    return logits.masked_fill(drop, float("-inf"))


# --8<-- [end:top_p]


# --8<-- [start:truncation]
def check_cutoff(name: str, value: float, min_tokens_to_keep: int, closed: bool = False) -> None:
    """Raise ValueError unless value is in (0, 1) ([0, 1] if closed) and min_tokens_to_keep is an integer >= 1."""
    number = not isinstance(value, bool) and isinstance(value, (int, float))
    if not number or not (0 <= value <= 1 if closed else 0 < value < 1):
        raise ValueError(f"{name} must be a number in {'[0, 1]' if closed else '(0, 1)'}, got {value!r}")
    if isinstance(min_tokens_to_keep, bool) or not isinstance(min_tokens_to_keep, int) or min_tokens_to_keep < 1:
        raise ValueError(f"min_tokens_to_keep must be an integer >= 1, got {min_tokens_to_keep!r}")


def keep_at_least(drop: torch.Tensor, logits: torch.Tensor, min_tokens_to_keep: int) -> torch.Tensor:
    """Return ``drop`` with the ``min_tokens_to_keep`` highest logits of each row spared."""
    keep = min(min_tokens_to_keep, logits.shape[-1])
    return drop.scatter(-1, torch.topk(logits, keep, dim=-1).indices, False)


def min_p_filter(logits: torch.Tensor, min_p: float, min_tokens_to_keep: int = 1) -> torch.Tensor:
    """Return logits keeping the tokens at least ``min_p`` times as probable as the most probable one.

    Min-p sampling (Nguyen et al. 2024): the cut-off follows the model's confidence, strict when one
    token dominates and loose when many are plausible.
    """
    check_cutoff("min_p", min_p, min_tokens_to_keep, closed=True)
    probs = logits.softmax(dim=-1)
    drop = probs < min_p * probs.amax(dim=-1, keepdim=True)
    return logits.masked_fill(keep_at_least(drop, probs, min_tokens_to_keep), float("-inf"))


def typical_filter(logits: torch.Tensor, typical_p: float, min_tokens_to_keep: int = 1) -> torch.Tensor:
    """Return logits keeping the tokens whose surprise is closest to the entropy, until they hold typical_p.

    Locally typical sampling (Meister et al. 2023): a token is "typical" when -log p(token) is near
    the expected surprise H = -sum p log p; the most typical tokens are kept, as in top-p.
    """
    check_cutoff("typical_p", typical_p, min_tokens_to_keep)
    log_probs = logits.log_softmax(dim=-1)
    entropy = -(log_probs * log_probs.exp()).nansum(dim=-1, keepdim=True)  # nansum: 0 * -inf terms
    distance = (-log_probs - entropy).abs()
    ordered, order = torch.sort(distance, dim=-1)
    running_mass = logits.gather(-1, order).softmax(dim=-1).cumsum(dim=-1)
    # The last kept token is the first whose running mass reaches typical_p; ties with it stay too.
    last = (running_mass < typical_p).sum(dim=-1, keepdim=True).clamp(max=logits.shape[-1] - 1)
    drop_sorted = ordered > ordered.gather(-1, last)
    drop_sorted[..., :min_tokens_to_keep] = False  # the most typical token(s) always stay
    return logits.masked_fill(drop_sorted.scatter(-1, order, drop_sorted), float("-inf"))


def epsilon_filter(logits: torch.Tensor, epsilon: float, min_tokens_to_keep: int = 1) -> torch.Tensor:
    """Return logits without the tokens of probability below ``epsilon`` (Hewitt et al. 2022)."""
    check_cutoff("epsilon", epsilon, min_tokens_to_keep)
    drop = logits.softmax(dim=-1) < epsilon
    return logits.masked_fill(drop & ~kept_by_top_k(logits, min_tokens_to_keep), float("-inf"))


def eta_filter(logits: torch.Tensor, eta: float, min_tokens_to_keep: int = 1) -> torch.Tensor:
    """Return logits without the tokens below min(eta, sqrt(eta) * exp(-entropy)) (Hewitt et al. 2022).

    Eta sampling lowers the epsilon cut-off when the distribution is spread out (high entropy), so a
    flat distribution keeps more of its tail than a peaked one.
    """
    check_cutoff("eta", eta, min_tokens_to_keep)
    probs = logits.softmax(dim=-1)
    log_probs = logits - logits.logsumexp(dim=-1, keepdim=True)
    # H = -sum p log p; clamping log p at the dtype's lowest value makes a 0 * log 0 term 0, not NaN.
    entropy = -(log_probs.clamp(min=torch.finfo(logits.dtype).min) * log_probs.softmax(dim=-1)).sum(dim=-1)
    eta_tensor = torch.tensor(eta, device=logits.device)  # float32, as transformers computes it
    cutoff = torch.minimum(eta_tensor, eta_tensor.sqrt() * torch.exp(-entropy))[..., None]
    drop = probs < cutoff
    return logits.masked_fill(drop & ~kept_by_top_k(logits, min_tokens_to_keep), float("-inf"))


def kept_by_top_k(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Return True where a token scores at least the k-th largest logit of its row (ties included)."""
    k = min(k, logits.shape[-1])
    return logits >= torch.topk(logits, k, dim=-1).values[..., -1:]


# --8<-- [end:truncation]


# --8<-- [start:filter_logits]
def filter_logits(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    min_p: float | None = None,
    typical_p: float | None = None,
    epsilon: float | None = None,
    eta: float | None = None,
    min_tokens_to_keep: int = 1,
) -> torch.Tensor:
    """Return logits after temperature, top-k, top-p, min-p, typical, epsilon and eta, in that order.

    Ruled-out tokens become -inf; None leaves a filter off. NaN logits pass through as NaN (the way
    transformers' warpers treat them): the samplers refuse them, since no distribution has them.
    """
    check_filter_args(temperature, top_k, top_p, min_p, typical_p, epsilon, eta, min_tokens_to_keep)
    if temperature != 1.0:
        logits = apply_temperature(logits, temperature)
    if top_k is not None:
        logits = top_k_filter(logits, top_k, min_tokens_to_keep)
    if top_p is not None and top_p < 1.0:
        logits = top_p_filter(logits, top_p, min_tokens_to_keep)
    if min_p is not None:
        logits = min_p_filter(logits, min_p, min_tokens_to_keep)
    if typical_p is not None:
        logits = typical_filter(logits, typical_p, min_tokens_to_keep)
    if epsilon is not None:
        logits = epsilon_filter(logits, epsilon, min_tokens_to_keep)
    if eta is not None:
        logits = eta_filter(logits, eta, min_tokens_to_keep)
    return logits


# --8<-- [end:filter_logits]


def filtered_probs(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    **filters: Any,
) -> torch.Tensor:
    """Return the probabilities a sampler with these settings draws from (softmax of the filtered logits).

    ``filters`` are :func:`filter_logits`' top_k, top_p, min_p, typical_p, epsilon, eta and
    min_tokens_to_keep. Raises NonFiniteError for NaN or +inf logits, or a row of only -inf: those
    have no distribution, and a NaN probability would only fail later, far from its cause.
    """
    check_logits(logits)
    check_filter_args(temperature, top_k, top_p, **filters)
    check_samplable(logits)
    logits = logits.float()
    # softmax is unchanged by shifting a row, and shifting first keeps (z - max) / t finite even for
    # a tiny temperature, where z / t alone would overflow to inf and give inf - inf = NaN.
    shifted = logits - logits.amax(dim=-1, keepdim=True)
    return filter_logits(shifted, temperature, top_k, top_p, **filters).softmax(dim=-1)


def sample_next(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    **filters: Any,
) -> torch.Tensor:
    """Return one token id per row of ``(batch, vocab)`` logits, drawn from the filtered distribution."""
    check_logits(logits)
    if logits.dim() != 2:
        raise ValueError(f"logits must have shape (batch, vocab), got {tuple(logits.shape)}")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    probs = filtered_probs(logits, temperature, top_k=top_k, top_p=top_p, **filters)
    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)


def input_vocab_size(model: Any) -> int | None:
    """Return how many token ids a model accepts as input, or None when it does not say."""
    if hasattr(model, "bos_id") and isinstance(getattr(model, "vocab_size", None), int):
        return model.vocab_size + 1  # a table model also reads its start symbol, id V
    embeddings = getattr(model, "get_input_embeddings", None)
    if callable(embeddings) and hasattr(embeddings(), "weight"):
        return int(embeddings().weight.shape[0])
    known = getattr(model, "vocab_size", None)
    return known if isinstance(known, int) and not isinstance(known, bool) else None


def start_ids(model: Any, prompt: Sequence[int] | torch.Tensor | None, name: str = "prompt") -> torch.Tensor:
    """Return the prompt as a (1, length) LongTensor; a table model's start symbol when prompt is None."""
    if prompt is None:
        bos = getattr(model, "bos_id", None)
        if bos is None:
            raise ValueError(f"{name} is required for a model without a start symbol (give a list of token ids)")
        return torch.tensor([[bos]], dtype=torch.long)
    if isinstance(prompt, torch.Tensor) and prompt.dim() == 2 and prompt.shape[0] == 1:
        prompt = prompt[0]  # a (1, length) batch of one
    ids = require_token_ids(prompt, name, input_vocab_size(model))
    return torch.tensor([ids], dtype=torch.long)


def check_table_steps(model: Any, prompt_length: int, length: int) -> None:
    """Raise when a fixed-length table model has no table for the last step a generation would need."""
    max_length = getattr(model, "max_length", None)
    if hasattr(model, "bos_id") and isinstance(max_length, int):
        steps_in_prompt = prompt_length - 1  # the prompt starts with the start symbol, not a step
        if steps_in_prompt + length > max_length:
            raise ValueError(
                f"length must be <= {max_length - steps_in_prompt} for this {type(model).__name__} "
                f"({max_length} steps, {steps_in_prompt} of them in the prompt), got {length}"
            )


def check_model_logits(logits: torch.Tensor, step: int) -> None:
    """Raise NonFiniteError when a model's next-token logits hold NaN or +inf: its output cannot be ranked."""
    check_samplable(logits, f"model's next-token logits at step {step}")


def check_length(length: int, name: str = "length") -> None:
    """Raise when a number of tokens to generate is not an integer >= 1."""
    if isinstance(length, bool) or not isinstance(length, int):
        raise TypeError(f"{name} must be an integer >= 1, got {length!r}")
    if length < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {length}")


# --8<-- [start:ancestral]
def ancestral_sample(
    model: Any,
    length: int,
    prompt: Sequence[int] | torch.Tensor | None = None,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    num_samples: int = 1,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Return (num_samples, length) new tokens, each drawn from the model given the ones before it."""
    check_length(length)
    check_length(num_samples, "num_samples")
    check_filter_args(temperature, top_k, top_p)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    logits_fn = as_logits_fn(model)
    prompt_ids = start_ids(model, prompt)
    check_table_steps(model, prompt_ids.shape[1], length)
    require_size(num_samples * (prompt_ids.shape[1] + length), "num_samples", MAX_SAMPLED_IDS, "token ids in memory")
    ids = prompt_ids.repeat(num_samples, 1)
    prompt_length = ids.shape[1]
    for step in range(length):
        # Only the last position's logits matter: they are p(next token | everything so far).
        next_logits = logits_fn(ids)[:, -1, :].float().cpu()
        check_model_logits(next_logits, step)
        next_token = sample_next(next_logits, temperature, top_k, top_p, generator)
        ids = torch.cat([ids, next_token.unsqueeze(-1).to(ids.device)], dim=1)
    return ids[:, prompt_length:]


# --8<-- [end:ancestral]


# --8<-- [start:distinct_n]
def distinct_n(sequences: Sequence[Sequence[int]], n: int) -> float:
    """Return distinct n-grams / all n-grams over the sequences (1.0: no n-gram repeats)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    is_list = isinstance(sequences, Sequence) and not isinstance(sequences, (str, bytes))
    if not is_list or not all(isinstance(seq, Sequence) and not isinstance(seq, str) for seq in sequences):
        raise TypeError(f"sequences must be a list of token-id lists, got {sequences!r:.60}")
    all_ngrams = [tuple(seq[i : i + n]) for seq in sequences for i in range(len(seq) - n + 1)]
    if not all_ngrams:
        raise ValueError(f"no sequence is long enough to hold an {n}-gram")
    return len(set(all_ngrams)) / len(all_ngrams)


# --8<-- [end:distinct_n]
