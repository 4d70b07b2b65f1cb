"""The FlashAttention forward kernel in Triton, checked against PyTorch's attention.

On a GPU (Colab: Runtime > Change runtime type > T4) it runs the real kernel and times it; without
one it runs in Triton's CPU interpreter at a tiny size. Needs torch and triton (`pip install triton`).
The kernel is generated from inferlab/flash/triton_kernel.py.
"""

import os

import torch

ON_GPU = torch.cuda.is_available()
if not ON_GPU:
    os.environ["TRITON_INTERPRET"] = "1"  # must be set before triton is imported

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

# >>> generated from inferlab/flash/triton_kernel.py:kernel (python -m inferlab.snippetsync)
@triton.jit
def _attention_forward_kernel(
    Q, K, V, O, L,  # pointers to (batch*heads, N, d) tensors and the (batch*heads, Nq) log-sum-exp
    stride_q_batch, stride_q_row, stride_k_batch, stride_k_row,
    stride_v_batch, stride_v_row, stride_o_batch, stride_o_row,
    n_q, n_k, scale,
    HEAD_DIM: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, CAUSAL: tl.constexpr,
):
    tile = tl.program_id(0)  # which query tile
    head = tl.program_id(1)  # which (batch, head) slice
    rows = tile * BLOCK_Q + tl.arange(0, BLOCK_Q)
    dims = tl.arange(0, HEAD_DIM)

    # Load this program's query tile once; rows past the end read zeros and are never stored.
    q_ptrs = Q + head * stride_q_batch + rows[:, None] * stride_q_row + dims[None, :]
    q = tl.load(q_ptrs, mask=rows[:, None] < n_q, other=0.0)

    row_max = tl.full([BLOCK_Q], float("-inf"), tl.float32)
    row_sum = tl.zeros([BLOCK_Q], tl.float32)
    acc = tl.zeros([BLOCK_Q, HEAD_DIM], tl.float32)  # fp32 accumulator whatever the input dtype
    qk_scale = scale * 1.4426950408889634  # fold log2(e) in, so exp2 below computes exp

    key_end = n_k
    if CAUSAL:  # skip key tiles that lie wholly above the diagonal
        key_end = tl.minimum(n_k, (tile + 1) * BLOCK_Q + n_k - n_q)
    for start in range(0, key_end, BLOCK_K):
        keys = start + tl.arange(0, BLOCK_K)
        k = tl.load(K + head * stride_k_batch + keys[:, None] * stride_k_row + dims[None, :],
                    mask=keys[:, None] < n_k, other=0.0)
        v = tl.load(V + head * stride_v_batch + keys[:, None] * stride_v_row + dims[None, :],
                    mask=keys[:, None] < n_k, other=0.0)
        scores = tl.dot(q, tl.trans(k)) * qk_scale
        visible = keys[None, :] < n_k
        if CAUSAL:
            visible = visible & (keys[None, :] <= rows[:, None] + n_k - n_q)
        scores = tl.where(visible, scores, float("-inf"))

        # The online softmax step (same algebra as tiled.online_softmax_step, in base 2).
        new_max = tl.maximum(row_max, tl.max(scores, 1))
        shift = tl.where(new_max == float("-inf"), 0.0, new_max)
        probs = tl.math.exp2(scores - shift[:, None])
        rescale = tl.math.exp2(row_max - shift)
        row_sum = row_sum * rescale + tl.sum(probs, 1)
        acc = acc * rescale[:, None] + tl.dot(probs.to(v.dtype), v)
        row_max = new_max

    seen = row_sum > 0  # a row with no visible key outputs 0 (and L = -inf), never NaN
    out = tl.where(seen[:, None], acc / tl.where(seen, row_sum, 1.0)[:, None], 0.0)
    o_ptrs = O + head * stride_o_batch + rows[:, None] * stride_o_row + dims[None, :]
    tl.store(o_ptrs, out.to(O.dtype.element_ty), mask=rows[:, None] < n_q)
    lse = (row_max + tl.math.log2(row_sum)) * 0.6931471805599453  # back to natural log
    tl.store(L + head * n_q + rows, lse, mask=rows < n_q)
# <<< generated


# --8<-- [start:run]
def attention(q, k, v, causal=False, block_q=64, block_k=64):
    """Launch one program per (query tile, batch*head); q, k, v are (batch*heads, N, d)."""
    n_q, n_k, d = q.shape[1], k.shape[1], q.shape[2]
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    out = torch.empty_like(q)
    lse = torch.empty(q.shape[:2], dtype=torch.float32, device=q.device)
    grid = (triton.cdiv(n_q, block_q), q.shape[0])
    _attention_forward_kernel[grid](
        q, k, v, out, lse,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1),
        v.stride(0), v.stride(1), out.stride(0), out.stride(1),
        n_q, n_k, d ** -0.5,
        HEAD_DIM=d, BLOCK_Q=block_q, BLOCK_K=block_k, CAUSAL=causal,
    )
    return out


device, dtype = ("cuda", torch.float16) if ON_GPU else ("cpu", torch.float32)
N = 4096 if ON_GPU else 48
block = 64 if ON_GPU else 16
q, k, v = (torch.randn(8, N, 64, device=device, dtype=dtype) for _ in range(3))
for causal in (False, True):
    ours = attention(q, k, v, causal, block, block)
    theirs = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    print(f"causal={causal}: max difference from SDPA {(ours.float() - theirs.float()).abs().max().item():.2e}")

if ON_GPU:
    flops = 4 * N * N * 64 * q.shape[0]  # two matmuls of 2 N^2 d FLOPs per head
    for name, fn in (("ours", lambda: attention(q, k, v)),
                     ("SDPA", lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v))):
        ms = triton.testing.do_bench(fn)
        print(f"{name}: {ms:.3f} ms, {flops / ms / 1e9:.1f} TFLOP/s")
# --8<-- [end:run]
