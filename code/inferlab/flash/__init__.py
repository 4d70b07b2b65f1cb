"""FlashAttention, readable: standard attention, the tiled forward and backward in PyTorch, a Triton
kernel, and the HBM-traffic and runtime models that explain why tiling wins.

Read in this order: ``reference`` (the baseline that materialises S and P), ``tiled`` (online
softmax, recomputation), ``traffic`` (counting and the roofline), ``triton_kernel`` (the same loop
as a GPU kernel), ``bench`` (the measurements on the site).
"""

from __future__ import annotations

from .hf import flash_attention_for_transformers, use_flash_attention
from .reference import TrafficCounter, causal_mask, check_attention_inputs, standard_attention
from .tiled import FlashAttention, flash_attention, flash_attention_backward, online_softmax_step
from .traffic import (
    GPU_PRESETS,
    GPUSpec,
    attention_flops,
    blocks_from_sram,
    estimate_runtime,
    hbm_traffic,
)


def triton_attention(q, k, v, causal: bool = False, block_q: int | None = None, block_k: int | None = None):
    """Return attention computed by the Triton kernel (differentiable); imports Triton only when called."""
    from .triton_kernel import triton_attention as _triton_attention

    return _triton_attention(q, k, v, causal=causal, block_q=block_q, block_k=block_k)


__all__ = [
    "GPU_PRESETS",
    "GPUSpec",
    "FlashAttention",
    "TrafficCounter",
    "attention_flops",
    "blocks_from_sram",
    "causal_mask",
    "check_attention_inputs",
    "estimate_runtime",
    "flash_attention",
    "flash_attention_backward",
    "flash_attention_for_transformers",
    "hbm_traffic",
    "online_softmax_step",
    "standard_attention",
    "triton_attention",
    "use_flash_attention",
]
