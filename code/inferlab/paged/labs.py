"""The CPU labs: multi-turn prefix caching, cache invalidation, and serving throughput.

Everything here runs the bundled model through :class:`~inferlab.paged.engine.MiniEngine` and
returns plain records; ``python -m inferlab.paged.bench`` writes them to result files and plots.
The shared document is generated here (our own text, fixed by a seed), written as a Python module
because the bundled model was trained on Python source.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from typing import Any

import torch

from inferlab.bench import SPREAD_LIMIT, garbage_collector_off, spread, time_interleaved
from inferlab.checks import require_int
from inferlab.kvcache.decoder import LlamaDecoder
from inferlab.paged.blocks import BlockManager, hash_chain
from inferlab.paged.engine import MiniEngine, as_decoder

# --8<-- [start:document]
INSTRUCTION = "# Read the harbour log below, then answer each question with one line of Python.\n"
QUESTIONS = [
    "# Question 1: which boat came home first on day 3?\n",
    "# Question 2: what was the highest tide in the log?\n",
    "# Question 3: on which days did the wind blow from the west?\n",
    "# Question 4: write a function that counts the storms.\n",
]


def harbour_log(entries: int = 34, seed: int = 2026) -> str:
    """Return the shared document: a made-up harbour log, as a Python module, fixed by ``seed``."""
    rng = random.Random(seed)
    boats = ["Heron", "Lantern", "Pebble", "Marlin", "Juniper", "Kestrel", "Otter", "Saffron"]
    winds = ["north", "south", "east", "west", "calm"]
    skies = ["clear", "fog", "rain", "storm", "cloud"]
    lines = [
        '"""Harbour log kept by the lighthouse keeper.',
        "",
        "Each entry records the day, the morning high tide in metres, the wind, the sky,",
        "and the boats that came home, in the order they tied up at the pier.",
        '"""',
        "",
        "LOG = [",
    ]
    for day in range(1, entries + 1):
        home = rng.sample(boats, rng.randint(1, 3))
        lines.append(
            f"    dict(day={day}, tide_m={rng.uniform(0.4, 2.6):.2f}, wind={rng.choice(winds)!r}, "
            f"sky={rng.choice(skies)!r}, boats={home!r}),"
        )
    lines.append("]")
    return "\n".join(lines)


# --8<-- [end:document]


# --8<-- [start:variants]
def invalidation_prompts(document: str, question: str = QUESTIONS[0]) -> dict[str, str]:
    """Return the five prompts of the invalidation lab, in the order they are sent."""
    base = INSTRUCTION + "\n" + document + "\n\n" + question
    return {
        "first": base,  # cold cache: nothing to hit
        "identical": base,  # every full block was seen before
        "space before document": INSTRUCTION + "\n " + document + "\n\n" + question,
        "space after document": INSTRUCTION + "\n" + document + " \n\n" + question,
        "change at the very start": " " + base,
    }


# --8<-- [end:variants]


def first_difference(a: list[int], b: list[int]) -> int:
    """Return the index of the first token where a and b differ (the shorter length if one is a prefix)."""
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def block_hits(manager: BlockManager, token_ids: list[int]) -> list[bool]:
    """Return, for each full block of ``token_ids``, whether the manager's cache holds it now."""
    hit = len(manager.cached_blocks_for(token_ids))
    return [i < hit for i in range(len(token_ids) // manager.block_size)]


# ----- measuring against a reference ----------------------------------------------------------
# Every time below is taken next to transformers running the same work in the same loop, so that
# a busy machine slows both alike and the ratio stays honest; each figure keeps its spread
# (slowest / fastest repeat), and python -m inferlab.paged.bench refuses to write an unsteady one.


@torch.inference_mode()
def forward_seconds(model, ids: list[int]) -> float:
    """Return how long transformers' own forward takes over ``ids``, keeping the last logits (generate's prefill)."""
    start = time.perf_counter()
    model(torch.tensor([ids]), logits_to_keep=1)
    return time.perf_counter() - start


def milliseconds(seconds: list[float]) -> float:
    """Return the median of repeated timings, in milliseconds."""
    return round(1000 * statistics.median(seconds), 2)


def invalidation_lab(
    model, tokenizer, max_new_tokens: int = 8, block_size: int = 16, repeats: int = 5
) -> list[dict[str, Any]]:
    """Return one record per prompt variant: tokens, cached tokens, per-block hits, TTFT next to a forward."""
    for name, value in (("max_new_tokens", max_new_tokens), ("block_size", block_size), ("repeats", repeats)):
        require_int(value, name, minimum=1)
    decoder = as_decoder(model)
    prompts = {name: tokenizer(text)["input_ids"] for name, text in invalidation_prompts(harbour_log()).items()}
    ttft = {name: [] for name in prompts}
    forward = {name: [] for name in prompts}
    records = {}
    for repeat in range(repeats + 1):  # repeat 0 warms up (first calls allocate memory) and is not timed
        engine = MiniEngine(decoder, num_blocks=1024, block_size=block_size)  # a cold cache each repeat
        for name, ids in prompts.items():  # in order: each run finds what the runs before it cached
            hits = block_hits(engine.blocks, ids)  # what the hash chain finds before this run
            with garbage_collector_off():
                request = engine.run([ids], max_new_tokens)[0]
                reference = forward_seconds(model, ids)  # the reference, right after
            if repeat:
                ttft[name].append(request.ttft_s)
                forward[name].append(reference)
            records.setdefault(
                name,
                {
                    "run": name,
                    "prompt_tokens": len(ids),
                    "first_changed_token": first_difference(ids, prompts["first"]) if name != "identical" else len(ids),
                    "cached_tokens": request.cached_tokens,
                    "computed_tokens": request.computed_tokens,
                    "hit_blocks": sum(hits),
                    "full_blocks": len(hits),
                    "block_hits": hits,
                    "block_hashes": [f"{h:016x}"[:6] for h in hash_chain(ids, block_size)],
                },
            )
    for name, record in records.items():
        record["ttft_ms"] = milliseconds(ttft[name])
        record["forward_ms"] = milliseconds(forward[name])
        record["ttft_vs_forward"] = round(statistics.median(ttft[name]) / statistics.median(forward[name]), 3)
        record["spread"] = max(spread(ttft[name]), spread(forward[name]))
    return list(records.values())


def multiturn_lab(model, tokenizer, max_new_tokens: int = 16, repeats: int = 5, block_size: int = 16) -> dict[str, Any]:
    """Return per-turn TTFT (median of ``repeats``) with and without prefix caching, next to a forward."""
    for name, value in (("max_new_tokens", max_new_tokens), ("repeats", repeats), ("block_size", block_size)):
        require_int(value, name, minimum=1)
    decoder = as_decoder(model)
    document_ids = tokenizer(INSTRUCTION + "\n" + harbour_log())["input_ids"]
    seconds = {key: [[] for _ in QUESTIONS] for key in ("cached", "no_cache", "forward")}
    rows = []
    for repeat in range(repeats + 1):  # repeat 0 warms up and is not timed
        engines = {
            caching: MiniEngine(decoder, num_blocks=1024, block_size=block_size, enable_prefix_caching=caching)
            for caching in (True, False)
        }
        context = list(document_ids)
        for turn, question in enumerate(QUESTIONS):
            context += tokenizer("\n\n" + question)["input_ids"]
            with garbage_collector_off():
                cached = engines[True].run([context], max_new_tokens)[0]
                plain = engines[False].run([context], max_new_tokens)[0]  # interleaved: noise hits all three alike
                reference = forward_seconds(model, context)
            if repeat:
                seconds["cached"][turn].append(cached.ttft_s)
                seconds["no_cache"][turn].append(plain.ttft_s)
                seconds["forward"][turn].append(reference)
            if cached.output_ids != plain.output_ids:
                raise RuntimeError(f"turn {turn + 1}: the prefix cache changed the answer")  # it must not
            if repeat == 0:
                rows.append(
                    {
                        "turn": turn + 1,
                        "prompt_tokens": len(context),
                        "cached_tokens": cached.cached_tokens,
                        "computed_tokens": cached.computed_tokens,
                    }
                )
            context += cached.output_ids  # the answer becomes part of the next turn's prompt
    for turn, row in enumerate(rows):
        times = {key: seconds[key][turn] for key in seconds}
        row["ttft_ms_cached"] = milliseconds(times["cached"])
        row["ttft_ms_no_cache"] = milliseconds(times["no_cache"])
        row["forward_ms"] = milliseconds(times["forward"])
        row["cached_vs_forward"] = round(statistics.median(times["cached"]) / statistics.median(times["forward"]), 3)
        row["spread"] = max(spread(t) for t in times.values())
    return {
        "document_tokens": len(document_ids),
        "turns": rows,
        "turn2_over_turn1_ttft": rows[1]["ttft_ms_cached"] / rows[0]["ttft_ms_cached"],
        "repeats": repeats,
    }


THROUGHPUT_METHODS = {
    "engine_batched": "MiniEngine, all together",
    "engine_one_at_a_time": "MiniEngine, one at a time",
    "generate_batched": "generate, one padded batch",
    "generate_one_at_a_time": "generate, one at a time",
}


def throughput_prompts(tokenizer, count: int, prompt_tokens: int) -> list[list[int]]:
    """Return ``count`` prompts cut from different places of the document, so no two share a block."""
    ids = tokenizer(harbour_log())["input_ids"]
    if count * prompt_tokens > len(ids):
        raise ValueError(f"the document has {len(ids)} tokens, too few for {count} prompts of {prompt_tokens} tokens")
    return [ids[i * prompt_tokens : (i + 1) * prompt_tokens] for i in range(count)]


ONE_AT_A_TIME_SAMPLE = 8


def throughput_runners(model, decoder: LlamaDecoder, prompts: list[list[int]], max_new_tokens: int) -> dict:
    """Return the four ways to serve ``prompts``: {method: (call, number of requests it serves)}."""
    blocks = len(prompts) * -(-(len(prompts[0]) + max_new_tokens) // 16) + 1

    def engine(served: list[list[int]], batch: int):
        MiniEngine(decoder, num_blocks=blocks, max_batch_size=batch, enable_prefix_caching=False).run(
            served, max_new_tokens
        )

    # min_new_tokens: an end-of-text token must not stop a sequence early, so every method makes
    # exactly max_new_tokens per request, as the engine (with no eos_token_id) does.
    options = {"do_sample": False, "max_new_tokens": max_new_tokens, "min_new_tokens": max_new_tokens}

    @torch.inference_mode()
    def generate(batch: list[list[int]]):
        model.generate(
            torch.tensor(batch),
            attention_mask=torch.ones(len(batch), len(batch[0]), dtype=torch.long),
            pad_token_id=0,
            **options,
        )

    # Served one at a time, requests take turns: tokens/s does not depend on how many wait, so the
    # one-at-a-time runs serve a sample of at most ONE_AT_A_TIME_SAMPLE of them (the same prompts).
    sample = prompts[:ONE_AT_A_TIME_SAMPLE]
    return {
        "engine_batched": (lambda: engine(prompts, len(prompts)), len(prompts)),
        "engine_one_at_a_time": (lambda: engine(sample, 1), len(sample)),
        "generate_batched": (lambda: generate(prompts), len(prompts)),  # equal lengths: no padding needed
        "generate_one_at_a_time": (lambda: [generate([p]) for p in sample], len(sample)),
    }


def rounds_for(call, min_seconds: float) -> int:
    """Time one (untimed-for-the-record) call; return how many rounds make a call last min_seconds.

    A call of a second is at the mercy of a moment's noise on a shared machine; repeating the same
    work several rounds within one timed call averages it out. The call here also warms the path up.
    """
    start = time.perf_counter()
    call()
    return max(1, math.ceil(min_seconds / (time.perf_counter() - start)))


MAX_ATTEMPTS = 3


def time_methods(runners: dict, rounds: dict, repeats: int) -> dict[str, dict[str, float]]:
    """Return each method's median/min/max seconds over ``repeats``, interleaved (time_interleaved)."""
    calls = {method: repeat_call(run, rounds[method]) for method, (run, _) in runners.items()}
    with garbage_collector_off():
        return time_interleaved(calls, repeat=repeats, warmup=0)


def repeat_call(run, times: int):
    """Return a call that runs ``run`` ``times`` times over (one timed call of several rounds)."""
    return lambda: [run() for _ in range(times)]


def throughput_lab(
    model,
    tokenizer,
    batch_sizes: tuple[int, ...] = (1, 2, 4, 8, 16, 32),
    prompt_tokens: int = 48,
    max_new_tokens: int = 48,
    repeats: int = 3,
    progress=None,
    min_call_seconds: float = 4.0,
) -> dict[str, Any]:
    """Return tokens/s against the number of concurrent requests, for the engine and for generate."""
    for name, value in (("prompt_tokens", prompt_tokens), ("max_new_tokens", max_new_tokens), ("repeats", repeats)):
        require_int(value, name, minimum=1)
    if not batch_sizes or any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in batch_sizes):
        raise ValueError(f"batch_sizes must be integers >= 1, got {batch_sizes!r}")
    decoder = as_decoder(model)
    all_prompts = throughput_prompts(tokenizer, max(batch_sizes), prompt_tokens)
    rows, method_spreads = [], []  # method_spreads: which method a row's spread comes from
    for batch in batch_sizes:
        runners = throughput_runners(model, decoder, all_prompts[:batch], max_new_tokens)
        rounds = {method: rounds_for(run, min_call_seconds) for method, (run, _) in runners.items()}
        # A shared machine has moments of noise that no quiet period fully avoids: a row whose
        # repeats differ by more than SPREAD_LIMIT is measured again (at most MAX_ATTEMPTS times),
        # and the number of attempts is kept in the result beside the spreads.
        for attempt in range(1, MAX_ATTEMPTS + 1):  # noqa: B007 (attempt is recorded below)
            timings = time_methods(runners, rounds, repeats)
            spreads = {method: spread([t["min_s"], t["max_s"]]) for method, t in timings.items()}
            if max(spreads.values()) <= SPREAD_LIMIT:
                break
        row = {"requests": batch}
        for method, timing in timings.items():
            tokens = rounds[method] * runners[method][1] * max_new_tokens
            row[f"{method}_tokens_per_s"] = round(tokens / timing["median_s"], 1)
        row["spread"] = max(spreads.values())
        method_spreads.append({"requests": batch, "attempts": attempt} | spreads)
        rows.append(row)
        if progress:
            progress(batch)
    return {
        "prompt_tokens": prompt_tokens,
        "max_new_tokens": max_new_tokens,
        "repeats": repeats,
        "min_call_seconds": min_call_seconds,
        "rows": rows,
        "method_spreads": method_spreads,
        **throughput_goals(rows),
    }


def throughput_goals(rows: list[dict]) -> dict[str, Any]:
    """Return the issue's goals as measured ratios (None where that batch size was not run)."""
    by_size = {row["requests"]: row for row in rows}

    def ratio(size: int, method: str, reference: str):
        row = by_size.get(size)
        if row is None:
            return None
        return round(row[f"{method}_tokens_per_s"] / row[f"{reference}_tokens_per_s"], 2)

    return {
        "one_request_vs_generate": ratio(1, "engine_batched", "generate_one_at_a_time"),
        "eight_vs_own_one_at_a_time": ratio(8, "engine_batched", "engine_one_at_a_time"),
        "eight_vs_generate_one_at_a_time": ratio(8, "engine_batched", "generate_one_at_a_time"),
        "thirty_two_vs_own_one_at_a_time": ratio(32, "engine_batched", "engine_one_at_a_time"),
        "thirty_two_vs_generate_batched": ratio(32, "engine_batched", "generate_batched"),
    }


def fragmentation_example(lengths: list[int], max_len: int, block_size: int = 16) -> dict[str, Any]:
    """Return reserved vs used KV slots for requests of ``lengths``: contiguous max-length slabs vs blocks."""
    require_int(max_len, "max_len", minimum=1)
    require_int(block_size, "block_size", minimum=1)
    if not isinstance(lengths, (list, tuple)) or not lengths:
        raise ValueError(f"lengths must be a non-empty list of request lengths, got {lengths!r}")
    for n in lengths:
        require_int(n, "lengths", minimum=1, maximum=max_len)
    manager = BlockManager(sum(-(-n // block_size) for n in lengths), block_size, enable_prefix_caching=False)
    for i, n in enumerate(lengths):
        manager.allocate(i, list(range(n)))
    paged_slots = sum(len(manager.block_table(i)) for i in range(len(lengths))) * block_size
    used = sum(lengths)
    return {
        "used_slots": used,
        "contiguous_reserved_slots": max_len * len(lengths),
        "paged_reserved_slots": paged_slots,
        "contiguous_waste": 1 - used / (max_len * len(lengths)),
        "paged_waste": 1 - used / paged_slots,
    }
