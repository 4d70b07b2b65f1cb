"""FlashAttention in plain PyTorch: the tiled forward with the online softmax, and the backward pass.

The loops mirror what a GPU kernel does, one tile at a time (Dao et al. 2022, Algorithm 1;
Dao 2023, Algorithms 1 and 2 for the FlashAttention-2 loop order used here):

- forward: query tiles outside, key/value tiles inside. A query tile stays in fast memory while
  every key/value tile streams past it; the N x N matrices S and P never exist in full.
- backward: key/value tiles outside, query tiles inside. P is recomputed tile by tile from the
  saved log-sum-exp L instead of being stored.

Every tile load and store goes through a :class:`TrafficCounter`, so the traffic formula in
:mod:`inferlab.flash.traffic` can be checked against what this code really moves.
"""

from __future__ import annotations

import torch

from .reference import TrafficCounter, check_attention_inputs, check_causal, compute_dtype, resolve_scale

NEG_INF = float("-inf")


def check_block(value: int, name: str) -> None:
    """Raise unless a tile size is a positive integer."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


def visible_key_end(q_end: int, n_q: int, n_k: int, causal: bool) -> int:
    """Return one past the last key any query in rows [.., q_end) may see (the key loop stops there)."""
    if not causal:
        return n_k
    # The last query of the tile sits at position q_end - 1 + (n_k - n_q) and sees keys up to it.
    return max(0, min(n_k, q_end + n_k - n_q))


def first_visible_query(k_start: int, n_q: int, n_k: int, causal: bool) -> int:
    """Return the first query row that may see key ``k_start`` (the backward query loop starts there)."""
    if not causal:
        return 0
    return max(0, k_start - (n_k - n_q))


def tile_crosses_diagonal(q_start: int, k_end: int, n_q: int, n_k: int) -> bool:
    """Return True when some query of the tile may not see some key of the tile (a mask is needed)."""
    return k_end - 1 > q_start + n_k - n_q


def tile_mask(q_start: int, q_end: int, k_start: int, k_end: int, n_q: int, n_k: int, device) -> torch.Tensor:
    """Return the causal mask of one (query tile, key tile) pair: True where query i may see key j."""
    query_position = torch.arange(q_start, q_end, device=device)[:, None] + (n_k - n_q)
    key_position = torch.arange(k_start, k_end, device=device)[None, :]
    return key_position <= query_position


# --8<-- [start:online_softmax_step]
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


# --8<-- [end:online_softmax_step]


# --8<-- [start:flash_forward]
def flash_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    block_q: int = 64,
    block_k: int = 64,
    return_lse: bool = False,
    scale: float | None = None,
    counter: TrafficCounter | None = None,
):
    """Return softmax(q k^T * scale) v computed tile by tile (and the log-sum-exp L if return_lse).

    NaN and inf follow PyTorch's scaled_dot_product_attention: a NaN in a query, or in a key or value
    the query attends to, makes its output row NaN; a row that sees no key outputs 0 (L = -inf).
    Key tiles that the causal mask hides entirely are never loaded, so a NaN there cannot reach the
    rows that do not see it (SDPA's math path would spread it to every row).
    """
    check_attention_inputs(q, k, v)
    check_causal(causal)
    if not isinstance(return_lse, bool):
        raise TypeError(f"return_lse must be True or False, got {return_lse!r}")
    check_block(block_q, "block_q")
    check_block(block_k, "block_k")
    scale = resolve_scale(scale, q.shape[-1])
    hbm = counter if counter is not None else TrafficCounter()
    n_q, n_k = q.shape[-2], k.shape[-2]
    out = q.new_empty(*q.shape[:-1], v.shape[-1])
    acc_dtype = compute_dtype(q.dtype)  # float32 for half precision, float64 kept as float64
    lse = torch.empty(q.shape[:-1], dtype=acc_dtype, device=q.device)

    for q_start in range(0, n_q, block_q):  # outer loop: one query tile at a time
        q_end = min(q_start + block_q, n_q)
        q_tile = hbm.read(q[..., q_start:q_end, :]).to(acc_dtype)  # stays in SRAM for the whole inner loop
        row_max = torch.full(q_tile.shape[:-1], NEG_INF, dtype=acc_dtype, device=q.device)
        row_sum = torch.zeros(q_tile.shape[:-1], dtype=acc_dtype, device=q.device)
        acc = torch.zeros(*q_tile.shape[:-1], v.shape[-1], dtype=acc_dtype, device=q.device)

        # Inner loop: stream key/value tiles; with a causal mask, tiles wholly above the diagonal are skipped.
        for k_start in range(0, visible_key_end(q_end, n_q, n_k, causal), block_k):
            k_end = min(k_start + block_k, n_k)
            k_tile = hbm.read(k[..., k_start:k_end, :]).to(acc_dtype)
            v_tile = hbm.read(v[..., k_start:k_end, :]).to(acc_dtype)
            scores = q_tile @ k_tile.transpose(-2, -1) * scale  # only a block_q x block_k piece of S
            if causal and tile_crosses_diagonal(q_start, k_end, n_q, n_k):  # tiles below it need no mask
                scores = scores.masked_fill(~tile_mask(q_start, q_end, k_start, k_end, n_q, n_k, q.device), NEG_INF)
            row_max, row_sum, acc = online_softmax_step(row_max, row_sum, acc, scores, v_tile)

        # Normalise once at the end; a row that saw no key at all (sum exactly 0) outputs 0 and has
        # L = -inf. A NaN sum is not 0, so a NaN row stays NaN instead of turning into a quiet 0.
        no_key = row_sum == 0
        out_tile = torch.where(no_key[..., None], 0.0, acc / torch.where(no_key, 1.0, row_sum)[..., None])
        out[..., q_start:q_end, :] = hbm.write(out_tile.to(q.dtype))
        lse[..., q_start:q_end] = hbm.write(row_max + torch.log(row_sum))
    return (out, lse) if return_lse else out


# --8<-- [end:flash_forward]


# --8<-- [start:flash_backward]
def flash_attention_backward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    grad_out: torch.Tensor,
    causal: bool = False,
    block_q: int = 64,
    block_k: int = 64,
    scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return (dQ, dK, dV), recomputing P tile by tile from the saved log-sum-exp ``lse``."""
    check_attention_inputs(q, k, v)
    check_causal(causal)
    out_shape = (*q.shape[:-1], v.shape[-1])
    for name, tensor, shape in (("out", out, out_shape), ("grad_out", grad_out, out_shape), ("lse", lse, q.shape[:-1])):
        if tuple(tensor.shape) != tuple(shape):
            raise ValueError(f"{name} must have shape {tuple(shape)} to match q and v, got {tuple(tensor.shape)}")
    check_block(block_q, "block_q")
    check_block(block_k, "block_k")
    scale = resolve_scale(scale, q.shape[-1])
    n_q, n_k = q.shape[-2], k.shape[-2]
    acc_dtype = compute_dtype(q.dtype)
    # D_i = sum_j dO_ij * O_ij equals sum_j P_ij dP_ij: the one number per row the softmax backward needs.
    delta = (grad_out.to(acc_dtype) * out.to(acc_dtype)).sum(dim=-1)
    grad_q = torch.zeros(q.shape, dtype=acc_dtype, device=q.device)
    grad_k = torch.zeros(k.shape, dtype=acc_dtype, device=q.device)
    grad_v = torch.zeros(v.shape, dtype=acc_dtype, device=q.device)

    for k_start in range(0, n_k, block_k):  # outer loop: one key/value tile, its dK and dV stay on chip
        k_end = min(k_start + block_k, n_k)
        k_tile, v_tile = k[..., k_start:k_end, :].to(acc_dtype), v[..., k_start:k_end, :].to(acc_dtype)
        first_row = first_visible_query(k_start, n_q, n_k, causal) // block_q * block_q
        for q_start in range(first_row, n_q, block_q):
            q_end = min(q_start + block_q, n_q)
            q_tile, do_tile = q[..., q_start:q_end, :].to(acc_dtype), grad_out[..., q_start:q_end, :].to(acc_dtype)
            scores = q_tile @ k_tile.transpose(-2, -1) * scale
            # Recompute P = exp(S - L) exactly as the forward normalised it; no N x N matrix was stored.
            probs = torch.exp(scores - lse[..., q_start:q_end, None])
            hidden = lse[..., q_start:q_end, None] == NEG_INF  # rows that saw no key (a NaN row stays NaN)
            if causal and tile_crosses_diagonal(q_start, k_end, n_q, n_k):
                hidden = hidden | ~tile_mask(q_start, q_end, k_start, k_end, n_q, n_k, q.device)
            probs = probs.masked_fill(hidden, 0.0)
            grad_v[..., k_start:k_end, :] += probs.transpose(-2, -1) @ do_tile
            grad_probs = do_tile @ v_tile.transpose(-2, -1)
            grad_scores = probs * (grad_probs - delta[..., q_start:q_end, None])  # softmax backward
            grad_q[..., q_start:q_end, :] += grad_scores @ k_tile * scale
            grad_k[..., k_start:k_end, :] += grad_scores.transpose(-2, -1) @ q_tile * scale
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)


# --8<-- [end:flash_backward]


# --8<-- [start:autograd]
class FlashAttention(torch.autograd.Function):
    """Differentiable tiled attention: ``FlashAttention.apply(q, k, v, causal)``.

    The forward saves only q, k, v, O and the log-sum-exp L (O(N) extra memory, not O(N^2));
    the backward recomputes the attention probabilities from them.
    """

    @staticmethod
    def forward(ctx, q, k, v, causal=False, block_q=64, block_k=64, scale=None):
        out, lse = flash_attention(q, k, v, causal, block_q, block_k, return_lse=True, scale=scale)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.settings = (causal, block_q, block_k, scale)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse = ctx.saved_tensors
        causal, block_q, block_k, scale = ctx.settings
        grads = flash_attention_backward(q, k, v, out, lse, grad_out, causal, block_q, block_k, scale)
        return (*grads, None, None, None, None)


# --8<-- [end:autograd]
