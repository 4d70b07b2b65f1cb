"""Two greedy generation loops over the readable decoder: naive (recompute) and cached (reuse).

Both produce the same tokens. They differ in how many key projections ``W_K h_t`` they compute,
which every layer of the decoder counts, so the KV-cache guide can compare the counts with the
closed forms a reader derives.

- ``generate_naive`` runs the whole sequence through the model at every step: step i recomputes
  the keys and values of all T + i tokens, although only the newest one is new.
- ``generate_cached`` runs the prompt once (prefill), keeps every layer's keys and values in a
  preallocated :class:`KVCache`, and from then on feeds one token per step (decode).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from inferlab.checks import require_int, require_size
from inferlab.kvcache.decoder import LlamaDecoder, causal_attention

MAX_CACHE_ELEMENTS = 2**31  # 8 GiB of float32 keys and values: beyond that, a mistake, not a lab


@dataclass
class GenerationResult:
    """Output of a generation loop: the ids (prompt + new tokens) and the key projections computed."""

    tokens: torch.Tensor  # (batch, T + k)
    keys_computed: int  # key vectors W_K h_t computed, summed over layers and batch rows
    keys_per_layer: int  # the same count for one layer and one sequence


def check_generation_args(
    decoder: LlamaDecoder, input_ids: torch.Tensor, max_new_tokens: int, on_token: Callable | None = None
) -> None:
    """Raise a clear error for a prompt with T < 1, k < 0, or T + k past the model's positions."""
    if not isinstance(decoder, LlamaDecoder):
        raise TypeError(
            f"decoder must be a LlamaDecoder (see LlamaDecoder.from_pretrained), got {type(decoder).__name__}"
        )
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens (k) must be an integer >= 0, got {max_new_tokens!r}")
    if isinstance(input_ids, torch.Tensor) and input_ids.dim() == 2 and input_ids.shape[1] < 1:
        raise ValueError(f"input_ids must hold a prompt of T >= 1 tokens, got shape {tuple(input_ids.shape)}")
    decoder.check_ids(input_ids, name="input_ids")
    if on_token is not None and not callable(on_token):
        raise TypeError(f"on_token must be a function of the number of new tokens, or None, got {on_token!r}")
    total = input_ids.shape[1] + max_new_tokens
    if total > decoder.max_positions:
        raise ValueError(
            f"prompt length T={input_ids.shape[1]} plus max_new_tokens k={max_new_tokens} is {total}, "
            f"past the model's maximum of {decoder.max_positions} positions"
        )


def check_cache_args(decoder: LlamaDecoder, batch: int, max_tokens: int) -> None:
    """Raise unless a cache of ``batch`` rows and ``max_tokens`` positions fits the decoder."""
    if not isinstance(decoder, LlamaDecoder):
        raise TypeError(f"decoder must be a LlamaDecoder, got {type(decoder).__name__}")
    require_int(batch, "batch", minimum=1)
    require_int(max_tokens, "max_tokens", minimum=1, maximum=decoder.max_positions)
    elements = 2 * decoder.num_layers * batch * decoder.num_kv_heads * max_tokens * decoder.head_dim
    require_size(elements, "batch", MAX_CACHE_ELEMENTS, f"cached numbers for max_tokens={max_tokens}")


def check_step_args(decoder: LlamaDecoder, cache: KVCache, ids: torch.Tensor) -> None:
    """Raise unless ids (batch, T) can be appended to ``cache`` by ``decoder`` (batch, room, vocabulary)."""
    if not isinstance(cache, KVCache):
        raise TypeError(f"cache must be a KVCache, got {type(cache).__name__}")
    if not isinstance(decoder, LlamaDecoder):
        raise TypeError(f"decoder must be a LlamaDecoder, got {type(decoder).__name__}")
    decoder.check_ids(ids, first_position=cache.length)
    batch, capacity = cache.keys.shape[1], cache.keys.shape[3]
    if ids.shape[0] != batch:
        raise ValueError(f"ids must have the cache's batch of {batch} rows, got {ids.shape[0]}")
    if cache.length + ids.shape[1] > capacity:
        raise ValueError(
            f"ids must fit in the cache: {cache.length} positions are used and {ids.shape[1]} more do not fit "
            f"in its {capacity}"
        )


def _result(decoder: LlamaDecoder, tokens: torch.Tensor) -> GenerationResult:
    per_layer = decoder.layers[0].keys_computed // tokens.shape[0] if decoder.num_layers else 0
    return GenerationResult(tokens=tokens, keys_computed=decoder.keys_computed, keys_per_layer=per_layer)


# --8<-- [start:naive]
@torch.inference_mode()
def generate_naive(
    decoder: LlamaDecoder, input_ids: torch.Tensor, max_new_tokens: int, on_token: Callable[[int], None] | None = None
) -> GenerationResult:
    """Return greedy tokens made by re-running the whole sequence at every step (no cache)."""
    check_generation_args(decoder, input_ids, max_new_tokens, on_token)
    decoder.reset_counts()
    ids = input_ids
    for _ in range(max_new_tokens):
        logits = decoder(ids)  # recomputes keys and values for every position, old and new
        next_token = logits[:, -1].argmax(dim=-1, keepdim=True)
        ids = torch.cat([ids, next_token], dim=1)
        if on_token:  # lets a benchmark time every step
            on_token(ids.shape[1] - input_ids.shape[1])
    return _result(decoder, ids)


# --8<-- [end:naive]


# --8<-- [start:cache]
class KVCache:
    """Preallocated keys and values for every layer: (layers, batch, kv_heads, max_tokens, head_dim) each."""

    def __init__(self, decoder: LlamaDecoder, batch: int, max_tokens: int) -> None:
        check_cache_args(decoder, batch, max_tokens)
        shape = (decoder.num_layers, batch, decoder.num_kv_heads, max_tokens, decoder.head_dim)
        # Allocating once up front means no step ever copies the cache to grow it.
        self.keys = torch.zeros(shape, dtype=decoder.dtype, device=decoder.device)
        self.values = torch.zeros(shape, dtype=decoder.dtype, device=decoder.device)
        self.length = 0  # positions 0..length-1 hold valid keys and values

    def store(self, layer: int, start: int, k: torch.Tensor, v: torch.Tensor):
        """Write k, v (batch, kv_heads, T, head_dim) at positions start.. and return all keys/values so far."""
        end = start + k.shape[2]
        self.keys[layer, :, :, start:end] = k
        self.values[layer, :, :, start:end] = v
        return self.keys[layer, :, :, :end], self.values[layer, :, :, :end]


# --8<-- [end:cache]


# --8<-- [start:step]
def forward_with_cache(decoder: LlamaDecoder, cache: KVCache, ids: torch.Tensor) -> torch.Tensor:
    """Run ids (batch, T) at positions cache.length.., storing their keys/values; return last logits (batch, vocab)."""
    check_step_args(decoder, cache, ids)  # before any key is written: a refused step leaves the cache as it was
    start = cache.length
    positions = torch.arange(start, start + ids.shape[1], device=ids.device)
    h = decoder.embed_ids(ids)
    for index, layer in enumerate(decoder.layers):
        q, k, v = layer.qkv(h, positions)  # keys and values of the new tokens only
        keys, values = cache.store(index, start, k, v)  # ...appended to the ones already cached
        h = layer.finish(h, causal_attention(q, keys, values, q_start=start))
    cache.length = start + ids.shape[1]
    return decoder.final_logits(h[:, -1])  # only the last position predicts the next token


# --8<-- [end:step]


# --8<-- [start:cached]
@torch.inference_mode()
def generate_cached(
    decoder: LlamaDecoder, input_ids: torch.Tensor, max_new_tokens: int, on_token: Callable[[int], None] | None = None
) -> GenerationResult:
    """Return greedy tokens made with a KV cache: one prefill over the prompt, then one token per step."""
    check_generation_args(decoder, input_ids, max_new_tokens, on_token)
    decoder.reset_counts()
    if max_new_tokens == 0:
        return _result(decoder, input_ids)
    batch, prompt_len = input_ids.shape
    cache = KVCache(decoder, batch, prompt_len + max_new_tokens)
    logits = forward_with_cache(decoder, cache, input_ids)  # prefill: all T prompt tokens at once
    new_tokens = [logits.argmax(dim=-1, keepdim=True)]
    if on_token:
        on_token(1)
    for _ in range(max_new_tokens - 1):  # decode: the newest token is the only input
        logits = forward_with_cache(decoder, cache, new_tokens[-1])
        new_tokens.append(logits.argmax(dim=-1, keepdim=True))
        if on_token:
            on_token(len(new_tokens))
    return _result(decoder, torch.cat([input_ids, *new_tokens], dim=1))


# --8<-- [end:cached]
