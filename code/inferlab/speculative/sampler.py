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

import inspect
from dataclasses import dataclass, field
from typing import Any

import torch

from inferlab.decoding import filter_logits
from inferlab.models import as_logits_fn, vocab_size_of


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
    return int(as_logits_fn(model)(input_ids[:, :1]).shape[-1])  # a plain callable: ask it once


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


# ----------------------------------------------------------------------------------------------
# The pieces both versions share.


# --8<-- [start:sample_token]
def sample_token(probs: torch.Tensor, generator: torch.Generator | None = None) -> int:
    """Return one index drawn from ``probs`` (any non-negative weights) with a single uniform draw."""
    # Inverse CDF with exactly one random number per token keeps two implementations in lockstep.
    cdf = probs.detach().double().cpu().cumsum(-1)
    u = torch.rand((), generator=generator, dtype=torch.float64)
    index = int(torch.searchsorted(cdf, u * cdf[-1], right=True))
    return min(index, cdf.numel() - 1)


# --8<-- [end:sample_token]


# --8<-- [start:next_token_probs]
def next_token_probs(logits: torch.Tensor, temperature: float, top_k: int | None, top_p: float | None) -> torch.Tensor:
    """Return the distribution a sampler draws from: softmax of logits after temperature, top-k, top-p."""
    return filter_logits(logits.float(), temperature, top_k, top_p).softmax(dim=-1)


# --8<-- [end:next_token_probs]


# --8<-- [start:verify]
def verify_drafts(
    p_rows: torch.Tensor, q_rows: torch.Tensor, drafts: list[int], generator: torch.Generator | None = None
) -> tuple[list[int], int, list[float]]:
    """Return (tokens kept, drafts accepted, acceptance probabilities) for one round of verification.

    ``p_rows[i]`` and ``q_rows[i]`` are the target's and the draft's distributions for the i-th drafted
    token; ``p_rows`` has one extra row, for the token after the last draft.
    """
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
            logits = draft_fn(torch.tensor([tokens + drafts]))[0, -1]
            if temperature == 0:
                drafts.append(int(logits.argmax()))
            else:
                q_rows.append(next_token_probs(logits, temperature, top_k, top_p))
                drafts.append(sample_token(q_rows[-1], generator))
        # 2. the target scores every draft, and the position after them, in one call
        target_logits = target_fn(torch.tensor([tokens + drafts]))[0, -(n_draft + 1) :]
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
    check_same_vocabulary(target, draft, input_ids)


# ----------------------------------------------------------------------------------------------
# The fast version: each model keeps a KV cache and is only fed the tokens it has not seen.


def _is_hf_model(model: Any) -> bool:
    return hasattr(model, "get_output_embeddings") and hasattr(model, "config")


class IncrementalModel:
    """A model that remembers the tokens it has already read (in a KV cache) and reads only new ones.

    A plain logits function has no cache; it re-reads the whole sequence but returns the same rows,
    so the decoders below work unchanged on the small table models of the tests and guides.
    """

    def __init__(self, model: Any):
        self.model = model
        self.hf = _is_hf_model(model)
        self.logits_fn = None if self.hf else as_logits_fn(model)
        self.cache = None
        self.seen = 0  # tokens whose keys and values are in the cache
        self.calls = 0
        # transformers 5.x renamed the forward argument ``past_key_values`` to ``cache``.
        self.cache_arg = (
            "cache" if self.hf and "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        )

    def hf_forward(self, new_ids: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        """Run the Hugging Face model on new tokens with the cache; return float logits (new, vocab)."""
        from transformers import DynamicCache

        if self.cache is None:
            self.cache = DynamicCache(config=self.model.config)
        # inference_mode, not no_grad: it skips autograd's bookkeeping entirely, which halves the
        # bundled draft's step time on a CPU (its tensors are tiny; the bookkeeping is not).
        with torch.inference_mode():
            out = self.model(
                input_ids=new_ids.to(self.model.device), use_cache=True, **{self.cache_arg: self.cache}, **kwargs
            )
        return out.logits[0].float()

    def new_logits(self, ids: torch.Tensor) -> torch.Tensor:
        """Return the logits rows, shape (new, vocab), for the tokens of ``ids`` not seen before."""
        if ids.shape[1] <= self.seen:
            raise RuntimeError("every call must bring at least one token the model has not seen")
        self.calls += 1
        if self.hf:
            logits = self.hf_forward(ids[:, self.seen :])
        else:
            logits = self.logits_fn(ids)[0, self.seen :].float()
        self.seen = ids.shape[1]
        return logits

    def rollback(self, length: int) -> None:
        """Forget every token after the first ``length`` (the drafts the target rejected)."""
        if self.seen > length:
            if self.cache is not None:
                with torch.inference_mode():  # the cache's tensors were made in inference mode
                    self.cache.crop(length - self.seen)  # a negative count: remove that many positions
            self.seen = length


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
    target_model, draft_model = IncrementalModel(target), IncrementalModel(draft)
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
