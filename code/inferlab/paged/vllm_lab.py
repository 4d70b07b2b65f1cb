"""The three NTU experiments with the real vLLM: multi-turn prefix caching, invalidation, cpu_offload_gb.

Runs in Colab as it is (a GPU runtime, then ``pip install vllm``):

    python -m inferlab.paged.vllm_lab                 # all three experiments
    python -m inferlab.paged.vllm_lab --only offload  # one of: multiturn, invalidation, offload

``snippets/paged/vllm_colab.py`` is the same code as one file without ``inferlab``. vLLM is
imported inside the functions, so this module imports (and its helpers can be tested) without it.
The model comes from $INFERLAB_TARGET (default Qwen/Qwen2.5-1.5B-Instruct).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from inferlab.paged.labs import QUESTIONS, harbour_log, invalidation_prompts

MODEL = os.environ.get("INFERLAB_TARGET", "Qwen/Qwen2.5-1.5B-Instruct")


# --8<-- [start:setup]
def make_llm(
    model: str = MODEL,
    enable_prefix_caching: bool = True,
    cpu_offload_gb: float = 0,
    gpu_memory_utilization: float = 0.8,
    max_model_len: int = 4096,
):
    """Return a vllm.LLM with prefix caching on or off, optionally offloading weights to the CPU."""
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # engine in this process: config readable
    from vllm import LLM

    return LLM(
        model=model,
        enable_prefix_caching=enable_prefix_caching,
        cpu_offload_gb=cpu_offload_gb,  # GiB of *weights* kept in CPU memory, streamed in every forward pass
        gpu_memory_utilization=gpu_memory_utilization,
        max_model_len=max_model_len,
        dtype="half",  # the T4 has no bfloat16
        disable_log_stats=False,  # keep the metrics that llm.get_metrics() reads
    )


def prefix_cache_counters(llm) -> tuple[int, int]:
    """Return vLLM's running totals (prefix_cache_queries, prefix_cache_hits), both counted in tokens."""
    totals = {"queries": 0, "hits": 0}
    for metric in llm.get_metrics():
        name = metric.name
        if "external" in name or "mm_" in name:  # other caches (KV connectors, images) have their own counters
            continue
        for kind in totals:
            if name.endswith(f"prefix_cache_{kind}"):
                totals[kind] += int(metric.value)
    return totals["queries"], totals["hits"]


def document_for(tokenizer, min_tokens: int = 1600) -> str:
    """Return the harbour log grown until it is at least ``min_tokens`` tokens for this tokenizer."""
    entries = 30
    while len(tokenizer.encode(harbour_log(entries))) < min_tokens:
        entries += 5
    return harbour_log(entries)


# --8<-- [end:setup]


# --8<-- [start:ttft]
def first_token(llm, prompt: str) -> dict:
    """Return the time to the first token of ``prompt`` and the prompt tokens it found cached."""
    from vllm import SamplingParams

    queries, hits = prefix_cache_counters(llm)
    start = time.perf_counter()
    llm.generate([prompt], SamplingParams(temperature=0.0, max_tokens=1), use_tqdm=False)
    seconds = time.perf_counter() - start
    new_queries, new_hits = prefix_cache_counters(llm)
    return {"ttft_s": seconds, "prompt_tokens": new_queries - queries, "cached_tokens": new_hits - hits}


# --8<-- [end:ttft]


# --8<-- [start:multiturn]
def multiturn(llm, answer_tokens: int = 32) -> list[dict]:
    """Return TTFT and cached tokens of four questions about one long document, asked in turn."""
    from vllm import SamplingParams

    context = document_for(llm.get_tokenizer())
    rows = []
    for turn, question in enumerate(QUESTIONS, start=1):
        context += "\n\n" + question
        rows.append({"turn": turn, **first_token(llm, context)})
        answer = llm.generate([context], SamplingParams(temperature=0.0, max_tokens=answer_tokens), use_tqdm=False)
        context += answer[0].outputs[0].text  # the answer becomes part of the next turn's prompt
    for row in rows:
        row["ttft_vs_turn1"] = row["ttft_s"] / rows[0]["ttft_s"]
    return rows


# --8<-- [end:multiturn]


# --8<-- [start:invalidation]
def invalidation(llm) -> list[dict]:
    """Return TTFT and cached tokens of the five prompt variants (same document, one space moved)."""
    prompts = invalidation_prompts(document_for(llm.get_tokenizer()))
    return [{"run": name, **first_token(llm, prompt)} for name, prompt in prompts.items()]


# --8<-- [end:invalidation]


# --8<-- [start:offload]
def kv_cache_tokens(llm) -> int | None:
    """Return how many tokens the GPU KV cache holds (blocks x block size), or None if not exposed."""
    config = getattr(getattr(llm, "llm_engine", None), "vllm_config", None)
    cache = getattr(config, "cache_config", None)
    blocks, size = getattr(cache, "num_gpu_blocks", None), getattr(cache, "block_size", None)
    return blocks * size if blocks and size else None  # else: read "GPU KV cache size" in vLLM's log


def offload_one(cpu_offload_gb: float, requests: int = 16, new_tokens: int = 128) -> dict:
    """Return KV-cache capacity and decode throughput of one LLM built with ``cpu_offload_gb``."""
    from vllm import SamplingParams

    llm = make_llm(cpu_offload_gb=cpu_offload_gb, enable_prefix_caching=False)
    params = SamplingParams(temperature=0.0, max_tokens=new_tokens, ignore_eos=True)
    prompts = [f"# Task {i}: write a Python function that sorts a list of harbour tides.\n" for i in range(requests)]
    llm.generate(prompts[:1], SamplingParams(max_tokens=4), use_tqdm=False)  # warm up
    result = {"cpu_offload_gb": cpu_offload_gb, "kv_cache_tokens": kv_cache_tokens(llm)}
    for label, batch in (("batch_1", prompts[:1]), (f"batch_{requests}", prompts)):
        start = time.perf_counter()
        outputs = llm.generate(batch, params, use_tqdm=False)
        seconds = time.perf_counter() - start
        result[f"tokens_per_s_{label}"] = sum(len(o.outputs[0].token_ids) for o in outputs) / seconds
    return result


def offload(values: tuple[float, ...] = (0, 2)) -> list[dict]:
    """Return offload_one() for each value, each in a fresh process (a freed LLM does not return all GPU memory)."""
    rows = []
    for gb in values:
        command = [sys.executable, os.path.abspath(__file__), "--offload-one", str(gb)]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return rows


# --8<-- [end:offload]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="vLLM prefix caching and cpu_offload_gb experiments (needs a GPU)")
    parser.add_argument("--only", choices=["multiturn", "invalidation", "offload"])
    parser.add_argument("--offload-one", type=float, help=argparse.SUPPRESS)  # used by offload()
    args = parser.parse_args(argv)
    if args.offload_one is not None:
        print(json.dumps(offload_one(args.offload_one)))
        return 0
    if args.only in (None, "multiturn", "invalidation"):
        llm = make_llm()
        if args.only in (None, "multiturn"):
            for row in multiturn(llm):
                print(json.dumps(row))
        if args.only in (None, "invalidation"):
            for row in invalidation(llm):
                print(json.dumps(row))
        del llm
    if args.only in (None, "offload"):
        for row in offload():
            print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
