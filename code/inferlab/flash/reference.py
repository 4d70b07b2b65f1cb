"""Standard attention, the way a textbook writes it: materialise S = QK^T and P = softmax(S).

This is the baseline FlashAttention improves on. It also counts every element it reads from and
writes to main memory (HBM on a GPU), using the simplified accounting of Dao et al. (2022),
Algorithm 0: S and P are written out and read back because they do not fit in on-chip SRAM.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


@dataclass
class TrafficCounter:
    """Tallies of elements read from and written to main memory."""

    reads: int = 0
    writes: int = 0

    @property
    def total(self) -> int:
        """Return reads plus writes."""
        return self.reads + self.writes

    def read(self, tensor: torch.Tensor) -> torch.Tensor:
        """Count ``tensor`` as read from main memory and return it."""
        self.reads += tensor.numel()
        return tensor

    def write(self, tensor: torch.Tensor) -> torch.Tensor:
        """Count ``tensor`` as written to main memory and return it."""
        self.writes += tensor.numel()
        return tensor


def check_attention_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """Raise TypeError/ValueError unless q (..., Nq, d), k (..., Nk, d), v (..., Nk, dv) fit together."""
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
        if tensor.dtype not in SUPPORTED_DTYPES:
            raise TypeError(f"{name} must have dtype float16, bfloat16, float32 or float64, got {tensor.dtype}")
        if tensor.dim() < 2:
            raise ValueError(
                f"{name} must have shape (..., N, d) with at least 2 dims, got shape {tuple(tensor.shape)}"
            )
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k and v must share one dtype, got q {q.dtype}, k {k.dtype}, v {v.dtype}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k and v must be on one device, got q {q.device}, k {k.device}, v {v.device}")
    if not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2]):
        raise ValueError(
            f"q, k and v must have the same leading (batch, head) dims, got q {tuple(q.shape)}, "
            f"k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must have the same head dim d, got q d={q.shape[-1]}, k d={k.shape[-1]}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must have the same number of keys, got k N={k.shape[-2]}, v N={v.shape[-2]}")
    if q.shape[-2] < 1 or k.shape[-2] < 1 or q.shape[-1] < 1 or v.shape[-1] < 1:
        raise ValueError(
            f"sequence lengths and head dims must be >= 1, got q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )


def check_causal(causal: bool) -> None:
    """Raise TypeError unless causal is True or False ('yes', 1 or None are mistakes, not switches)."""
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be True or False, got {causal!r}")


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """Return the dtype to accumulate in: float64 stays float64 (gradcheck needs it), the rest use float32."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def resolve_scale(scale: float | None, head_dim: int) -> float:
    """Return the softmax scale: ``scale`` if given, else 1/sqrt(d)."""
    if scale is None:
        return 1.0 / math.sqrt(head_dim)
    if not isinstance(scale, (int, float)) or isinstance(scale, bool) or not 0 < scale < math.inf:
        raise ValueError(f"scale must be a positive number or None (for 1/sqrt(d)), got {scale!r}")
    return float(scale)


def causal_mask(n_q: int, n_k: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """Return the (n_q, n_k) boolean mask of allowed pairs: query i sees key j when j <= i + (n_k - n_q).

    The queries are the *last* n_q positions of the sequence (as when decoding with a KV cache), so
    with n_q > n_k the first n_q - n_k queries see no key at all; their output is defined as 0.
    """
    for name, value in (("n_q", n_q), ("n_k", n_k)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
    query_position = torch.arange(n_q, device=device)[:, None] + (n_k - n_q)
    key_position = torch.arange(n_k, device=device)[None, :]
    return key_position <= query_position


# --8<-- [start:standard]
def standard_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    scale: float | None = None,
    counter: TrafficCounter | None = None,
) -> torch.Tensor:
    """Return softmax(q k^T * scale) v, materialising the full S and P matrices in memory.

    NaN and inf behave as in PyTorch's scaled_dot_product_attention: a NaN (or an inf score) in a
    row makes that row's output NaN, and a row that sees no key at all outputs 0.
    """
    check_attention_inputs(q, k, v)
    check_causal(causal)
    scale = resolve_scale(scale, q.shape[-1])
    hbm = counter if counter is not None else TrafficCounter()

    # Step 1: read Q and K, write the N x N score matrix S back to main memory.
    scores = hbm.write(hbm.read(q) @ hbm.read(k).transpose(-2, -1) * scale)
    if causal:
        scores = scores.masked_fill(~causal_mask(q.shape[-2], k.shape[-2], q.device), float("-inf"))
    # Step 2: read S, write P = softmax(S). Another N x N round trip.
    scores = hbm.read(scores).to(compute_dtype(q.dtype))
    # A row with no visible key (all -inf) would give 0/0 = NaN: PyTorch's SDPA outputs 0 there,
    # and so do we. Any other NaN is real and stays.
    no_key = (scores == float("-inf")).all(dim=-1, keepdim=True)
    probs = hbm.write(torch.softmax(scores, dim=-1).masked_fill(no_key, 0.0).to(q.dtype))
    # Step 3: read P and V, write the output O.
    return hbm.write(hbm.read(probs) @ hbm.read(v))


# --8<-- [end:standard]
