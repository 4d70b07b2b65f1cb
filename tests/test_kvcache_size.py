"""kv_cache_bytes against the bytes real caches occupy, and against hand arithmetic for the presets."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from inferlab.kvcache import (
    PRESETS,
    KVCache,
    LlamaDecoder,
    attention_variants,
    kv_cache_bytes,
    max_batch_size,
)


def small_llama(kv_heads):
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=50,
        hidden_size=48,
        intermediate_size=32,
        num_hidden_layers=3,
        num_attention_heads=6,
        num_key_value_heads=kv_heads,
        max_position_embeddings=64,
    )
    return LlamaForCausalLM(config).eval()


@pytest.mark.parametrize("kv_heads", [6, 2, 1], ids=["MHA", "GQA", "MQA"])
def test_bytes_equal_transformers_dynamic_cache(kv_heads):
    """Run transformers with its own cache and add up the bytes of every key and value tensor it holds."""
    model = small_llama(kv_heads)
    ids = torch.randint(0, 50, (3, 11))
    with torch.no_grad():
        cache = model(ids, use_cache=True).past_key_values
    held = sum(layer.keys.nbytes + layer.values.nbytes for layer in cache.layers)
    assert kv_cache_bytes(model.config, tokens=11, batch=3, dtype=torch.float32) == held


def test_bytes_equal_our_preallocated_cache():
    decoder = LlamaDecoder.from_pretrained(small_llama(2)).to(torch.bfloat16)
    cache = KVCache(decoder, batch=2, max_tokens=40)
    held = cache.keys.nbytes + cache.values.nbytes
    assert kv_cache_bytes(decoder, tokens=40, batch=2, dtype=decoder.dtype) == held


def test_presets_by_hand():
    # Llama-3.2-3B in bf16: 2 (K and V) x 28 layers x 8 kv heads x 128 dims x 2 bytes per token.
    assert kv_cache_bytes("Llama-3.2-3B", tokens=1, dtype="bf16") == 2 * 28 * 8 * 128 * 2
    # Gemma-3-1B: 26 layers, a single kv head of 256 dims (MQA), 4096 tokens, batch 8, fp16.
    assert kv_cache_bytes("Gemma-3-1B", tokens=4096, batch=8, dtype=torch.float16) == 2 * 26 * 1 * 256 * 2 * 4096 * 8
    # Qwen2.5-1.5B in fp32: 28 layers x 2 kv heads x 128 dims x 4 bytes, 1000 tokens.
    assert kv_cache_bytes(PRESETS["Qwen2.5-1.5B"], tokens=1000, dtype="float32") == 2 * 28 * 2 * 128 * 4 * 1000
    for preset in PRESETS.values():
        assert preset["source"].startswith("https://huggingface.co/")


def test_attention_variants_scale_the_cache():
    variants = attention_variants("Llama-3.2-3B")
    assert variants == {"MHA": 24, "GQA": 8, "MQA": 1}


def test_max_batch_size_by_brute_force():
    free = 3 * 2**30
    expected = 0
    while kv_cache_bytes("Qwen2.5-1.5B", 8192, batch=expected + 1) <= free:
        expected += 1
    assert max_batch_size("Qwen2.5-1.5B", 8192, free) == expected


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="tokens must be an integer >= 0"):
        kv_cache_bytes("Gemma-3-1B", tokens=-1)
    with pytest.raises(ValueError, match="batch must be an integer >= 0"):
        kv_cache_bytes("Gemma-3-1B", tokens=8, batch=1.5)
    with pytest.raises(ValueError, match="dtype must be"):
        kv_cache_bytes("Gemma-3-1B", tokens=8, dtype="int3")
    with pytest.raises(ValueError, match="preset name"):
        kv_cache_bytes("Llama-9-Giant", tokens=8)
    with pytest.raises(ValueError, match="num_hidden_layers"):
        kv_cache_bytes({"hidden_size": 64}, tokens=8)
