"""The CPU labs: multi-turn prefix caching, cache invalidation, and serving throughput.

Everything here runs the bundled model through :class:`~inferlab.paged.engine.MiniEngine` and
returns plain records; ``python -m inferlab.paged.bench`` writes them to result files and plots.
The shared document is generated here (our own text, fixed by a seed), written as a Python module
because the bundled model was trained on Python source.
"""

from __future__ import annotations

import random
import statistics
import time
from typing import Any

from inferlab.checks import require_int
from inferlab.paged.blocks import BlockManager, hash_chain
from inferlab.paged.engine import MiniEngine

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


def invalidation_lab(model, tokenizer, max_new_tokens: int = 8, block_size: int = 16) -> list[dict[str, Any]]:
    """Return one record per prompt variant: tokens, cached tokens, per-block hits, TTFT."""
    require_int(max_new_tokens, "max_new_tokens", minimum=1)
    require_int(block_size, "block_size", minimum=1)
    engine = MiniEngine(model, num_blocks=1024, block_size=block_size)
    prompts = invalidation_prompts(harbour_log())
    base_ids = tokenizer(prompts["first"])["input_ids"]
    records = []
    for name, text in prompts.items():
        ids = tokenizer(text)["input_ids"]
        hits = block_hits(engine.blocks, ids)  # what the hash chain finds before this run
        hashes = hash_chain(ids, block_size)
        request = engine.run([ids], max_new_tokens)[0]
        records.append(
            {
                "run": name,
                "prompt_tokens": len(ids),
                "first_changed_token": first_difference(ids, base_ids) if name != "identical" else len(ids),
                "cached_tokens": request.cached_tokens,
                "computed_tokens": request.computed_tokens,
                "hit_blocks": sum(hits),
                "full_blocks": len(hits),
                "ttft_ms": round(1000 * request.ttft_s, 2),
                "block_hits": hits,
                "block_hashes": [f"{h:016x}"[:6] for h in hashes],
            }
        )
    return records


def multiturn_lab(model, tokenizer, max_new_tokens: int = 16, repeats: int = 3, block_size: int = 16) -> dict[str, Any]:
    """Return per-turn TTFT (median of ``repeats``) with and without prefix caching, and token counts."""
    for name, value in (("max_new_tokens", max_new_tokens), ("repeats", repeats), ("block_size", block_size)):
        require_int(value, name, minimum=1)
    document_ids = tokenizer(INSTRUCTION + "\n" + harbour_log())["input_ids"]
    turns: dict[bool, list[list[dict]]] = {True: [], False: []}
    for _ in range(repeats):
        for caching in (True, False):  # interleaved, so machine noise hits both alike
            engine = MiniEngine(model, num_blocks=1024, block_size=block_size, enable_prefix_caching=caching)
            context, rows = list(document_ids), []
            for number, question in enumerate(QUESTIONS, start=1):
                context += tokenizer("\n\n" + question)["input_ids"]
                request = engine.run([context], max_new_tokens)[0]
                rows.append(
                    {
                        "turn": number,
                        "prompt_tokens": len(context),
                        "cached_tokens": request.cached_tokens,
                        "computed_tokens": request.computed_tokens,
                        "ttft_s": request.ttft_s,
                    }
                )
                context += request.output_ids  # the answer becomes part of the next turn's prompt
            turns[caching].append(rows)
    table = []
    for i in range(len(QUESTIONS)):
        cached_runs, plain_runs = [r[i] for r in turns[True]], [r[i] for r in turns[False]]
        table.append(
            {
                "turn": i + 1,
                "prompt_tokens": cached_runs[0]["prompt_tokens"],
                "cached_tokens": cached_runs[0]["cached_tokens"],
                "computed_tokens": cached_runs[0]["computed_tokens"],
                "ttft_ms_cached": round(1000 * statistics.median(r["ttft_s"] for r in cached_runs), 2),
                "ttft_ms_no_cache": round(1000 * statistics.median(r["ttft_s"] for r in plain_runs), 2),
            }
        )
    return {
        "document_tokens": len(document_ids),
        "turns": table,
        "turn2_over_turn1_ttft": table[1]["ttft_ms_cached"] / table[0]["ttft_ms_cached"],
        "repeats": repeats,
    }


def throughput_lab(
    model, tokenizer, num_requests: int = 8, prompt_tokens: int = 48, max_new_tokens: int = 48, repeats: int = 3
) -> dict[str, Any]:
    """Return tokens/s serving ``num_requests`` one at a time vs all together (continuous batching)."""
    for name, value in (
        ("num_requests", num_requests),
        ("prompt_tokens", prompt_tokens),
        ("max_new_tokens", max_new_tokens),
        ("repeats", repeats),
    ):
        require_int(value, name, minimum=1)
    ids = tokenizer(harbour_log())["input_ids"]
    # Different slices of the document: no two prompts share a block, so no prefix-cache help.
    prompts = [ids[i * prompt_tokens : (i + 1) * prompt_tokens] for i in range(num_requests)]
    if len(prompts[-1]) < prompt_tokens:
        raise ValueError(f"the document is too short for {num_requests} prompts of {prompt_tokens} tokens")
    seconds = {"one_at_a_time": [], "concurrent": []}
    for _ in range(repeats):
        for mode in seconds:  # interleaved
            engine = MiniEngine(
                model,
                num_blocks=512,
                max_batch_size=1 if mode == "one_at_a_time" else num_requests,
                enable_prefix_caching=False,
            )
            start = time.perf_counter()
            requests = engine.run(prompts, max_new_tokens)
            seconds[mode].append(time.perf_counter() - start)
            assert sum(len(r.output_ids) for r in requests) == num_requests * max_new_tokens
    total = num_requests * max_new_tokens
    rates = {mode: total / statistics.median(s) for mode, s in seconds.items()}
    return {
        "num_requests": num_requests,
        "prompt_tokens": prompt_tokens,
        "max_new_tokens": max_new_tokens,
        "tokens_per_s_one_at_a_time": round(rates["one_at_a_time"], 1),
        "tokens_per_s_concurrent": round(rates["concurrent"], 1),
        "speedup": rates["concurrent"] / rates["one_at_a_time"],
        "repeats": repeats,
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
