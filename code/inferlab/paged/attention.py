"""Attention that reads keys and values through block tables: PagedAttention, readable in PyTorch.

The KV cache of one layer is a pool of blocks, ``(num_blocks, block_size, kv_heads, head_dim)``.
A sequence's keys are wherever its block table says; gathering ``cache[block_table]`` lines them
up again in token order. A real kernel (Kwon et al., 2023, Section 4.1) reads the blocks in place
instead of copying them, but computes exactly this.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from inferlab.kvcache.decoder import fused_attention


# --8<-- [start:checks]
def _described(value) -> str:
    return f"shape {tuple(value.shape)} {value.dtype}" if isinstance(value, torch.Tensor) else type(value).__name__


def check_paged_inputs(q, k_cache, v_cache, block_tables, context_lens) -> None:
    """Raise ValueError/TypeError unless the shapes fit and every length fits its block table."""
    for name, tensor, dims in (("q", q, 4), ("k_cache", k_cache, 4), ("v_cache", v_cache, 4)):
        if not isinstance(tensor, torch.Tensor) or tensor.dim() != dims or not tensor.is_floating_point():
            raise TypeError(f"{name} must be a floating-point tensor with {dims} dims, got {_described(tensor)}")
    if k_cache.shape != v_cache.shape or q.shape[-1] != k_cache.shape[-1] or q.shape[1] % k_cache.shape[2]:
        raise ValueError(
            f"k_cache and v_cache must both be (num_blocks, block_size, kv_heads, head_dim) with q's head_dim and "
            f"kv_heads dividing q's heads, got q {tuple(q.shape)}, k_cache {tuple(k_cache.shape)}, "
            f"v_cache {tuple(v_cache.shape)}"
        )
    seqs, q_len = q.shape[0], q.shape[2]
    num_blocks, block_size = k_cache.shape[:2]
    for name, tensor, dims in (("block_tables", block_tables, 2), ("context_lens", context_lens, 1)):
        if not isinstance(tensor, torch.Tensor) or tensor.dim() != dims or tensor.is_floating_point():
            raise TypeError(f"{name} must be an integer tensor with {dims} dims, got {_described(tensor)}")
        if tensor.shape[0] != seqs or tensor.numel() == 0:
            raise ValueError(f"{name} must have one row per sequence ({seqs}), got shape {tuple(tensor.shape)}")
    if block_tables.min() < 0 or block_tables.max() >= num_blocks:
        raise ValueError(f"block_tables must hold block ids in 0..{num_blocks - 1}, got {block_tables.tolist()}")
    capacity = block_tables.shape[1] * block_size
    if context_lens.min() < q_len or context_lens.max() > capacity:
        # Shorter than the queries: they would sit before position 0. Longer: past the table's last slot.
        raise ValueError(
            f"context_lens must be in {q_len}..{capacity} (the {q_len} new tokens .. the block tables' "
            f"{block_tables.shape[1]} blocks of {block_size}), got {context_lens.tolist()}"
        )


def check_kv_write(k_cache, v_cache, k, v, slots) -> None:
    """Raise ValueError/TypeError unless k, v (N, kv_heads, head_dim) fit the pools at N valid slots."""
    if not all(isinstance(t, torch.Tensor) for t in (k_cache, v_cache, k, v, slots)):
        raise TypeError("k_cache, v_cache, k, v and slots must all be torch tensors")
    if k_cache.shape != v_cache.shape or k_cache.dim() != 4:
        raise ValueError(
            f"k_cache and v_cache must share one 4-dim shape, got {tuple(k_cache.shape)}, {tuple(v_cache.shape)}"
        )
    expected = (slots.shape[0], *k_cache.shape[2:]) if slots.dim() == 1 else None
    if expected is None or slots.is_floating_point() or tuple(k.shape) != expected or tuple(v.shape) != expected:
        raise ValueError(
            f"slots must be a 1-dim integer tensor of N slots and k, v must be (N, kv_heads, head_dim), got slots "
            f"{tuple(slots.shape)} {slots.dtype}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    total = k_cache.shape[0] * k_cache.shape[1]
    if slots.numel() and (slots.min() < 0 or slots.max() >= total):
        raise ValueError(f"slots must be in 0..{total - 1} (num_blocks * block_size), got {slots.tolist()}")


# --8<-- [end:checks]


# --8<-- [start:write]
def write_kv(
    k_cache: torch.Tensor, v_cache: torch.Tensor, k: torch.Tensor, v: torch.Tensor, slots: torch.Tensor
) -> None:
    """Store keys/values (N, kv_heads, head_dim) of N tokens at flat slots ``block_id * block_size + offset``."""
    check_kv_write(k_cache, v_cache, k, v, slots)  # before writing: a refused call changes no slot
    k_cache.view(-1, *k_cache.shape[2:]).index_copy_(0, slots, k)
    v_cache.view(-1, *v_cache.shape[2:]).index_copy_(0, slots, v)


# --8<-- [end:write]


def gather_kv(
    k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor, length: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return one sequence's first ``length`` keys and values, (1, kv_heads, length, head_dim), in token order."""
    k = k_cache[block_table].flatten(0, 1)[:length]  # (blocks * block_size, kv_heads, head_dim) -> first length
    v = v_cache[block_table].flatten(0, 1)[:length]
    return k.transpose(0, 1)[None], v.transpose(0, 1)[None]


# --8<-- [start:paged_attention]
def paged_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
) -> torch.Tensor:
    """Return causal attention outputs (S, heads, Tq, head_dim) of S sequences reading a paged cache.

    q: (S, heads, Tq, head_dim), the queries of each sequence's *last* Tq tokens.
    k_cache, v_cache: (num_blocks, block_size, kv_heads, head_dim), one layer's block pool.
    block_tables: (S, max_blocks) physical block ids (padding entries may be any valid id).
    context_lens: (S,) how many tokens each sequence has, the Tq new ones included.
    """
    check_paged_inputs(q, k_cache, v_cache, block_tables, context_lens)
    seqs, heads, q_len, head_dim = q.shape
    kv_heads = k_cache.shape[2]
    # Gather each sequence's blocks in table order: (S, max_blocks * block_size, kv_heads, head_dim).
    k = k_cache[block_tables].flatten(1, 2).transpose(1, 2)  # -> (S, kv_heads, keys, head_dim)
    v = v_cache[block_tables].flatten(1, 2).transpose(1, 2)
    # Grouped-query attention: each key/value head serves `group` query heads.
    group = heads // kv_heads
    q = q.reshape(seqs, kv_heads, group, q_len, head_dim)
    scores = (q @ k.unsqueeze(2).transpose(-1, -2)) * head_dim**-0.5  # (S, kv_heads, group, Tq, keys)
    # Query i of a sequence sits at position context_len - Tq + i and may see keys 0..that position;
    # slots past context_len are padding or another request's leftovers and must get weight 0.
    key_pos = torch.arange(k.shape[2], device=q.device)
    query_pos = context_lens[:, None] - q_len + torch.arange(q_len, device=q.device)  # (S, Tq)
    hidden = key_pos[None, None, :] > query_pos[:, :, None]  # (S, Tq, keys)
    scores = scores.masked_fill(hidden[:, None, None], float("-inf"))
    weights = torch.softmax(scores.float(), dim=-1).to(v.dtype)
    return (weights @ v.unsqueeze(2)).reshape(seqs, heads, q_len, head_dim)


# --8<-- [end:paged_attention]


def paged_prefill_attention(
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor, length: int
) -> torch.Tensor:
    """Return what paged_attention returns for one sequence, through PyTorch's fused attention kernel.

    q: (1, heads, Tq, head_dim), the queries of the sequence's last Tq tokens; block_table: (blocks,);
    length: how many tokens the sequence has, the Tq new ones included. A prompt of T tokens would
    make paged_attention build a T x T score matrix per head; the fused kernel never stores it, and
    that is most of a long prefill's time. A test checks that the two agree.
    """
    check_paged_inputs(q, k_cache, v_cache, block_table[None], torch.tensor([length], device=q.device))
    k, v = gather_kv(k_cache, v_cache, block_table, length)
    return fused_attention(q, k, v, q_start=length - q.shape[2])


def decode_mask(block_tables: torch.Tensor, context_lens: torch.Tensor, block_size: int) -> torch.Tensor:
    """Return (S, 1, 1, keys) booleans: True for each sequence's own keys, False for the padding after them."""
    keys = torch.arange(block_tables.shape[1] * block_size, device=block_tables.device)
    return (keys[None, :] < context_lens[:, None])[:, None, None]


def paged_decode_attention(
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_tables: torch.Tensor, allowed: torch.Tensor
) -> torch.Tensor:
    """Return what paged_attention returns for one new query per sequence, through the fused kernel.

    q: (S, heads, 1, head_dim); ``allowed`` comes from :func:`decode_mask`. The newest token may
    read every key of its own sequence, so the only mask is the padding of the shorter tables. This
    runs once per layer of every decoding step, so it does not check its inputs: the engine checks
    them once per step with :func:`check_paged_inputs`, and a test checks it against paged_attention.
    """
    k = k_cache[block_tables].flatten(1, 2).transpose(1, 2)  # (S, kv_heads, keys, head_dim)
    v = v_cache[block_tables].flatten(1, 2).transpose(1, 2)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, enable_gqa=k.shape[1] != q.shape[1])
