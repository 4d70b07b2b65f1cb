"""The KV cache: a readable Llama decoder, naive vs cached generation with counted keys, cache sizing.

- :mod:`inferlab.kvcache.decoder`: ``LlamaDecoder`` (loads any Hugging Face Llama checkpoint), its
  per-layer ``qkv`` / ``finish`` halves, and ``causal_attention``.
- :mod:`inferlab.kvcache.generate`: ``generate_naive`` and ``generate_cached`` (with ``KVCache``),
  both counting the key projections they compute.
- :mod:`inferlab.kvcache.size`: ``kv_cache_bytes`` and presets for three real models.
"""

from inferlab.kvcache.decoder import DecoderConfig, DecoderLayer, LlamaDecoder, causal_attention
from inferlab.kvcache.generate import (
    GenerationResult,
    KVCache,
    forward_with_cache,
    generate_cached,
    generate_naive,
)
from inferlab.kvcache.size import (
    PRESETS,
    attention_variants,
    bytes_per_element,
    cache_shape,
    kv_bytes_per_token,
    kv_cache_bytes,
    max_batch_size,
)

__all__ = [
    "PRESETS",
    "DecoderConfig",
    "DecoderLayer",
    "GenerationResult",
    "KVCache",
    "LlamaDecoder",
    "attention_variants",
    "bytes_per_element",
    "cache_shape",
    "causal_attention",
    "forward_with_cache",
    "generate_cached",
    "generate_naive",
    "kv_bytes_per_token",
    "kv_cache_bytes",
    "max_batch_size",
]
