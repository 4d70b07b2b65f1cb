"""The invalidation outcomes (vs brute-force common prefixes), fragmentation and the offload cost model (closed forms)."""

from __future__ import annotations

import pytest
import torch

from inferlab.models import load_tokenizer
from inferlab.paged import BlockManager
from inferlab.paged.labs import fragmentation_example, harbour_log, invalidation_prompts
from inferlab.paged.offload import (
    GB,
    OFFLOAD_PRESETS,
    StreamLayersFromHost,
    kv_capacity_tokens,
    step_seconds,
    tokens_per_second,
)

BLOCK = 16


def longest_shared_prefix(ids, earlier):
    """Brute force: the longest prefix ids shares with any earlier prompt (token by token)."""
    best = 0
    for other in earlier:
        n = 0
        while n < min(len(ids), len(other)) and ids[n] == other[n]:
            n += 1
        best = max(best, n)
    return best


@pytest.fixture(scope="module")
def variant_ids():
    tokenizer = load_tokenizer()
    return {name: tokenizer(text)["input_ids"] for name, text in invalidation_prompts(harbour_log()).items()}


def test_shared_document_is_long_enough(variant_ids):
    assert len(variant_ids["first"]) >= 1500


def test_invalidation_hits_match_brute_force_common_prefixes(variant_ids):
    manager, earlier, hits = BlockManager(1024, BLOCK), [], {}
    for name, ids in variant_ids.items():
        _, cached = manager.allocate(name, ids)
        shared = longest_shared_prefix(ids, earlier)
        # Whole blocks of the shared prefix hit, but the last token is always recomputed.
        assert cached == min(shared, len(ids) - 1) // BLOCK * BLOCK, name
        hits[name] = cached
        earlier.append(ids)
    n = len(variant_ids["first"])
    assert hits["first"] == 0
    assert hits["identical"] >= n - BLOCK  # everything but the last block
    assert hits["space before document"] < 64  # only the instruction's blocks; the document misses
    assert hits["space after document"] >= n - 3 * BLOCK  # the whole document hits
    assert hits["change at the very start"] == 0


def test_fragmentation_matches_hand_counts():
    values = fragmentation_example([5, 16, 17], max_len=40, block_size=16)
    assert values["used_slots"] == 38
    assert values["contiguous_reserved_slots"] == 120
    assert values["paged_reserved_slots"] == 16 + 16 + 32  # ceil(n / 16) blocks each
    assert values["paged_waste"] == pytest.approx(1 - 38 / 64)
    with pytest.raises(ValueError, match=r"lengths must be an integer in \[1, 40\], got 50"):
        fragmentation_example([50], max_len=40)


def test_offload_cost_model_closed_form():
    t4 = OFFLOAD_PRESETS["T4"]
    weights = 3e9
    assert step_seconds(weights, 0, "T4") == pytest.approx(3e9 / (320e9))
    assert step_seconds(weights, 1e9, "T4") == pytest.approx(1e9 / (t4.link_gb_s * GB) + 2e9 / (320e9))
    assert tokens_per_second(weights, weights, "T4", batch=4) == pytest.approx(4 * t4.link_gb_s * GB / 3e9)
    # Every offloaded GB frees a GB of GPU memory for KV blocks: 1e9 / 1000 bytes = 1e6 more tokens.
    more = kv_capacity_tokens(weights, 1e9, "T4", 1000) - kv_capacity_tokens(weights, 0, "T4", 1000)
    assert more == 1_000_000
    assert kv_capacity_tokens(weights, 0, "T4", 1000) == int((16e9 * 0.9 - 3e9 - 1e9) // 1000)


def test_offload_cost_model_rejects_bad_arguments():
    with pytest.raises(ValueError, match="offloaded_bytes must be in 0..weight_bytes"):
        step_seconds(1e9, 2e9, "T4")
    with pytest.raises(ValueError, match="gpu must be one of"):
        step_seconds(1e9, 0, "A100")
    with pytest.raises(ValueError, match="batch must be an integer >= 1"):
        tokens_per_second(1e9, 0, "T4", batch=0)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_streaming_layers_from_host_keeps_the_logits(tiny_pair, device):
    from inferlab.kvcache.decoder import LlamaDecoder

    decoder = LlamaDecoder.from_pretrained(tiny_pair[0]).to(device)
    ids = torch.randint(0, 97, (2, 12), device=device)
    weight_bytes = sum(p.numel() * p.element_size() for p in decoder.layers[0].parameters())
    with torch.no_grad():
        expected = decoder(ids)
        streamer = StreamLayersFromHost(decoder, num_offloaded=1)
        assert streamer.offloaded_bytes == weight_bytes  # exactly the first layer's weights left
        assert decoder.layers[0].q_proj.weight.numel() == 0  # ... and are gone from the device
        streamed = decoder(ids)
        assert decoder.layers[0].q_proj.weight.numel() == 0  # dropped again after the layer ran
        streamer.restore()
    torch.testing.assert_close(streamed, expected)
    torch.testing.assert_close(decoder(ids), expected)
    with pytest.raises(ValueError, match="num_offloaded must be an integer in 0..2"):
        StreamLayersFromHost(decoder, num_offloaded=3)


def test_multiturn_lab_caches_what_the_previous_turn_computed():
    """Closed form: turn i finds cached every full block of turn i-1's prompt plus its answer minus the last token."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from inferlab.paged.labs import multiturn_lab

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=8192,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=2048,
    )
    answer = 16
    result = multiturn_lab(LlamaForCausalLM(config).eval(), load_tokenizer(), max_new_tokens=answer, repeats=1)
    turns = result["turns"]
    assert result["document_tokens"] >= 1500
    assert turns[0]["cached_tokens"] == 0
    for previous, turn in zip(turns, turns[1:], strict=False):
        # The last sampled token of an answer is never fed back, so its key was never computed.
        computed_before = previous["prompt_tokens"] + answer - 1
        assert turn["cached_tokens"] == min(computed_before, turn["prompt_tokens"] - 1) // BLOCK * BLOCK
        assert turn["computed_tokens"] == turn["prompt_tokens"] - turn["cached_tokens"]
