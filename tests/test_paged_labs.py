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
    slowdown,
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


def test_offload_presets_agree_with_the_flash_presets():
    from inferlab.flash.traffic import GPU_PRESETS

    for name, spec in OFFLOAD_PRESETS.items():
        assert spec.fp16_tflops == GPU_PRESETS[name].fp16_tflops
        assert spec.memory_gb_s == GPU_PRESETS[name].bandwidth_gbs


def test_offload_slowdown_does_not_depend_on_batch_until_compute_counts():
    # Closed forms of the roofline per part: 3 GB of fp16 weights (1.5e9 of them), 1 GB offloaded.
    t4 = OFFLOAD_PRESETS["T4"]
    weights, offloaded, peak = 3e9, 1e9, t4.fp16_tflops * 1e12
    memory_bound = 1e9 / (t4.link_gb_s * GB) + 2e9 / (t4.memory_gb_s * GB)
    for batch in (1, 8, 32):  # 2 * 1.5e9 * 32 FLOPs take 1.5 ms; the reads take 9.4 ms and more
        assert step_seconds(weights, offloaded, "T4", batch) == pytest.approx(memory_bound)
        assert slowdown(weights, offloaded, "T4", batch) == pytest.approx(memory_bound / (3e9 / (t4.memory_gb_s * GB)))
    # At batch 4096 the resident part computes longer than it reads: 2 * 1e9 * 4096 FLOPs at peak.
    resident_compute = 2 * 1e9 * 4096 / peak
    assert resident_compute > 2e9 / (t4.memory_gb_s * GB)
    streamed = max(1e9 / (t4.link_gb_s * GB), 2 * 0.5e9 * 4096 / peak)
    assert step_seconds(weights, offloaded, "T4", 4096) == pytest.approx(streamed + resident_compute)
    assert slowdown(weights, offloaded, "T4", 4096) < slowdown(weights, offloaded, "T4", 1)


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


def committed(name: str) -> dict:
    from inferlab.bench import read_result

    return read_result(name)["values"]


def test_the_same_uncached_prompt_costs_the_same_in_every_committed_lab():
    # The invalidation lab's first run and the multi-turn lab's first turn (no cache) both prefill
    # the shared document and the first question from nothing: a busy machine during one of them
    # would show up here as a disagreement.
    first = next(r for r in committed("paged_invalidation")["runs"] if r["run"] == "first")
    turn1 = committed("paged_multiturn")["turns"][0]
    assert abs(first["prompt_tokens"] - turn1["prompt_tokens"]) <= 2
    assert 0.8 <= first["ttft_ms"] / turn1["ttft_ms_no_cache"] <= 1.25
    assert 0.8 <= first["forward_ms"] / turn1["forward_ms"] <= 1.25


def test_committed_paged_results_are_steady_and_prefill_keeps_up_with_transformers():
    from inferlab.bench import SPREAD_LIMIT, unsteady

    for name in ("paged_invalidation", "paged_multiturn", "paged_throughput"):
        assert unsteady(committed(name)) == [], f"{name} was measured on a busy machine (spread > {SPREAD_LIMIT})"
    first = next(r for r in committed("paged_invalidation")["runs"] if r["run"] == "first")
    assert first["ttft_vs_forward"] <= 1.3  # the engine's uncached prefill against transformers' forward


def test_unsteady_finds_every_spread_above_the_limit():
    from inferlab.bench import spread, unsteady

    assert spread([1.0, 1.2, 2.0]) == 2.0
    values = {"rows": [{"spread": 1.1}, {"spread": 1.6}], "plain_spread": 2.5, "nested": {"x": {"spread": 1.5}}}
    assert unsteady(values) == ["values.rows[1].spread = 1.6", "values.plain_spread = 2.5"]
    with pytest.raises(ValueError, match="seconds must be a non-empty list of positive timings"):
        spread([])
