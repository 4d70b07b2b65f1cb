"""Paged KV cache, automatic prefix caching, a small serving engine, and the vLLM labs.

Read in this order: ``blocks`` (the block manager and its hash chain), ``attention`` (attention
that reads keys and values through block tables), ``engine`` (continuous batching on a Llama
decoder), ``offload`` (the weight-offloading cost model), ``labs`` (the CPU labs), ``vllm_lab`` (the
same experiments with the real vLLM, for Colab).
"""

from inferlab.paged.attention import paged_attention, paged_prefill_attention, write_kv
from inferlab.paged.blocks import (
    ROOT_HASH,
    Block,
    BlockManager,
    OutOfBlocksError,
    hash_block,
    hash_chain,
)
from inferlab.paged.engine import MiniEngine, Request

__all__ = [
    "ROOT_HASH",
    "Block",
    "BlockManager",
    "OutOfBlocksError",
    "hash_block",
    "hash_chain",
    "paged_attention",
    "paged_prefill_attention",
    "write_kv",
    "MiniEngine",
    "Request",
]
