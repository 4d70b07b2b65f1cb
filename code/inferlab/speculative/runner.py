"""Run a model incrementally: feed it only the tokens it has not read yet, and take back rejected ones.

Speculative decoding reads a sequence that grows by several tokens per round and sometimes has to
forget the tail it just read (the drafts the target rejected). :class:`IncrementalModel` gives the
decoders one interface for that over three kinds of model:

- inferlab's own :class:`~inferlab.kvcache.LlamaDecoder`: keys and values go into one preallocated
  :class:`~inferlab.kvcache.generate.KVCache`; taking tokens back just moves its length, so no
  prefix is ever computed twice and nothing is copied (the fast path on a CPU);
- a Hugging Face causal LM: transformers' ``DynamicCache``, cut back with ``crop``;
- a plain logits function (the table models of the guides and tests): no cache at all, every call
  re-reads the whole sequence but returns the same rows.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from inferlab.kvcache.decoder import LlamaDecoder, fused_attention
from inferlab.models import as_logits_fn


def is_hf_model(model: Any) -> bool:
    """Return True for a Hugging Face model (it has an output embedding and a config)."""
    return hasattr(model, "get_output_embeddings") and hasattr(model, "config")


def check_logits(logits: torch.Tensor, who: str) -> torch.Tensor:
    """Return ``logits`` unchanged, or raise ValueError when a model produced NaN or +inf.

    -inf is allowed: table models write log 0 = -inf for tokens they rule out.
    """
    # One reduction finds both: the maximum is NaN if any entry is (torch.max propagates NaN), +inf
    # if any entry is, and every comparison with NaN is False. Two elementwise tests cost a draft
    # step of the bundled pair some 4% of its time; this costs under 1%.
    if logits.numel() and not bool(logits.max() < torch.inf):
        raise ValueError(f"the {who} returned NaN or +inf logits; no distribution has them (check its weights/inputs)")
    return logits


# --8<-- [start:decoder_hidden]
def decoder_hidden(
    decoder: LlamaDecoder,
    cache: Any,
    new_ids: torch.Tensor,
    positions: torch.Tensor | None = None,
    allowed: torch.Tensor | None = None,
) -> torch.Tensor:
    """Run new_ids (1, T) after the cached tokens; return every row's last hidden state (T, hidden).

    Keys and values are written at cache slots length.. length + T - 1. ``positions`` (default: the
    slots themselves) and ``allowed`` (default: causal) let a token tree give each node its depth
    and let it read only its own branch.
    """
    start = cache.length
    if positions is None:
        positions = torch.arange(start, start + new_ids.shape[1], device=new_ids.device)
    h = decoder.embed_ids(new_ids)
    for index, layer in enumerate(decoder.layers):
        q, k, v = layer.qkv(h, positions)
        keys, values = cache.store(index, start, k, v)
        h = layer.finish(h, fused_attention(q, keys, values, q_start=start, allowed=allowed))
    cache.length = start + new_ids.shape[1]
    return h[0]


# --8<-- [end:decoder_hidden]


class IncrementalModel:
    """A model that remembers the tokens it has already read (in a KV cache) and reads only new ones."""

    def __init__(self, model: Any, who: str = "model"):
        self.model = model
        self.who = who  # "target" or "draft", for error messages
        self.kind = "decoder" if isinstance(model, LlamaDecoder) else "hf" if is_hf_model(model) else "fn"
        self.logits_fn = as_logits_fn(model) if self.kind == "fn" else None
        self.cache: Any = None
        self.seen = 0  # tokens whose keys and values are in the cache
        self.calls = 0
        # transformers 5.x renamed the forward argument ``past_key_values`` to ``cache``.
        self.cache_arg = (
            "cache"
            if self.kind == "hf" and "cache" in inspect.signature(model.forward).parameters
            else "past_key_values"
        )

    @property
    def max_positions(self) -> int | None:
        """Return how many positions the model can read (None for a logits function: unknown)."""
        if self.kind == "decoder":
            return self.model.max_positions
        if self.kind == "hf":
            return getattr(self.model.config, "max_position_embeddings", None)
        return None

    def forward_new(
        self,
        new_ids: torch.Tensor,
        positions: torch.Tensor | None = None,
        allowed: torch.Tensor | None = None,
        project: bool = True,
    ) -> torch.Tensor:
        """Run new tokens after the cached ones (optionally with positions and a mask); return (new, vocab).

        ``project=False`` returns inferlab's decoder's last hidden states instead, for :meth:`project`
        to turn into logits only the rows a caller needs (other models always return logits).
        """
        if self.kind == "decoder":
            if self.cache is None:
                from inferlab.kvcache.generate import KVCache

                # The whole position range at once: a few MB for the bundled pair, and no step ever
                # has to grow (copy) the cache.
                self.cache = KVCache(self.model, 1, self.model.max_positions)
            with torch.inference_mode():
                hidden = decoder_hidden(self.model, self.cache, new_ids, positions, allowed)
            return self.project(hidden) if project else hidden
        return check_logits(self.hf_forward(new_ids, positions, allowed), self.who)

    def project(self, rows: torch.Tensor) -> torch.Tensor:
        """Return float logits for rows of ``forward_new(..., project=False)`` (already logits unless a decoder)."""
        if self.kind != "decoder":
            return rows
        with torch.inference_mode():
            return check_logits(self.model.final_logits(rows).float(), self.who)

    def hf_forward(
        self, new_ids: torch.Tensor, positions: torch.Tensor | None = None, allowed: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Run the Hugging Face model on new tokens with its cache; return float logits (new, vocab)."""
        from transformers import DynamicCache

        if self.cache is None:
            self.cache = DynamicCache(config=self.model.config)
        kwargs: dict[str, Any] = {}
        if positions is not None:
            kwargs["position_ids"] = positions[None].to(self.model.device)
        if allowed is not None:  # transformers takes an additive float mask of shape (batch, 1, Tq, Tk)
            dtype = self.model.dtype
            mask = torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)
            kwargs["attention_mask"] = mask[None, None].to(self.model.device)
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
        if self.kind == "fn":
            logits = check_logits(self.logits_fn(ids)[0, self.seen :].float(), self.who)
        else:
            logits = self.forward_new(ids[:, self.seen :])
        self.seen = ids.shape[1]
        return logits

    def cached_length(self) -> int:
        """Return how many positions the cache holds (tree nodes included)."""
        if self.cache is None:
            return 0
        return self.cache.length if self.kind == "decoder" else self.cache.get_seq_length()

    def rollback(self, length: int) -> None:
        """Forget every token after the first ``length`` (the drafts the target rejected)."""
        extra = self.cached_length() - length
        if extra > 0:
            if self.kind == "decoder":
                self.cache.length = length  # the stale slots are simply overwritten later
            else:
                with torch.inference_mode():  # the cache's tensors were made in inference mode
                    self.cache.crop(-extra)  # a negative count: remove that many positions
        self.seen = min(self.seen, length)
