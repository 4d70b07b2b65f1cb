"""The KV cache: a readable Llama decoder, naive vs cached generation with counted keys, cache sizing."""

from inferlab.kvcache.decoder import DecoderConfig, DecoderLayer, LlamaDecoder, causal_attention

__all__ = ["DecoderConfig", "DecoderLayer", "LlamaDecoder", "causal_attention"]
