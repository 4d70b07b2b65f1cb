"""The benchmark's recorded numbers that are not timings, checked against closed forms."""

from __future__ import annotations

from conftest import tiny_llama
from inferlab.kvcache import LlamaDecoder
from inferlab.kvcache.bench import bench_naive_vs_cached, cache_sizes, causality


def test_recorded_key_counts_equal_closed_forms():
    decoder = LlamaDecoder.from_pretrained(tiny_llama())
    T = 4
    rows = bench_naive_vs_cached(decoder, T, [1, 3, 5], repeat=1)["rows"]
    for row in rows:
        k = row["k"]
        assert row["naive_keys"] == sum(T + step for step in range(k))
        assert row["cached_keys"] == T + k - 1
        assert row["key_ratio"] == row["naive_keys"] / row["cached_keys"]


def test_causality_result_shows_only_bidirectional_changes():
    decoder = LlamaDecoder.from_pretrained(tiny_llama(layers=3))
    values = causality(decoder, T=6)
    assert values["causal_all_identical"] is True
    assert values["bidirectional_layers_changed"] == 2  # every layer but the first
    assert values["rows"][0]["bidirectional_max_change"] == 0.0


def test_size_table_by_hand():
    decoder = LlamaDecoder.from_pretrained(tiny_llama())  # 2 layers, 2 kv heads of 8 dims
    values = cache_sizes(decoder, tokens=1024, free_gib=1)
    llama = next(row for row in values["rows"] if row["model"] == "Llama-3.2-3B")
    assert llama["KiB_per_token"] == 2 * 28 * 8 * 128 * 2 / 1024
    assert llama["max_batch_in_1_GiB"] == 2**30 // (2 * 28 * 8 * 128 * 2 * 1024)
    assert values["bundled_target"]["KiB_per_token_fp32"] == 2 * 2 * 2 * 8 * 4 / 1024
