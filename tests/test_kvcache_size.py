"""kv_cache_bytes against the bytes real caches occupy, and against hand arithmetic for the presets."""

from __future__ import annotations

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, LlavaConfig

from inferlab.kvcache import (
    PRESETS,
    KVCache,
    LlamaDecoder,
    attention_variants,
    kv_bytes_per_token,
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


# ----------------------------------------------------------------------------------------------
# Fallbacks: configs that name things differently or leave fields out, and every dtype.


def cache_bytes_held(model, batch, tokens):
    """Run the model with transformers' own cache and add up the bytes its keys and values hold."""
    with torch.no_grad():
        cache = model(torch.randint(0, 50, (batch, tokens)), use_cache=True).past_key_values
    return sum(layer.keys.nbytes + layer.values.nbytes for layer in cache.layers)


def test_config_without_kv_heads_or_head_dim_falls_back_to_plain_multi_head_attention():
    # GPT-2's config has neither num_key_value_heads nor head_dim: every query head has its own
    # key/value head, and head_dim is hidden_size / heads (32 / 4 = 8).
    config = GPT2Config(n_layer=2, n_head=4, n_embd=32, vocab_size=50, n_positions=64, bos_token_id=0, eos_token_id=0)
    assert getattr(config, "num_key_value_heads", None) is None and getattr(config, "head_dim", None) is None
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config).eval()
    held = cache_bytes_held(model, batch=3, tokens=11)
    assert kv_cache_bytes(config, tokens=11, batch=3, dtype=torch.float32) == held
    assert kv_cache_bytes(model, tokens=11, batch=3, dtype=torch.float32) == held  # a model: its config
    assert attention_variants(config) == {"MHA": 4, "GQA": 4, "MQA": 1}


def test_a_multimodal_config_is_sized_by_its_language_model():
    model = small_llama(2)
    wrapped = LlavaConfig(text_config=model.config.to_dict())  # the language model sits in text_config
    assert kv_cache_bytes(wrapped, tokens=9, batch=2, dtype=torch.float32) == cache_bytes_held(model, 2, 9)
    assert attention_variants(wrapped) == {"MHA": 6, "GQA": 2, "MQA": 1}


def test_a_plain_dict_with_the_decoders_field_names():
    config = {"num_layers": 5, "num_heads": 8, "num_kv_heads": 2, "hidden_size": 256}
    # 2 (K and V) x 5 layers x 2 kv heads x (256 / 8 = 32) dims x 4 bytes, 10 tokens.
    assert kv_cache_bytes(config, tokens=10, dtype="fp32") == 2 * 5 * 2 * 32 * 4 * 10


# Each name the calculator accepts, with the torch dtype whose element size it must give.
DTYPE_NAMES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "float16": torch.float16,
    "fp16": torch.float16,
    "half": torch.float16,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float8": torch.float8_e4m3fn,
    "fp8": torch.float8_e4m3fn,
    "int8": torch.int8,
    "torch.bfloat16": torch.bfloat16,
    "BF16": torch.bfloat16,
}


@pytest.mark.parametrize("name", sorted(DTYPE_NAMES))
def test_every_dtype_name_costs_what_torch_stores(name):
    dtype = DTYPE_NAMES[name]
    element = torch.empty((), dtype=dtype).element_size()
    per_token = 2 * 28 * 8 * 128  # Llama-3.2-3B: K and V x layers x kv heads x head_dim
    assert kv_cache_bytes("Llama-3.2-3B", tokens=3, batch=2, dtype=name) == per_token * 3 * 2 * element
    assert kv_cache_bytes("Llama-3.2-3B", tokens=3, batch=2, dtype=dtype) == per_token * 3 * 2 * element


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float8_e4m3fn, "fp32", "int8"])
def test_max_batch_size_honours_the_dtype(dtype):
    element = torch.empty((), dtype=DTYPE_NAMES.get(dtype, dtype)).element_size()
    per_sequence = 2 * 28 * 2 * 128 * 4096 * element  # Qwen2.5-1.5B, 4096 tokens, by hand
    free = 7 * per_sequence + per_sequence // 2  # room for 7.5 sequences: 7 fit
    assert max_batch_size("Qwen2.5-1.5B", 4096, free, dtype=dtype) == 7
    assert max_batch_size("Qwen2.5-1.5B", 4096, 7 * per_sequence, dtype=dtype) == 7  # exactly full
    assert max_batch_size("Qwen2.5-1.5B", 4096, 7 * per_sequence - 1, dtype=dtype) == 6


def test_bytes_per_token_is_one_token_of_one_sequence():
    assert kv_bytes_per_token("Gemma-3-1B") == 2 * 26 * 1 * 256 * 2  # fp16 by default
    assert kv_bytes_per_token("Gemma-3-1B", dtype=torch.float32) == 2 * 26 * 1 * 256 * 4


def test_zero_tokens_or_batch_cost_nothing_but_max_batch_needs_a_token():
    assert kv_cache_bytes("Gemma-3-1B", tokens=0) == 0
    assert kv_cache_bytes("Gemma-3-1B", tokens=8, batch=0) == 0
    with pytest.raises(ValueError, match="tokens must be an integer >= 1"):
        max_batch_size("Gemma-3-1B", 0, 10**9)
    with pytest.raises(ValueError, match="free_bytes must be an integer >= 0"):
        max_batch_size("Gemma-3-1B", 8, -1)
    with pytest.raises(ValueError, match="tokens must be an integer >= 0"):
        kv_cache_bytes("Gemma-3-1B", tokens=True)  # a bool is not a count
