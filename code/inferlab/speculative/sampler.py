"""Speculative sampling (Leviathan et al. 2022, Algorithm 1; Chen et al. 2023, Algorithm 2).

A small *draft* model proposes ``gamma`` tokens one by one; the large *target* model scores all of
them in one forward pass; each drafted token ``x`` is kept with probability ``min(1, p(x)/q(x))``;
the first rejected one is replaced by a draw from the residual ``norm(max(0, p - q))``; when all
are kept, the target's last row gives one bonus token for free. The output follows the target's
distribution ``p`` exactly, whatever the draft is: the draft only changes the speed.

Two versions live here. :func:`speculative_sample_reference` is the algorithm as written in the
papers: every model call sees the whole sequence again. :func:`speculative_sample` is the one to
use: both models keep a KV cache and only see the tokens that are new to them; on a rejection the
caches are cut back to the last accepted token. Both consume the random stream in the same order
(one uniform per drafted token, one per acceptance test, one for the final token), so under the
same ``torch.Generator`` they produce the same tokens draw for draw.

Temperature 0 means greedy verification: the draft proposes its argmax, the target keeps drafts
while its own argmax agrees, and the output equals plain greedy decoding of the target.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from inferlab.decoding import filter_logits
from inferlab.models import as_logits_fn, vocab_size_of
from inferlab.speculative.runner import IncrementalModel, check_logits


# --8<-- [start:result]
@dataclass
class SpeculativeResult:
    """What a speculative decoder produced, and how much drafting and checking it took."""

    sequences: torch.Tensor  # (1, prompt + new) token ids, prompt included
    prompt_length: int
    accepted: int = 0  # drafted tokens the target kept
    drafted: int = 0  # drafted tokens proposed to the target
    target_calls: int = 0  # target forward passes
    draft_calls: int = 0  # draft forward passes
    rounds: int = 0  # draft-then-verify rounds
    accepted_per_round: list[int] = field(default_factory=list)
    # For every draft the target looked at (up to and including a rejection): the probability it
    # had of being accepted, sum_x min(p(x), q(x)) (1 or 0 under greedy verification).
    acceptance_probs: list[float] = field(default_factory=list)

    @property
    def new_tokens(self) -> torch.Tensor:
        """Return the generated tokens, prompt removed, shape (1, new)."""
        return self.sequences[:, self.prompt_length :]

    @property
    def alpha(self) -> float:
        """Return the acceptance rate accepted / drafted (nan when nothing was drafted)."""
        return self.accepted / self.drafted if self.drafted else float("nan")

    @property
    def alpha_per_token(self) -> float:
        """Return Leviathan et al.'s alpha: the mean acceptance probability of the drafts the target checked."""
        if not self.acceptance_probs:
            return float("nan")
        return sum(self.acceptance_probs) / len(self.acceptance_probs)

    @property
    def tokens_per_target_call(self) -> float:
        """Return generated tokens per target forward pass (1.0 for plain decoding)."""
        return self.new_tokens.shape[1] / self.target_calls if self.target_calls else float("nan")


# --8<-- [end:result]


# ----------------------------------------------------------------------------------------------
# Checking the arguments (before any work).


def model_vocab_size(model: Any, input_ids: torch.Tensor) -> int:
    """Return how many logits a model or logits function produces per position."""
    if hasattr(model, "get_output_embeddings") and hasattr(model, "config"):
        return vocab_size_of(model)
    if hasattr(model, "vocab_size"):
        return int(model.vocab_size)
    # A plain callable: ask it once, about token 0 (a prompt token might be the invalid one).
    return int(as_logits_fn(model)(torch.zeros((1, 1), dtype=torch.long)).shape[-1])


def check_decode_args(input_ids: Any, max_new_tokens: Any) -> None:
    """Raise TypeError/ValueError for a prompt or token budget these decoders cannot take."""
    if not isinstance(input_ids, torch.Tensor) or input_ids.dtype != torch.long:
        raise TypeError(
            f"input_ids must be a LongTensor of shape (1, length), got {type(input_ids).__name__}"
            + (f" of dtype {input_ids.dtype}" if isinstance(input_ids, torch.Tensor) else "")
        )
    if input_ids.dim() != 2 or input_ids.shape[1] < 1:
        raise ValueError(f"input_ids must have shape (1, length >= 1), got {tuple(input_ids.shape)}")
    if input_ids.shape[0] != 1:
        raise ValueError(
            f"input_ids batch size must be 1, got {input_ids.shape[0]}: each sequence accepts a different "
            "number of drafts per round, so run sequences one at a time"
        )
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be an integer >= 0, got {max_new_tokens!r}")


def check_gamma(gamma: Any, name: str = "gamma") -> None:
    """Raise ValueError unless gamma is an integer >= 1."""
    if isinstance(gamma, bool) or not isinstance(gamma, int) or gamma < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {gamma!r}")


def check_sampling_args(temperature: Any, top_k: Any, top_p: Any, generator: Any) -> None:
    """Raise TypeError/ValueError for sampling settings outside the allowed range."""
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
        raise TypeError(f"temperature must be a number >= 0 (0 means greedy), got {temperature!r}")
    if not temperature >= 0:
        raise ValueError(f"temperature must be >= 0 (0 means greedy), got {temperature}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise ValueError(f"top_k must be an integer >= 1 or None, got {top_k!r}")
    if top_p is not None and (isinstance(top_p, bool) or not isinstance(top_p, (int, float)) or not 0 < top_p <= 1):
        raise ValueError(f"top_p must be a number in (0, 1] or None, got {top_p!r}")
    if generator is not None and (not isinstance(generator, torch.Generator) or generator.device.type != "cpu"):
        raise TypeError(f"generator must be None or a CPU torch.Generator, got {generator!r}")


def check_same_vocabulary(target: Any, draft: Any, input_ids: torch.Tensor) -> None:
    """Raise ValueError naming both sizes when target and draft score different vocabularies."""
    target_vocab, draft_vocab = model_vocab_size(target, input_ids), model_vocab_size(draft, input_ids)
    if target_vocab != draft_vocab:
        raise ValueError(
            f"target and draft vocabularies differ: target has {target_vocab} logits, draft has "
            f"{draft_vocab}; the draft must propose tokens of the target's vocabulary"
        )


def check_token_ids(input_ids: torch.Tensor, vocab_size: int) -> None:
    """Raise ValueError unless every prompt id lies in 0..vocab_size-1 (an embedding row exists for it)."""
    low, high = int(input_ids.min()), int(input_ids.max())
    if low < 0 or high >= vocab_size:
        bad = low if low < 0 else high
        raise ValueError(f"input_ids must be token ids in 0..{vocab_size - 1} (the model's vocabulary), got {bad}")


def check_positions(models: dict[str, Any], input_ids: torch.Tensor, max_new_tokens: int, extra: int = 0) -> None:
    """Raise ValueError when prompt + max_new_tokens (+ extra cache slots) exceed a model's positions."""
    needed = input_ids.shape[1] + max_new_tokens + extra
    for who, model in models.items():
        limit = IncrementalModel(model).max_positions
        if limit is not None and needed > limit:
            slots = f" + {extra} tree slots" if extra else ""
            raise ValueError(
                f"prompt length {input_ids.shape[1]} + max_new_tokens {max_new_tokens}{slots} = {needed} exceeds the "
                f"{who}'s {limit} positions; shorten the prompt or lower max_new_tokens to at most "
                f"{limit - input_ids.shape[1] - extra}"
            )


def check_models_fit(
    target: Any, draft: Any | None, input_ids: torch.Tensor, max_new_tokens: int, extra: int = 0
) -> None:
    """Raise ValueError unless the models share a vocabulary that holds the prompt, and have the positions."""
    if draft is not None:
        check_same_vocabulary(target, draft, input_ids)
    check_token_ids(input_ids, model_vocab_size(target, input_ids))
    models = {"target": target} if draft is None else {"target": target, "draft": draft}
    check_positions(models, input_ids, max_new_tokens, extra)


# ----------------------------------------------------------------------------------------------
# The pieces both versions share.


def check_probabilities(probs: Any, name: str) -> None:
    """Raise ValueError unless ``probs`` is a 1-D tensor of finite, non-negative weights with a positive sum."""
    if not isinstance(probs, torch.Tensor) or probs.dim() != 1 or probs.numel() == 0:
        raise ValueError(
            f"{name} must be a non-empty 1-D tensor of probabilities, got {getattr(probs, 'shape', probs)!r}"
        )
    if not torch.isfinite(probs).all():
        raise ValueError(f"{name} must be finite, got NaN or inf (did the model or the temperature overflow?)")
    if (probs < 0).any() or not probs.sum() > 0:
        raise ValueError(
            f"{name} must be non-negative with a positive sum, got min {float(probs.min())}, sum {float(probs.sum())}"
        )


# --8<-- [start:sample_token]
def sample_token(probs: torch.Tensor, generator: torch.Generator | None = None) -> int:
    """Return one index drawn from ``probs`` (any non-negative weights) with a single uniform draw."""
    check_probabilities(probs, "probs")
    # Inverse CDF with exactly one random number per token keeps two implementations in lockstep.
    cdf = probs.detach().double().cpu().cumsum(-1)
    u = torch.rand((), generator=generator, dtype=torch.float64)
    index = int(torch.searchsorted(cdf, u * cdf[-1], right=True))
    return min(index, cdf.numel() - 1)


# --8<-- [end:sample_token]


# --8<-- [start:next_token_probs]
def next_token_probs(logits: torch.Tensor, temperature: float, top_k: int | None, top_p: float | None) -> torch.Tensor:
    """Return the distribution a sampler draws from: softmax of logits after temperature, top-k, top-p."""
    # Softmax ignores a shift, so subtract the max first: then (logits - max) / temperature is <= 0 and
    # never overflows, even at temperature 1e-39, where the distribution correctly becomes the argmax.
    shifted = logits.float() - logits.float().max(dim=-1, keepdim=True).values
    if torch.isnan(shifted).any():
        raise ValueError("logits must not be NaN or all -inf: no distribution has them")
    return filter_logits(shifted, temperature, top_k, top_p).softmax(dim=-1)


# --8<-- [end:next_token_probs]


def check_verify_args(p_rows: Any, q_rows: Any, drafts: Any) -> None:
    """Raise ValueError unless there is one q row per draft, one p row more, and every draft is a valid id."""
    if not isinstance(drafts, (list, tuple)):
        raise TypeError(f"drafts must be a list of token ids, got {type(drafts).__name__}")
    for name, rows, count in (("p_rows", p_rows, len(drafts) + 1), ("q_rows", q_rows, len(drafts))):
        if len(rows) < count:  # a 2-D tensor or a list of 1-D rows
            raise ValueError(f"{name} must hold at least {count} rows for {len(drafts)} drafts, got {len(rows)}")
        for i in range(count):
            check_probabilities(rows[i], f"{name}[{i}]")
    vocab = p_rows.shape[-1]
    for token in drafts:
        if isinstance(token, bool) or not isinstance(token, int) or not 0 <= token < vocab:
            raise ValueError(f"drafts must be token ids in 0..{vocab - 1}, got {token!r}")


# --8<-- [start:verify]
def verify_drafts(
    p_rows: torch.Tensor, q_rows: torch.Tensor, drafts: list[int], generator: torch.Generator | None = None
) -> tuple[list[int], int, list[float]]:
    """Return (tokens kept, drafts accepted, acceptance probabilities) for one round of verification.

    ``p_rows[i]`` and ``q_rows[i]`` are the target's and the draft's distributions for the i-th drafted
    token; ``p_rows`` has one extra row, for the token after the last draft.
    """
    check_verify_args(p_rows, q_rows, drafts)
    uniforms = torch.rand(len(drafts), generator=generator, dtype=torch.float64)
    kept, acceptance_probs = [], []
    for i, token in enumerate(drafts):
        p, q = p_rows[i].double().cpu(), q_rows[i].double().cpu()
        acceptance_probs.append(float(torch.minimum(p, q).sum()))
        # Keep with probability min(1, p/q); written without a division, q(token) > 0 as it was drawn.
        if uniforms[i] * q[token] < p[token]:
            kept.append(token)
            continue
        # Rejected: draw from the part of p that q under-covers, so the total comes out as exactly p.
        residual = (p - q).clamp(min=0.0)
        kept.append(sample_token(residual if residual.sum() > 0 else p, generator))
        return kept, i, acceptance_probs
    kept.append(sample_token(p_rows[len(drafts)], generator))  # all kept: a bonus token from p
    return kept, len(drafts), acceptance_probs


# --8<-- [end:verify]


# --8<-- [start:verify_greedy]
def verify_greedy(target_logits: torch.Tensor, drafts: list[int]) -> tuple[list[int], int]:
    """Return (tokens kept, drafts accepted): drafts are kept while they equal the target's argmax."""
    choices = target_logits.argmax(dim=-1).tolist()  # the target's greedy token at every position
    for i, token in enumerate(drafts):
        if token != choices[i]:
            return drafts[:i] + [choices[i]], i  # the target's own token replaces the first miss
    return drafts + [choices[len(drafts)]], len(drafts)


# --8<-- [end:verify_greedy]


# ----------------------------------------------------------------------------------------------
# The reference version: short, cache-free, the algorithm as the papers write it.


# --8<-- [start:reference]
def speculative_sample_reference(
    target: Any,
    draft: Any,
    input_ids: torch.Tensor,
    max_new_tokens: int,
    gamma: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> SpeculativeResult:
    """Return a speculative sample computed without caches: each model call re-reads the whole sequence."""
    validate(target, draft, input_ids, max_new_tokens, gamma, temperature, top_k, top_p, generator)
    target_fn, draft_fn = as_logits_fn(target), as_logits_fn(draft)
    tokens = input_ids[0].tolist()
    result = SpeculativeResult(input_ids, prompt_length=len(tokens))
    while len(tokens) - result.prompt_length < max_new_tokens:
        # Draft at most one token fewer than still needed: the target always adds one more.
        n_draft = min(gamma, max_new_tokens - (len(tokens) - result.prompt_length) - 1)
        drafts, q_rows = [], []
        for _ in range(n_draft):  # 1. the draft proposes, one token at a time
            logits = check_logits(draft_fn(torch.tensor([tokens + drafts]))[0, -1], "draft")
            if temperature == 0:
                drafts.append(int(logits.argmax()))
            else:
                q_rows.append(next_token_probs(logits, temperature, top_k, top_p))
                drafts.append(sample_token(q_rows[-1], generator))
        # 2. the target scores every draft, and the position after them, in one call
        target_logits = check_logits(target_fn(torch.tensor([tokens + drafts]))[0, -(n_draft + 1) :], "target")
        if temperature == 0:  # 3. accept or reject
            kept, n_accepted = verify_greedy(target_logits, drafts)
            result.acceptance_probs += [1.0] * n_accepted + [0.0] * (n_accepted < n_draft)
        else:
            p_rows = next_token_probs(target_logits, temperature, top_k, top_p)
            kept, n_accepted, probs = verify_drafts(p_rows, q_rows, drafts, generator)
            result.acceptance_probs += probs
        tokens += kept
        result.accepted += n_accepted
        result.drafted += n_draft
        result.accepted_per_round.append(n_accepted)
        result.rounds += 1
        result.draft_calls += n_draft
        result.target_calls += 1
    result.sequences = torch.tensor([tokens], dtype=torch.long)
    return result


# --8<-- [end:reference]


def validate(
    target: Any,
    draft: Any,
    input_ids: Any,
    max_new_tokens: Any,
    gamma: Any,
    temperature: Any,
    top_k: Any,
    top_p: Any,
    generator: Any,
) -> None:
    """Raise a clear error for any argument the speculative samplers cannot take."""
    check_decode_args(input_ids, max_new_tokens)
    check_gamma(gamma)
    check_sampling_args(temperature, top_k, top_p, generator)
    check_models_fit(target, draft, input_ids, max_new_tokens)


# ----------------------------------------------------------------------------------------------
# The fast version: each model keeps a KV cache and is only fed the tokens it has not seen.


# --8<-- [start:fast]
def speculative_sample(
    target: Any,
    draft: Any,
    input_ids: torch.Tensor,
    max_new_tokens: int,
    gamma: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> SpeculativeResult:
    """Return a speculative sample whose tokens follow the target's distribution exactly (KV-cached)."""
    validate(target, draft, input_ids, max_new_tokens, gamma, temperature, top_k, top_p, generator)
    target_model, draft_model = IncrementalModel(target, "target"), IncrementalModel(draft, "draft")
    ids = input_ids.cpu()
    result = SpeculativeResult(ids, prompt_length=ids.shape[1])
    while ids.shape[1] - result.prompt_length < max_new_tokens:
        n_draft = min(gamma, max_new_tokens - (ids.shape[1] - result.prompt_length) - 1)
        drafts, q_rows = [], []
        for _ in range(n_draft):  # the draft reads only its unseen tokens: 1 or 2 per step
            logits = draft_model.new_logits(torch.cat([ids, torch.tensor([drafts], dtype=torch.long)], 1))[-1]
            if temperature == 0:
                drafts.append(int(logits.argmax()))
            else:
                q_rows.append(next_token_probs(logits, temperature, top_k, top_p))
                drafts.append(sample_token(q_rows[-1], generator))
        candidate = torch.cat([ids, torch.tensor([drafts], dtype=torch.long)], 1)
        target_logits = target_model.new_logits(candidate)[-(n_draft + 1) :]
        if temperature == 0:
            kept, n_accepted = verify_greedy(target_logits, drafts)
            result.acceptance_probs += [1.0] * n_accepted + [0.0] * (n_accepted < n_draft)
        else:
            p_rows = next_token_probs(target_logits, temperature, top_k, top_p)
            kept, n_accepted, probs = verify_drafts(p_rows, q_rows, drafts, generator)
            result.acceptance_probs += probs
        # Both caches keep the prompt and the accepted drafts; rejected drafts' keys/values go.
        target_model.rollback(ids.shape[1] + n_accepted)
        draft_model.rollback(ids.shape[1] + n_accepted)
        ids = torch.cat([ids, torch.tensor([kept], dtype=torch.long)], 1)
        result.accepted += n_accepted
        result.drafted += n_draft
        result.accepted_per_round.append(n_accepted)
        result.rounds += 1
    result.sequences = ids
    result.target_calls, result.draft_calls = target_model.calls, draft_model.calls
    return result


# --8<-- [end:fast]
