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

from inferlab.models import as_logits_fn


def check_filter_args(temperature: float, top_k: int | None, top_p: float | None) -> None:
    """Raise ValueError/TypeError for a temperature, top_k or top_p outside the allowed range."""
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
        raise TypeError(f"temperature must be a number > 0, got {temperature!r}")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}; for temperature 0 use greedy decoding (argmax)")
    if top_k is not None:
        if isinstance(top_k, bool) or not isinstance(top_k, int):
            raise TypeError(f"top_k must be an integer >= 1 or None, got {top_k!r}")
        if top_k < 1:
            raise ValueError(f"top_k must be an integer >= 1 or None, got {top_k}")
    if top_p is not None:
        if isinstance(top_p, bool) or not isinstance(top_p, (int, float)):
            raise TypeError(f"top_p must be a number in (0, 1] or None, got {top_p!r}")
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1] or None, got {top_p}")


# --8<-- [start:temperature]
def apply_temperature(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Return logits / temperature: below 1 sharpens the softmax, above 1 flattens it."""
    # softmax(z / t): as t -> 0 all mass goes to the argmax, as t -> infinity it becomes uniform.
    return logits / temperature


# --8<-- [end:temperature]


# --8<-- [start:top_k]
def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Return logits with every token scoring below the k-th largest set to -inf."""
    k = min(k, logits.shape[-1])  # asking for more tokens than exist keeps them all
    kth_largest = torch.topk(logits, k, dim=-1).values[..., -1:]
    # "Below the k-th value", not "outside the top-k indices": a tie with the k-th token survives.
    return logits.masked_fill(logits < kth_largest, float("-inf"))


# --8<-- [end:top_k]


# --8<-- [start:top_p]
def top_p_filter(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Return logits keeping the most probable tokens whose total probability first reaches p."""
    # Walk the tokens from least to most probable: a token may go while the mass of everything
    # dropped so far (it included) stays <= 1 - p, so what is kept still holds at least p.
    ascending, order = torch.sort(logits, dim=-1, descending=False)
    tail_mass = ascending.softmax(dim=-1).cumsum(dim=-1)
    drop_sorted = tail_mass <= 1 - p
    drop_sorted[..., -1] = False  # the most probable token always stays
    drop = drop_sorted.scatter(-1, order, drop_sorted)  # back to vocabulary order
    return logits.masked_fill(drop, float("-inf"))


# --8<-- [end:top_p]


# --8<-- [start:filter_logits]
def filter_logits(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> torch.Tensor:
    """Return logits after temperature, then top-k, then top-p; ruled-out tokens become -inf."""
    check_filter_args(temperature, top_k, top_p)
    if temperature != 1.0:
        logits = apply_temperature(logits, temperature)
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None and top_p < 1.0:
        logits = top_p_filter(logits, top_p)
    return logits


# --8<-- [end:filter_logits]


def filtered_probs(
    logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None
) -> torch.Tensor:
    """Return the probabilities a sampler with these settings draws from (softmax of the filtered logits)."""
    return filter_logits(logits.float(), temperature, top_k, top_p).softmax(dim=-1)


def sample_next(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Return one token id per row of ``(batch, vocab)`` logits, drawn from the filtered distribution."""
    if logits.dim() != 2:
        raise ValueError(f"logits must have shape (batch, vocab), got {tuple(logits.shape)}")
    probs = filtered_probs(logits, temperature, top_k, top_p)
    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)


def start_ids(model: Any, prompt: Sequence[int] | torch.Tensor | None) -> torch.Tensor:
    """Return the prompt as a (1, length) LongTensor; a table model's start symbol when prompt is None."""
    if prompt is None:
        bos = getattr(model, "bos_id", None)
        if bos is None:
            raise ValueError("prompt is required for a model without a start symbol (give a list of token ids)")
        return torch.tensor([[bos]], dtype=torch.long)
    ids = torch.as_tensor(prompt, dtype=torch.long)
    if ids.dim() == 2 and ids.shape[0] == 1:
        ids = ids[0]
    if ids.dim() != 1 or ids.numel() < 1:
        raise ValueError(f"prompt must be a non-empty list or 1-D tensor of token ids, got shape {tuple(ids.shape)}")
    return ids.unsqueeze(0)


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
    logits_fn = as_logits_fn(model)
    ids = start_ids(model, prompt).repeat(num_samples, 1)
    prompt_length = ids.shape[1]
    for _ in range(length):
        # Only the last position's logits matter: they are p(next token | everything so far).
        next_logits = logits_fn(ids)[:, -1, :].float().cpu()
        next_token = sample_next(next_logits, temperature, top_k, top_p, generator)
        ids = torch.cat([ids, next_token.unsqueeze(-1).to(ids.device)], dim=1)
    return ids[:, prompt_length:]


# --8<-- [end:ancestral]


# --8<-- [start:distinct_n]
def distinct_n(sequences: Sequence[Sequence[int]], n: int) -> float:
    """Return distinct n-grams / all n-grams over the sequences (1.0: no n-gram repeats)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    all_ngrams = [tuple(seq[i : i + n]) for seq in sequences for i in range(len(seq) - n + 1)]
    if not all_ngrams:
        raise ValueError(f"no sequence is long enough to hold an {n}-gram")
    return len(set(all_ngrams)) / len(all_ngrams)


# --8<-- [end:distinct_n]
