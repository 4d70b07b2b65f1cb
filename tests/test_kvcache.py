"""The readable decoder and the two generation loops, checked against transformers and closed forms."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM

from conftest import tiny_llama
from inferlab.kvcache import (
    DecoderConfig,
    KVCache,
    LlamaDecoder,
    causal_attention,
    forward_with_cache,
    generate_cached,
    generate_naive,
)
from inferlab.models import bundled_available


def llama(heads=4, kv_heads=2, tie=False, theta=10000.0, eps=1e-6, bias=False, layers=2, seed=0, vocab=61):
    """A random Llama with the options the decoder must honour."""
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=8 * heads,
        intermediate_size=48,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=64,
        tie_word_embeddings=tie,
        rope_theta=theta,
        rms_norm_eps=eps,
        attention_bias=bias,
        mlp_bias=bias,
    )
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():  # fresh norms have gain 1, which would hide a decoder that ignored the gains
        for name, parameter in model.named_parameters():
            if "norm" in name:
                parameter.uniform_(0.5, 1.5)
    return model


def hf_greedy(model, ids, k):
    """Hugging Face's own greedy generate, made to run exactly k steps (no end-of-text stop)."""
    model.generation_config.eos_token_id = None
    with torch.no_grad():
        # An explicit all-ones mask: otherwise a prompt token equal to pad_token_id would be masked.
        mask = torch.ones_like(ids)
        return model.generate(ids, attention_mask=mask, max_new_tokens=k, do_sample=False, pad_token_id=0)


# The closed forms: generating k tokens after a T-token prompt, counted per layer and sequence.
def naive_keys(T, k):
    return sum(T + step for step in range(k))  # step i runs the model over all T + i tokens


def cached_keys(T, k):
    return 0 if k == 0 else T + (k - 1)  # the prompt once, then one new token per later step


@pytest.mark.parametrize(
    "options",
    [dict(), dict(kv_heads=4), dict(kv_heads=1), dict(tie=True), dict(theta=500000.0, eps=1e-5), dict(bias=True)],
    ids=["gqa", "mha", "mqa", "tied", "theta-eps", "bias"],
)
def test_logits_match_transformers(options):
    model = llama(**options)
    decoder = LlamaDecoder.from_pretrained(model)
    ids = torch.randint(0, 61, (2, 23))
    with torch.no_grad():
        difference = (decoder(ids) - model(ids).logits).abs().max().item()
    assert difference < 1e-4


def test_config_values_exposed():
    decoder = LlamaDecoder.from_pretrained(llama(heads=6, kv_heads=2, layers=3))
    assert (decoder.num_layers, decoder.num_heads, decoder.num_kv_heads) == (3, 6, 2)
    assert (decoder.head_dim, decoder.vocab_size, decoder.max_positions) == (8, 61, 64)


def test_loads_from_a_local_path(tmp_path):
    model = llama(tie=True)
    model.save_pretrained(tmp_path)
    decoder = LlamaDecoder.from_pretrained(tmp_path)
    ids = torch.randint(0, 61, (1, 9))
    with torch.no_grad():
        assert (decoder(ids) - model(ids).logits).abs().max().item() < 1e-4


@pytest.mark.skipif(not bundled_available(), reason="the bundled pair has not been trained yet")
def test_bundled_target_logits_match(bundled_pair):
    target, _, tokenizer = bundled_pair
    decoder = LlamaDecoder.from_pretrained(target)
    ids = tokenizer("The cache keeps every key it has computed.", return_tensors="pt").input_ids
    with torch.no_grad():
        assert (decoder(ids) - target(ids).logits).abs().max().item() < 1e-4


@pytest.mark.parametrize("q_start,q_len,k_len", [(0, 7, 7), (5, 3, 8), (9, 1, 10)])
def test_causal_attention_matches_pytorch_sdpa(q_start, q_len, k_len):
    torch.manual_seed(1)
    q_full = torch.randn(2, 6, k_len, 8)
    k, v = torch.randn(2, 2, k_len, 8), torch.randn(2, 2, k_len, 8)
    # PyTorch's own attention over the whole square, each key/value head copied for its 3 query heads.
    reference = F.scaled_dot_product_attention(
        q_full, k.repeat_interleave(3, dim=1), v.repeat_interleave(3, dim=1), is_causal=True
    )
    ours = causal_attention(q_full[:, :, q_start : q_start + q_len], k, v, q_start=q_start)
    torch.testing.assert_close(ours, reference[:, :, q_start : q_start + q_len], atol=1e-6, rtol=1e-5)


def test_bidirectional_attention_matches_pytorch_sdpa():
    torch.manual_seed(2)
    q, k, v = torch.randn(1, 4, 5, 8), torch.randn(1, 4, 5, 8), torch.randn(1, 4, 5, 8)
    reference = F.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(causal_attention(q, k, v, causal=False), reference, atol=1e-6, rtol=1e-5)


def test_chunked_prefill_matches_transformers():
    """Feeding the prompt in two chunks through the cache gives the last logits of one full forward."""
    model = llama(heads=6, kv_heads=2)
    decoder = LlamaDecoder.from_pretrained(model)
    ids = torch.randint(0, 61, (1, 12))
    cache = KVCache(decoder, batch=1, max_tokens=12)
    with torch.no_grad():
        forward_with_cache(decoder, cache, ids[:, :5])
        last = forward_with_cache(decoder, cache, ids[:, 5:])
        reference = model(ids).logits[:, -1]
    assert cache.length == 12
    assert (last - reference).abs().max().item() < 1e-4


@pytest.mark.parametrize("batch", [1, 3])
def test_every_sequence_of_a_batch_counts_its_keys(batch):
    """A key vector is computed per sequence, position and layer: batch x T x layers in all."""
    decoder = LlamaDecoder.from_pretrained(tiny_llama())
    ids = torch.randint(0, 97, (batch, 6))
    decoder.reset_counts()
    with torch.no_grad():
        decoder(ids)
        cache = KVCache(decoder, batch, 16)
        forward_with_cache(decoder, cache, ids)
        forward_with_cache(decoder, cache, ids[:, :1])
    assert decoder.keys_computed == decoder.num_layers * batch * (6 + 6 + 1)


@pytest.mark.parametrize("T", [1, 2, 5, 16])
@pytest.mark.parametrize("k", [0, 1, 2, 7])
def test_key_counts_equal_closed_forms(T, k):
    decoder = LlamaDecoder.from_pretrained(tiny_llama())
    ids = torch.randint(0, 97, (1, T))
    naive, cached = generate_naive(decoder, ids, k), generate_cached(decoder, ids, k)
    assert naive.keys_per_layer == naive_keys(T, k)
    assert cached.keys_per_layer == cached_keys(T, k)
    assert naive.keys_computed == decoder.num_layers * naive_keys(T, k)
    assert cached.keys_computed == decoder.num_layers * cached_keys(T, k)


@pytest.mark.parametrize("T,k", [(1, 12), (4, 20), (17, 9)])
def test_naive_cached_and_transformers_generate_agree(T, k):
    model = tiny_llama(heads=4, kv_heads=2)
    decoder = LlamaDecoder.from_pretrained(model)
    ids = torch.randint(0, 97, (2, T))
    reference = hf_greedy(model, ids, k)
    assert torch.equal(generate_naive(decoder, ids, k).tokens, reference)
    assert torch.equal(generate_cached(decoder, ids, k).tokens, reference)


@pytest.mark.parametrize("kv_heads", [2, 1], ids=["gqa", "mqa"])
def test_logits_along_a_whole_generation_match_transformers(kv_heads):
    """Prefill and every decode step give transformers' own logits, not just the same argmax.

    Greedy tokens on a small random model survive small errors (stale rotary angles, say, shift
    the logits by 1e-2 without changing the argmax), so each step's logits are compared.
    """
    model = llama(heads=4, kv_heads=kv_heads, layers=2, seed=3)
    decoder = LlamaDecoder.from_pretrained(model)
    prompt, steps = torch.randint(0, 61, (2, 7)), 12
    model.generation_config.eos_token_id = None
    with torch.no_grad():
        reference = model.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            max_new_tokens=steps,
            do_sample=False,
            pad_token_id=0,
            output_logits=True,
            return_dict_in_generate=True,
        )
    generated = reference.sequences[:, prompt.shape[1] :]
    cache = KVCache(decoder, batch=2, max_tokens=prompt.shape[1] + steps)
    with torch.no_grad():
        ours = [forward_with_cache(decoder, cache, prompt)]  # prefill
        for step in range(steps - 1):  # decode: feed transformers' own token, one per step
            ours.append(forward_with_cache(decoder, cache, generated[:, step : step + 1]))
        for step, (mine, theirs) in enumerate(zip(ours, reference.logits, strict=True)):
            assert (mine - theirs).abs().max().item() < 1e-4, f"step {step}"
        # The naive loop recomputes everything; its last-position logits must agree too.
        for step in range(steps):
            ids = reference.sequences[:, : prompt.shape[1] + step]
            assert (decoder(ids)[:, -1] - reference.logits[step]).abs().max().item() < 1e-4, f"naive step {step}"


def test_appended_token_leaves_earlier_keys_unchanged_only_when_causal():
    decoder = LlamaDecoder.from_pretrained(llama(layers=3))
    prefix = torch.randint(0, 61, (1, 10))
    # Two sequences that differ only in the token appended after the prefix.
    first = torch.cat([prefix, torch.tensor([[3]])], dim=1)
    second = torch.cat([prefix, torch.tensor([[4]])], dim=1)
    with torch.no_grad():
        causal = zip(decoder.layer_keys(first), decoder.layer_keys(second), strict=True)
        bidirectional = list(
            zip(decoder.layer_keys(first, causal=False), decoder.layer_keys(second, causal=False), strict=True)
        )
        for keys_a, keys_b in causal:
            assert torch.equal(keys_a[:, :, :10], keys_b[:, :, :10])  # bit for bit
        # Layer 0's keys come from each token alone; every later layer has mixed in the new token.
        assert torch.equal(bidirectional[0][0][:, :, :10], bidirectional[0][1][:, :, :10])
        for keys_a, keys_b in bidirectional[1:]:
            assert (keys_a[:, :, :10] - keys_b[:, :, :10]).abs().max().item() > 1e-4
        # Against the shorter sequence itself: equal up to rounding of differently shaped products.
        for short, long in zip(decoder.layer_keys(prefix), decoder.layer_keys(first), strict=True):
            torch.testing.assert_close(short, long[:, :, :10], atol=1e-6, rtol=0)


def test_bad_input_is_refused_before_work():
    decoder = LlamaDecoder.from_pretrained(llama())  # 64 positions
    with pytest.raises(ValueError, match="T >= 1"):
        generate_cached(decoder, torch.zeros((1, 0), dtype=torch.long), 3)
    with pytest.raises(ValueError, match="max_new_tokens"):
        generate_naive(decoder, torch.zeros((1, 4), dtype=torch.long), -1)
    with pytest.raises(ValueError, match="maximum of 64 positions"):
        generate_cached(decoder, torch.zeros((1, 60), dtype=torch.long), 5)
    with pytest.raises(ValueError, match="maximum of 64 positions"):
        decoder(torch.zeros((1, 65), dtype=torch.long))
    with pytest.raises(TypeError, match="integer"):
        decoder(torch.zeros((1, 4)))
    assert decoder.keys_computed == 0  # nothing ran


def test_bad_configs_are_refused():
    with pytest.raises(ValueError, match="multiple of num_kv_heads"):
        DecoderConfig(
            vocab_size=10,
            hidden_size=24,
            intermediate_size=8,
            num_layers=1,
            num_heads=6,
            num_kv_heads=4,
            head_dim=4,
            max_positions=8,
        )
    scaled = LlamaConfig(hidden_size=32, num_attention_heads=4, rope_scaling={"rope_type": "linear", "factor": 2.0})
    with pytest.raises(ValueError, match="rope_type"):
        DecoderConfig.from_hf(scaled)
    with pytest.raises(TypeError, match="path_or_model"):
        LlamaDecoder.from_pretrained(42)


@pytest.mark.parametrize(("heads", "kv_heads"), [(4, 4), (6, 2), (4, 1)])
@pytest.mark.parametrize(("q_len", "k_len", "causal"), [(7, 7, True), (3, 10, True), (1, 9, True), (5, 5, False)])
def test_fused_attention_equals_the_explicit_causal_attention(heads, kv_heads, q_len, k_len, causal):
    # The fused kernel the fast paths use must compute what the readable causal_attention computes:
    # a whole prompt (the kernel's own causal mask), queries after a cached prefix, one decode
    # query, and bidirectional attention.
    from inferlab.kvcache.decoder import fused_attention

    torch.manual_seed(0)
    q = torch.randn(2, heads, q_len, 8)
    k, v = torch.randn(2, kv_heads, k_len, 8), torch.randn(2, kv_heads, k_len, 8)
    start = k_len - q_len
    expected = causal_attention(q, k, v, q_start=start, causal=causal)
    torch.testing.assert_close(fused_attention(q, k, v, q_start=start, causal=causal), expected, atol=1e-5, rtol=1e-5)


def test_fused_attention_with_an_explicit_mask_follows_the_mask():
    from inferlab.kvcache.decoder import fused_attention

    torch.manual_seed(0)
    q, k, v = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4)
    allowed = torch.tensor([[1, 0, 1, 0, 0], [1, 1, 0, 0, 1], [0, 0, 0, 1, 1]], dtype=torch.bool)
    scores = (q @ k.transpose(-1, -2)) / 2.0  # sqrt(head_dim = 4)
    expected = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1) @ v
    torch.testing.assert_close(fused_attention(q, k, v, allowed=allowed), expected, atol=1e-6, rtol=1e-5)
