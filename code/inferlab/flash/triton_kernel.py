"""The FlashAttention forward pass as a Triton kernel, with a backward pass that reuses its L.

One program instance handles one query tile of one (batch, head): it keeps the tile, the running
max, the running sum and the output accumulator in registers/SRAM while key/value tiles stream
past, exactly the loop of :func:`inferlab.flash.flash_attention` (Dao 2023, Algorithm 1).
Pointers are computed by hand (base + row * stride + column), which runs on Triton 3.x both on a
GPU and in the CPU interpreter (``TRITON_INTERPRET=1``, set before Triton is imported).

The backward pass recomputes P from the kernel's log-sum-exp L with the tiled PyTorch code of
:func:`inferlab.flash.flash_attention_backward`.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from .reference import check_attention_inputs, check_causal
from .tiled import flash_attention_backward

SUPPORTED_HEAD_DIMS = (16, 32, 64, 128)
KERNEL_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
LOG2_E = 1.4426950408889634  # exp(x) = exp2(x * log2(e)); exp2 is the fast hardware instruction
LN_2 = 0.6931471805599453
BACKWARD_BLOCK = 256  # the PyTorch backward works on big tiles: fewer Python-level loop steps


# --8<-- [start:kernel]
@triton.jit
def _attention_forward_kernel(
    Q,
    K,
    V,
    Out,
    Lse,  # pointers to (batch*heads, N, d) tensors and the (batch*heads, Nq) log-sum-exp
    stride_q_batch,
    stride_q_row,
    stride_k_batch,
    stride_k_row,
    stride_v_batch,
    stride_v_row,
    stride_o_batch,
    stride_o_row,
    n_q,
    n_k,
    scale,
    HEAD_DIM: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    BLOCK_K: tl.constexpr,
    CAUSAL: tl.constexpr,
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
        k = tl.load(
            K + head * stride_k_batch + keys[:, None] * stride_k_row + dims[None, :],
            mask=keys[:, None] < n_k,
            other=0.0,
        )
        v = tl.load(
            V + head * stride_v_batch + keys[:, None] * stride_v_row + dims[None, :],
            mask=keys[:, None] < n_k,
            other=0.0,
        )
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

    # A row with no visible key (sum exactly 0) outputs 0 and L = -inf, as PyTorch's SDPA does. A NaN
    # sum is not 0: a NaN in q, or in a key or value the row sees, stays NaN, never a quiet 0.
    no_key = row_sum == 0
    out = tl.where(no_key[:, None], 0.0, acc / tl.where(no_key, 1.0, row_sum)[:, None])
    o_ptrs = Out + head * stride_o_batch + rows[:, None] * stride_o_row + dims[None, :]
    tl.store(o_ptrs, out.to(Out.dtype.element_ty), mask=rows[:, None] < n_q)
    lse = (row_max + tl.math.log2(row_sum)) * 0.6931471805599453  # back to natural log
    tl.store(Lse + head * n_q + rows, lse, mask=rows < n_q)


# --8<-- [end:kernel]


def interpreter_on() -> bool:
    """Return True when Triton runs kernels on the CPU (TRITON_INTERPRET=1)."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def _is_power_of_two(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1 and value & (value - 1) == 0


def check_kernel_inputs(q, k, v, block_q: int, block_k: int) -> None:
    """Raise a clear error for inputs this kernel does not handle."""
    check_attention_inputs(q, k, v)
    if q.dtype not in KERNEL_DTYPES:
        raise TypeError(f"the Triton kernel takes float16, bfloat16 or float32 inputs, got {q.dtype}")
    if q.shape[-1] not in SUPPORTED_HEAD_DIMS or v.shape[-1] != q.shape[-1]:
        raise ValueError(
            f"the Triton kernel supports head dims {SUPPORTED_HEAD_DIMS} with v's d equal to q's, "
            f"got q d={q.shape[-1]}, v d={v.shape[-1]}"
        )
    for name, value in (("block_q", block_q), ("block_k", block_k)):
        if not _is_power_of_two(value) or value < 16:
            raise ValueError(f"{name} must be a power of two >= 16 (tl.dot needs it), got {value!r}")
    if q.device.type != "cuda" and not interpreter_on():
        raise ValueError(
            f"the Triton kernel needs CUDA tensors, got device {q.device}; on a CPU set "
            "TRITON_INTERPRET=1 before importing triton to run it in the interpreter"
        )


def default_blocks(head_dim: int) -> tuple[int, int]:
    """Return (block_q, block_k): tiles that fit one SM's shared memory on A100/H100 class GPUs."""
    if interpreter_on():
        return 16, 16  # the interpreter is slow; small tiles keep the CPU tests quick
    return (128, 64) if head_dim <= 64 else (64, 64)


# --8<-- [start:launch]
def attention_forward(q, k, v, causal: bool = False, block_q: int | None = None, block_k: int | None = None):
    """Return (O, L): the Triton kernel's output and log-sum-exp for q (..., Nq, d), k, v (..., Nk, d)."""
    check_attention_inputs(q, k, v)  # before reading q.shape below
    check_causal(causal)
    default_q, default_k = default_blocks(q.shape[-1])
    block_q = default_q if block_q is None else block_q
    block_k = default_k if block_k is None else block_k
    check_kernel_inputs(q, k, v, block_q, block_k)
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    # Flatten the leading dims to one "batch*heads" axis; rows must be contiguous in memory.
    q3, k3, v3 = (t.reshape(-1, t.shape[-2], d).contiguous() for t in (q, k, v))
    out = torch.empty_like(q3)
    lse = torch.empty(q3.shape[:2], dtype=torch.float32, device=q.device)
    grid = (triton.cdiv(n_q, block_q), q3.shape[0])  # one program per (query tile, head)
    _attention_forward_kernel[grid](
        q3,
        k3,
        v3,
        out,
        lse,
        q3.stride(0),
        q3.stride(1),
        k3.stride(0),
        k3.stride(1),
        v3.stride(0),
        v3.stride(1),
        out.stride(0),
        out.stride(1),
        n_q,
        n_k,
        d**-0.5,
        HEAD_DIM=d,
        BLOCK_Q=block_q,
        BLOCK_K=block_k,
        CAUSAL=bool(causal),
    )
    return out.reshape(q.shape), lse.reshape(q.shape[:-1])


# --8<-- [end:launch]


class TritonAttention(torch.autograd.Function):
    """Forward by the Triton kernel; backward recomputes P from its L (tiled PyTorch)."""

    @staticmethod
    def forward(ctx, q, k, v, causal=False, block_q=None, block_k=None):
        out, lse = attention_forward(q, k, v, causal, block_q, block_k)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.causal = causal
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse = ctx.saved_tensors
        block = BACKWARD_BLOCK
        grads = flash_attention_backward(q, k, v, out, lse, grad_out, ctx.causal, block, block)
        return (*grads, None, None, None)


def triton_attention(q, k, v, causal: bool = False, block_q: int | None = None, block_k: int | None = None):
    """Return softmax(q k^T / sqrt(d)) v from the Triton kernel; differentiable."""
    check_causal(causal)
    return TritonAttention.apply(q, k, v, causal, block_q, block_k)


# --8<-- [start:check]
def compare_with_sdpa(n: int = 48, d: int = 64, heads: int = 8) -> None:
    """Print the kernel's largest difference from PyTorch's attention (and its speed on a GPU)."""
    on_gpu = torch.cuda.is_available()
    device, dtype = ("cuda", torch.float16) if on_gpu else ("cpu", torch.float32)
    q, k, v = (torch.randn(heads, n, d, device=device, dtype=dtype) for _ in range(3))
    for causal in (False, True):
        ours, _ = attention_forward(q, k, v, causal)
        theirs = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        print(f"N={n} causal={causal}: max |ours - SDPA| = {(ours.float() - theirs.float()).abs().max().item():.2e}")
    if on_gpu:
        flops = 4 * n * n * d * heads  # two matmuls of 2 N^2 d FLOPs per head
        for name, fn in (
            ("ours", lambda: attention_forward(q, k, v)),
            ("SDPA", lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v)),
        ):
            ms = triton.testing.do_bench(fn)
            print(f"{name}: {ms:.3f} ms, {flops / ms / 1e9:.1f} TFLOP/s")


if __name__ == "__main__":
    # On a CPU run as: TRITON_INTERPRET=1 python -m inferlab.flash.triton_kernel
    compare_with_sdpa(n=4096 if torch.cuda.is_available() else 48)
# --8<-- [end:check]
