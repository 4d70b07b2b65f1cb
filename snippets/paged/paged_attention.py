"""PagedAttention in a few lines of PyTorch, checked against PyTorch's own attention.

Three sequences keep their keys and values in blocks scattered over one pool; attention gathers
them through block tables and matches scaled_dot_product_attention on the contiguous tensors.
The two functions are generated from inferlab/paged/attention.py.
"""

import torch
import torch.nn.functional as F


# >>> generated from inferlab/paged/attention.py:write (python -m inferlab.snippetsync)
def write_kv(
    k_cache: torch.Tensor, v_cache: torch.Tensor, k: torch.Tensor, v: torch.Tensor, slots: torch.Tensor
) -> None:
    """Store keys/values (N, kv_heads, head_dim) of N tokens at flat slots ``block_id * block_size + offset``."""
    k_cache.view(-1, *k_cache.shape[2:]).index_copy_(0, slots, k)
    v_cache.view(-1, *v_cache.shape[2:]).index_copy_(0, slots, v)


# <<< generated

# >>> generated from inferlab/paged/attention.py:paged_attention (python -m inferlab.snippetsync)
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


# <<< generated

# --8<-- [start:demo]
torch.manual_seed(0)
num_blocks, block_size, heads, kv_heads, head_dim = 24, 4, 6, 2, 16  # 6 query heads share 2 kv heads (GQA)
k_cache = torch.zeros(num_blocks, block_size, kv_heads, head_dim)
v_cache = torch.zeros(num_blocks, block_size, kv_heads, head_dim)
free_blocks = torch.randperm(num_blocks).tolist()  # physical blocks in a random order: no contiguity

lengths, tables, contiguous = [7, 12, 3], [], []
for length in lengths:
    table = [free_blocks.pop() for _ in range(-(-length // block_size))]  # ceil(length / block_size)
    k, v = torch.randn(length, kv_heads, head_dim), torch.randn(length, kv_heads, head_dim)
    slots = torch.tensor([table[p // block_size] * block_size + p % block_size for p in range(length)])
    write_kv(k_cache, v_cache, k, v, slots)
    tables.append(table)
    contiguous.append((k.transpose(0, 1)[None], v.transpose(0, 1)[None]))
    print(f"sequence of {length:2d} tokens -> block table {table}")

# One decoding step: each sequence's newest token asks a question of all its keys.
q = torch.randn(len(lengths), heads, 1, head_dim)
width = max(map(len, tables))
padded = torch.tensor([t + [0] * (width - len(t)) for t in tables])
out = paged_attention(q, k_cache, v_cache, padded, torch.tensor(lengths))
for i, (k, v) in enumerate(contiguous):
    expected = F.scaled_dot_product_attention(q[i : i + 1], k, v, enable_gqa=True)
    print(f"sequence {i}: max |paged - contiguous| = {(out[i] - expected[0]).abs().max():.2e}")
# --8<-- [end:demo]
