"""The real-vLLM lab: its metric reading (offline, with stand-in metrics) and the experiments (GPU + vLLM)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from inferlab.models import load_tokenizer
from inferlab.paged import vllm_lab


@dataclass
class FakeMetric:
    name: str
    value: float


class FakeLLM:
    def __init__(self, metrics):
        self.metrics = metrics

    def get_metrics(self):
        return self.metrics


def test_prefix_cache_counters_read_vllm_metric_names():
    llm = FakeLLM(
        [
            FakeMetric("vllm:prefix_cache_queries", 3000),
            FakeMetric("vllm:prefix_cache_hits", 1648),
            FakeMetric("vllm:external_prefix_cache_hits", 999),  # a KV connector's cache: not ours
            FakeMetric("vllm:mm_cache_queries", 5),
            FakeMetric("vllm:num_requests_running", 1),
        ]
    )
    assert vllm_lab.prefix_cache_counters(llm) == (3000, 1648)


def test_document_is_grown_to_the_token_budget():
    tokenizer = load_tokenizer()
    document = vllm_lab.document_for(tokenizer, min_tokens=1600)
    assert len(tokenizer.encode(document)) >= 1600


@pytest.mark.gpu
@pytest.mark.vllm
@pytest.mark.slow
def test_vllm_invalidation_and_multiturn_on_the_bundled_target():
    pytest.importorskip("vllm")
    from inferlab.models import BUNDLED_DIR

    llm = vllm_lab.make_llm(str(BUNDLED_DIR / "target"), gpu_memory_utilization=0.3, max_model_len=2048)
    runs = {row["run"]: row for row in vllm_lab.invalidation(llm)}
    assert runs["first"]["cached_tokens"] == 0
    assert runs["identical"]["cached_tokens"] >= runs["identical"]["prompt_tokens"] - 16
    assert runs["space before document"]["cached_tokens"] < 64
    assert runs["space after document"]["cached_tokens"] >= runs["space after document"]["prompt_tokens"] - 48
    assert runs["change at the very start"]["cached_tokens"] == 0
    turns = vllm_lab.multiturn(llm, answer_tokens=8)
    assert all(t["cached_tokens"] > 0 for t in turns[1:])
