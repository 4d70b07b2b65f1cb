"""The online softmax, tile by tile, checked against torch.softmax and PyTorch's attention.

Only torch is needed. online_softmax_step is generated from inferlab/flash/tiled.py.
"""

import torch

NEG_INF = float("-inf")

# >>> generated from inferlab/flash/tiled.py:online_softmax_step (python -m inferlab.snippetsync)
def online_softmax_step(row_max, row_sum, acc, scores, v_tile):
    """Fold one tile of scores into the running max, running sum and unnormalised output."""
    new_max = torch.maximum(row_max, scores.amax(dim=-1))
    # A row that has seen only masked keys has max -inf; shift by 0 there so exp gives 0, not NaN.
    shift = torch.where(new_max == NEG_INF, torch.zeros_like(new_max), new_max)
    probs = torch.exp(scores - shift[..., None])  # unnormalised P for this tile
    rescale = torch.exp(row_max - shift)  # corrects what was summed under the old maximum
    row_sum = row_sum * rescale + probs.sum(dim=-1)
    acc = acc * rescale[..., None] + probs @ v_tile
    return new_max, row_sum, acc


# <<< generated

# --8<-- [start:demo]
torch.manual_seed(0)
N, d, BLOCK = 10, 4, 3  # 10 keys in tiles of 3, 3, 3 and 1
q, k, v = torch.randn(1, d), torch.randn(N, d), torch.randn(N, d)
scores = q @ k.T / d**0.5

row_max, row_sum, acc = torch.full((1,), NEG_INF), torch.zeros(1), torch.zeros(1, d)
for start in range(0, N, BLOCK):
    tile = slice(start, start + BLOCK)
    row_max, row_sum, acc = online_softmax_step(row_max, row_sum, acc, scores[:, tile], v[tile])
    print(f"after keys {start}..{min(start + BLOCK, N) - 1}: running max {row_max.item():+.3f}, running sum {row_sum.item():.3f}")

out = acc / row_sum[:, None]
expected = torch.nn.functional.scaled_dot_product_attention(q[None], k[None], v[None])[0]
print("tiled output:   ", out)
print("PyTorch (SDPA): ", expected)
print("max difference: ", (out - expected).abs().max().item())
print("sum equals the full softmax denominator:",
      torch.allclose(row_sum, torch.exp(scores - scores.max()).sum(dim=-1)))
# --8<-- [end:demo]
