"""Benchmarks for the KV-cache guides: ``python -m inferlab.kvcache.bench [--quick]``.

Writes, under docs/results/ and docs/figures/kvcache/:

- kvcache_naive_vs_cached: wall time of both loops as k grows (T = 16), beside the key-count ratio
- kvcache_prefill_decode: prefill time vs per-token decode time as the prompt length T grows
- kvcache_train_vs_generate: one teacher-forced forward over L tokens vs L sequential decode steps
- kvcache_vs_transformers: our cached loop vs generate(use_cache=True), DynamicCache vs StaticCache
- kvcache_causality: how much earlier keys change when the next token changes, causal vs not
- kvcache_sizes: cache bytes of three real models (config values) and the bundled target

Every ratio is measured side by side in one run (interleaved), on the model given (the bundled
target by default).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm

from inferlab.bench import read_result, repo_root, time_interleaved, write_result
from inferlab.bench.figures import save_figure as save_bilingual
from inferlab.kvcache.decoder import LlamaDecoder
from inferlab.kvcache.generate import KVCache, forward_with_cache, generate_cached, generate_naive
from inferlab.kvcache.size import PRESETS, attention_variants, kv_cache_bytes, max_batch_size

GIB = 2**30


def load_target(model: str | None, device: str = "cpu"):
    """Return (Hugging Face model, our decoder) for a path/id, or the bundled target by default."""
    if model is None:
        from inferlab.models import load_pair

        hf_model = load_pair()[0]
    else:
        from transformers import AutoModelForCausalLM

        hf_model = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32).eval()
    hf_model = hf_model.to(device)
    hf_model.generation_config.eos_token_id = None  # always generate exactly k tokens
    return hf_model, LlamaDecoder.from_pretrained(hf_model)


def prompt(decoder: LlamaDecoder, length: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)  # on the CPU: the same prompt on every device
    return torch.randint(1, decoder.vocab_size, (1, length), generator=generator).to(decoder.device)


def wait_for(device: torch.device) -> None:
    """Wait until the GPU has finished the work queued so far (a no-op on a CPU).

    GPU kernels run asynchronously: without this, a timer would stop when the work is queued,
    not when it is done.
    """
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def synced(fn, device: torch.device):
    """Return fn wrapped so that each call ends only when its GPU work has finished."""

    def call():
        result = fn()
        wait_for(device)
        return result

    return call


def step_times(loop, decoder: LlamaDecoder, ids: torch.Tensor, k: int) -> list[tuple[float, int]]:
    """Return (elapsed seconds, key projections of one layer so far) after each of the k new tokens."""
    stamps: list[tuple[float, int]] = []
    first_layer = decoder.layers[0]
    start = time.perf_counter()

    def record(_: int) -> None:
        wait_for(decoder.device)  # a real loop waits too: it must see the token to stream it or stop
        stamps.append((time.perf_counter() - start, first_layer.keys_computed))

    loop(decoder, ids, k, on_token=record)
    return stamps


def bench_naive_vs_cached(decoder, T: int, ks: list[int], repeat: int) -> dict:
    """Time both loops up to max(ks) new tokens, alternating runs, and read off time and key count at every k."""
    ids = prompt(decoder, T)
    runs = {"naive": [], "cached": []}
    for _ in tqdm(range(repeat), desc="naive vs cached", leave=False):
        for name, loop in (("naive", generate_naive), ("cached", generate_cached)):
            runs[name].append(step_times(loop, decoder, ids, max(ks)))
    rows = []
    for k in ks:
        naive_s = statistics.median(run[k - 1][0] for run in runs["naive"])
        cached_s = statistics.median(run[k - 1][0] for run in runs["cached"])
        naive_keys, cached_keys = runs["naive"][0][k - 1][1], runs["cached"][0][k - 1][1]
        rows.append(
            {
                "k": k,
                "naive_s": naive_s,
                "cached_s": cached_s,
                "time_ratio": naive_s / cached_s,
                "naive_keys": naive_keys,
                "cached_keys": cached_keys,
                "key_ratio": naive_keys / cached_keys,
            }
        )
    return {"T": T, "repeat": repeat, "rows": rows, "largest": rows[-1]}


def causality(decoder, T: int = 32) -> dict:
    """Return, per layer, how much the keys of T earlier tokens change when the appended token changes."""
    prefix = prompt(decoder, T)
    first = torch.cat([prefix, torch.tensor([[5]], device=prefix.device)], dim=1)
    second = torch.cat([prefix, torch.tensor([[6]], device=prefix.device)], dim=1)
    rows = []
    with torch.inference_mode():
        changes = {}
        for causal in (True, False):
            pairs = zip(
                decoder.layer_keys(first, causal=causal), decoder.layer_keys(second, causal=causal), strict=True
            )
            changes[causal] = [(a[:, :, :T] - b[:, :, :T]).abs().max().item() for a, b in pairs]
    for layer in range(decoder.num_layers):
        rows.append(
            {
                "layer": layer,
                "causal_max_change": changes[True][layer],
                "bidirectional_max_change": changes[False][layer],
            }
        )
    return {
        "T": T,
        "rows": rows,
        "causal_all_identical": all(c == 0.0 for c in changes[True]),
        "bidirectional_layers_changed": sum(c > 0.0 for c in changes[False]),
    }


def bench_prefill_decode(decoder, lengths: list[int], decode_steps: int, repeat: int) -> dict:
    """Return prefill seconds and mean seconds per decode token after prompts of each length."""
    rows = []
    for T in tqdm(lengths, desc="prefill vs decode", leave=False):
        ids = prompt(decoder, T)
        prefill, per_token = [], []
        for _ in range(repeat):
            with torch.inference_mode():
                cache = KVCache(decoder, 1, T + decode_steps)
                wait_for(decoder.device)
                start = time.perf_counter()
                logits = forward_with_cache(decoder, cache, ids)
                wait_for(decoder.device)
                prefill.append(time.perf_counter() - start)
                token = logits.argmax(-1, keepdim=True)
                start = time.perf_counter()
                for _ in range(decode_steps):
                    token = forward_with_cache(decoder, cache, token).argmax(-1, keepdim=True)
                wait_for(decoder.device)
                per_token.append((time.perf_counter() - start) / decode_steps)
        prefill_s, decode_s = statistics.median(prefill), statistics.median(per_token)
        rows.append(
            {
                "T": T,
                "prefill_ms": 1e3 * prefill_s,
                "decode_ms_per_token": 1e3 * decode_s,
                "prefill_tokens_per_s": T / prefill_s,
                "decode_tokens_per_s": 1 / decode_s,
                "prefill_vs_one_decode": prefill_s / decode_s,
            }
        )
    return {"decode_steps": decode_steps, "repeat": repeat, "rows": rows, "largest": rows[-1]}


def bench_train_vs_generate(decoder, lengths: list[int], repeat: int) -> dict:
    """Return the time of one teacher-forced forward over L tokens vs generating L tokens one by one."""
    rows = []
    for L in tqdm(lengths, desc="train vs generate", leave=False):
        ids = prompt(decoder, L)

        def teacher_forced(ids=ids):
            with torch.inference_mode():
                decoder(ids)  # all L next-token predictions in one parallel pass

        def sequential(ids=ids, L=L):
            generate_cached(decoder, ids[:, :1], L)  # L steps, each waiting for the previous token

        device = decoder.device
        times = time_interleaved(
            {"parallel": synced(teacher_forced, device), "sequential": synced(sequential, device)}, repeat=repeat
        )
        parallel_s, sequential_s = times["parallel"]["median_s"], times["sequential"]["median_s"]
        rows.append(
            {
                "L": L,
                "parallel_ms": 1e3 * parallel_s,
                "sequential_ms": 1e3 * sequential_s,
                "ratio": sequential_s / parallel_s,
            }
        )
    return {"repeat": repeat, "rows": rows, "largest": rows[-1]}


def bench_vs_transformers(hf_model, decoder, T: int, k: int, repeat: int) -> dict:
    """Return tokens/s of our cached loop and of generate() with DynamicCache and StaticCache."""
    ids = prompt(decoder, T)
    mask = torch.ones_like(ids)

    def hf(cache_implementation=None):
        extra = {"cache_implementation": cache_implementation} if cache_implementation else {}
        with torch.inference_mode():
            return hf_model.generate(
                ids, attention_mask=mask, max_new_tokens=k, do_sample=False, use_cache=True, pad_token_id=0, **extra
            )

    ours_tokens = generate_cached(decoder, ids, k).tokens
    same_tokens = bool(torch.equal(ours_tokens, hf()) and torch.equal(ours_tokens, hf("static")))
    times = time_interleaved(
        {
            "ours": synced(lambda: generate_cached(decoder, ids, k), decoder.device),
            "dynamic": synced(lambda: hf(), decoder.device),
            "static": synced(lambda: hf("static"), decoder.device),
        },
        repeat=repeat,
    )
    rate = {name: k / t["median_s"] for name, t in times.items()}
    return {
        "T": T,
        "k": k,
        "repeat": repeat,
        "same_tokens": same_tokens,
        "ours_tokens_per_s": rate["ours"],
        "dynamic_tokens_per_s": rate["dynamic"],
        "static_tokens_per_s": rate["static"],
        "ours_vs_dynamic": rate["ours"] / rate["dynamic"],
        "static_vs_dynamic": rate["static"] / rate["dynamic"],
        "rows": [
            {"loop": "ours (preallocated cache)", "tokens_per_s": rate["ours"]},
            {"loop": "generate, DynamicCache", "tokens_per_s": rate["dynamic"]},
            {"loop": "generate, StaticCache", "tokens_per_s": rate["static"]},
        ],
    }


def cache_sizes(decoder, tokens: int = 8192, free_gib: int = 16) -> dict:
    """Return per-token and total cache bytes (bf16) of the presets and the bundled target, MHA/GQA/MQA."""
    models = dict(PRESETS)
    rows, variants = [], []
    for name, config in models.items():
        per_token = kv_cache_bytes(config, 1, dtype="bf16")
        rows.append(
            {
                "model": name,
                "layers": config["num_hidden_layers"],
                "kv_heads": config["num_key_value_heads"],
                "head_dim": config["head_dim"],
                "KiB_per_token": per_token / 1024,
                f"GiB_at_{tokens}_tokens": kv_cache_bytes(config, tokens, dtype="bf16") / GIB,
                f"max_batch_in_{free_gib}_GiB": max_batch_size(config, tokens, free_gib * GIB, dtype="bf16"),
            }
        )
        for kind, kv_heads in attention_variants(config).items():
            variant = dict(config, num_key_value_heads=kv_heads)
            variants.append(
                {
                    "model": name,
                    "attention": kind,
                    "kv_heads": kv_heads,
                    "KiB_per_token": kv_cache_bytes(variant, 1, dtype="bf16") / 1024,
                }
            )
    target = {
        "layers": decoder.num_layers,
        "kv_heads": decoder.num_kv_heads,
        "head_dim": decoder.head_dim,
        "KiB_per_token_fp32": kv_cache_bytes(decoder, 1, dtype=torch.float32) / 1024,
    }
    return {
        "tokens": tokens,
        "free_gib": free_gib,
        "rows": rows,
        "variants": variants,
        "bundled_target": target,
        "sources": {name: c["source"] for name, c in models.items()},
    }


def draw_figures(figures: Path) -> list[Path]:
    """Draw the guides' figures from the result files (never from in-memory numbers)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures.mkdir(parents=True, exist_ok=True)
    written = []
    rows = read_result("kvcache_naive_vs_cached")["values"]["rows"]
    ks = [r["k"] for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot(ks, [r["naive_s"] for r in rows], "o-", label="naive (recompute)")
    left.plot(ks, [r["cached_s"] for r in rows], "s-", label="cached (KV cache)")
    left.set(xscale="log", yscale="log", xlabel="new tokens k", ylabel="wall time (s)", title="Wall time, T = 16")
    left.legend()
    right.plot(ks, [r["time_ratio"] for r in rows], "o-", label="wall-time ratio naive / cached")
    right.plot(ks, [r["key_ratio"] for r in rows], "s--", label="key-projection ratio naive / cached")
    right.set(xscale="log", yscale="log", xlabel="new tokens k", ylabel="ratio", title="What the cache saves")
    right.legend()
    fig.tight_layout()
    written += save_bilingual(fig, figures / "naive_vs_cached.png", dpi=120)  # name.png and name.zh-TW.png
    plt.close(fig)

    rows = read_result("kvcache_prefill_decode")["values"]["rows"]
    fig, ax = plt.subplots(figsize=(6, 4))
    lengths = [r["T"] for r in rows]
    ax.plot(lengths, [r["prefill_ms"] for r in rows], "o-", label="prefill: all T prompt tokens")
    ax.plot(lengths, [r["decode_ms_per_token"] for r in rows], "s-", label="decode: one token")
    ax.set(xscale="log", yscale="log", xlabel="prompt length T", ylabel="time (ms)", title="Prefill vs decode")
    ax.legend()
    fig.tight_layout()
    written += save_bilingual(fig, figures / "prefill_decode.png", dpi=120)  # name.png and name.zh-TW.png
    plt.close(fig)

    values = read_result("kvcache_sizes")["values"]
    fig, ax = plt.subplots(figsize=(7, 4))
    names = list(values["sources"])
    width = 0.25
    for offset, kind in enumerate(("MHA", "GQA", "MQA")):
        heights = [
            next(v["KiB_per_token"] for v in values["variants"] if v["model"] == n and v["attention"] == kind)
            for n in names
        ]
        ax.bar([i + (offset - 1) * width for i in range(len(names))], heights, width, label=kind)
    ax.set_xticks(range(len(names)), names)
    ax.set(ylabel="KiB per token (bf16)", title="KV cache per token: MHA vs GQA vs MQA")
    ax.legend()
    fig.tight_layout()
    written += save_bilingual(fig, figures / "cache_per_token.png", dpi=120)  # name.png and name.zh-TW.png
    plt.close(fig)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="KV-cache benchmarks: naive vs cached, prefill vs decode, ours vs transformers, cache sizes."
    )
    parser.add_argument("--quick", action="store_true", help="a small run (seconds, not minutes)")
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="the smallest sizes that still run every part: checks the plumbing (tools/gpu_run.sh --dry-run), "
        "not numbers to publish",
    )
    parser.add_argument("--model", default=None, help="Llama checkpoint (path or hub id); default: bundled target")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--figures-only", action="store_true", help="redraw the figures from existing results")
    parser.add_argument(
        "--only",
        nargs="+",
        default=None,
        metavar="PART",
        choices=["sizes", "causality", "naive_vs_cached", "prefill_decode", "train_vs_generate", "vs_transformers"],
        help="run only these parts (the others keep their files)",
    )
    parser.add_argument("--repeat", type=int, default=None, help="timed repeats per measurement (default 3, quick 1)")
    parser.add_argument(
        "--device", default="cpu", help="cpu (default) or cuda: where the models run (tools/gpu_run.sh uses cuda)"
    )
    args = parser.parse_args(argv)
    if args.repeat is not None and args.repeat < 1:
        parser.error(f"--repeat must be >= 1, got {args.repeat}")
    if args.device not in ("cpu", "cuda"):
        parser.error(f"--device must be cpu or cuda, got {args.device!r}")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda needs a CUDA GPU; torch.cuda.is_available() is False here")
    if args.threads is not None:
        if args.threads < 1:
            parser.error(f"--threads must be >= 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    root = repo_root() or Path.cwd()
    figures = root / "docs" / "figures" / "kvcache"
    if args.figures_only:
        for path in draw_figures(figures):
            print(f"drew {path}")
        return 0
    command = "python -m inferlab.kvcache.bench " + " ".join(argv if argv is not None else sys.argv[1:])
    hf_model, decoder = load_target(args.model, args.device)
    if args.tiny:
        ks, lengths, repeat, train_lengths, hf_k = [1, 2], [4], 1, [4], 2
    elif args.quick:
        ks, lengths, repeat, train_lengths, hf_k = [1, 2, 4, 8, 16, 32], [16, 64, 256], 1, [32, 64], 32
    else:
        ks, lengths, repeat, train_lengths = (
            [1, 2, 4, 8, 16, 32, 64, 128, 256, 512],
            [16, 32, 64, 128, 256, 512, 1024],
            3,
            [64, 128, 256],
        )
        hf_k = 128
    repeat = args.repeat or repeat
    steps = [
        ("kvcache_sizes", lambda: cache_sizes(decoder)),
        ("kvcache_causality", lambda: causality(decoder)),
        ("kvcache_naive_vs_cached", lambda: bench_naive_vs_cached(decoder, 16, ks, 1)),
        ("kvcache_prefill_decode", lambda: bench_prefill_decode(decoder, lengths, 16, repeat)),
        ("kvcache_train_vs_generate", lambda: bench_train_vs_generate(decoder, train_lengths, repeat)),
        ("kvcache_vs_transformers", lambda: bench_vs_transformers(hf_model, decoder, 16, hf_k, repeat)),
    ]
    if args.only:
        steps = [(name, run) for name, run in steps if name.removeprefix("kvcache_") in args.only]
    for name, run in tqdm(steps, desc="kvcache benchmarks"):
        path = write_result(name, run(), command=command.strip())
        tqdm.write(f"wrote {path}")
    for path in draw_figures(figures):
        print(f"drew {path}")
    summary = read_result("kvcache_vs_transformers")["values"]
    print(
        f"ours vs generate(DynamicCache): {summary['ours_vs_dynamic']:.2f}x tokens/s "
        f"(StaticCache vs DynamicCache: {summary['static_vs_dynamic']:.2f}x)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
