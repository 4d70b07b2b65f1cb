"""Attention that reads keys and values through block tables: PagedAttention, readable in PyTorch.

The KV cache of one layer is a pool of blocks, ``(num_blocks, block_size, kv_heads, head_dim)``.
A sequence's keys are wherever its block table says; gathering ``cache[block_table]`` lines them
up again in token order. A real kernel (Kwon et al., 2023, Section 4.1) reads the blocks in place
instead of copying them, but computes exactly this.
"""

from __future__ import annotations

import torch


# --8<-- [start:write]
def write_kv(
    k_cache: torch.Tensor, v_cache: torch.Tensor, k: torch.Tensor, v: torch.Tensor, slots: torch.Tensor
) -> None:
    """Store keys/values (N, kv_heads, head_dim) of N tokens at flat slots ``block_id * block_size + offset``."""
    k_cache.view(-1, *k_cache.shape[2:]).index_copy_(0, slots, k)
    v_cache.view(-1, *v_cache.shape[2:]).index_copy_(0, slots, v)


# --8<-- [end:write]


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
