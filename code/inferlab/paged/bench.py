"""Run the paged-serving labs and write their result files and figures.

    python -m inferlab.paged.bench            # all labs on the bundled model (a few minutes on 2 CPU cores)
    python -m inferlab.paged.bench --quick    # fewer repeats, for a smoke test
    python -m inferlab.paged.bench --only offload model   # just some labs

Writes docs/results/paged_*.json (through inferlab.bench.write_result) and docs/figures/paged/*.png.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tqdm import tqdm

from inferlab.bench import SPREAD_LIMIT, read_result, repo_root, unsteady
from inferlab.bench import write_result as _write_result
from inferlab.bench.figures import save_figure as save_bilingual

LABS = ("fragmentation", "model", "offload", "invalidation", "multiturn", "throughput", "offload-gpu")
# The offloading curve's model: Qwen2.5-1.5B-Instruct (1.54 B parameters, model card) in fp16.
QWEN_WEIGHT_BYTES = 1.54e9 * 2


COMMAND = ["python -m inferlab.paged.bench"]


def write_result(name: str, values: dict) -> Path:
    """Write a result file whose provenance names the command a reader can re-run."""
    return _write_result(name, values, command=COMMAND[0])


def figures_dir() -> Path:
    """Return docs/figures/paged (created if needed)."""
    root = repo_root() or Path.cwd()
    folder = root / "docs" / "figures" / "paged"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def save_figure(fig, name: str, **kwargs) -> None:
    """Save docs/figures/paged/<name>.png and its zh-TW version, <name>.zh-TW.png."""
    save_bilingual(fig, figures_dir() / f"{name}.png", dpi=120, **kwargs)


def run_fragmentation() -> None:
    from inferlab.paged.labs import fragmentation_example

    lengths = [37, 412, 95, 1203, 260, 18, 730, 151]  # a made-up batch of request lengths
    values = fragmentation_example(lengths, max_len=2048, block_size=16)
    values.update(lengths=lengths, max_len=2048, block_size=16)
    write_result("paged_fragmentation", values)
    plot_fragmentation()


OFFLOAD_BATCHES = (1, 32, 256)  # one request; a busy server; past the T4's ridge point, where compute counts


def run_offload_model() -> None:
    from inferlab.kvcache.size import kv_bytes_per_token
    from inferlab.paged.offload import OFFLOAD_PRESETS, offload_curve

    kv_per_token = kv_bytes_per_token("Qwen2.5-1.5B", "fp16")
    rows = []
    for gpu in ("T4", "H200"):
        rows += offload_curve(QWEN_WEIGHT_BYTES, gpu, [0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0], kv_per_token, OFFLOAD_BATCHES)
    for row in rows:
        for key in row:
            if key.startswith(("tokens_per_s", "slowdown")):
                row[key] = round(row[key], 1 if key.startswith("tokens") else 2)
    t4_at_2gb = next(r for r in rows if r["gpu"] == "T4" and r["offloaded_gb"] == 2.0)
    values = {
        "model": "Qwen2.5-1.5B-Instruct, fp16",
        "weight_gb": QWEN_WEIGHT_BYTES / 1e9,
        "kv_bytes_per_token": kv_per_token,
        "batches": list(OFFLOAD_BATCHES),
        "curve": rows,
        "t4_slowdown_at_2gb": t4_at_2gb["slowdown_batch_1"],
        "t4_slowdown_at_2gb_batch_32": t4_at_2gb["slowdown_batch_32"],
        "t4_slowdown_at_2gb_batch_256": t4_at_2gb["slowdown_batch_256"],
        "presets": {k: vars(v) for k, v in OFFLOAD_PRESETS.items()},
    }
    write_result("paged_offload_model", values)
    plot_offload()


def run_offload_gpu(random_weights: bool) -> None:
    """Measure a decode step with 0..all layers streamed from pinned host memory, next to the cost model."""
    import torch

    from inferlab.kvcache.decoder import LlamaDecoder
    from inferlab.paged.offload import (
        OFFLOAD_PRESETS,
        StreamLayersFromHost,
        step_seconds,
        time_decode_step,
    )

    if not torch.cuda.is_available():
        raise SystemExit("--only offload-gpu needs a CUDA GPU")
    name = torch.cuda.get_device_name(0)
    preset = next((key for key in OFFLOAD_PRESETS if key in name), None)
    target, _ = load_target(random_weights)
    decoder = LlamaDecoder.from_pretrained(target, dtype=torch.float16, device="cuda")
    weight_bytes = sum(p.numel() * p.element_size() for p in decoder.parameters())
    rows = []
    for offloaded_layers in range(decoder.num_layers + 1):
        streamer = StreamLayersFromHost(decoder, offloaded_layers)
        measured, offloaded = time_decode_step(decoder, batch=1), streamer.offloaded_bytes
        streamer.restore()
        rows.append(
            {
                "offloaded_layers": offloaded_layers,
                "offloaded_mb": round(offloaded / 1e6, 2),
                "measured_ms": round(1000 * measured, 3),
                "model_ms": round(1000 * step_seconds(weight_bytes, offloaded, preset), 3) if preset else None,
            }
        )
    write_result("paged_offload_gpu", {"device": name, "preset": preset, "weight_mb": weight_bytes / 1e6, "rows": rows})


def load_target(random_weights: bool):
    """Return (target model, tokenizer): the bundled target, or an untrained one of the same shape."""
    from inferlab.models import load_pair, load_tokenizer, target_config

    if not random_weights:
        target, _, tokenizer = load_pair()
        return target, tokenizer
    import torch
    from transformers import LlamaForCausalLM

    tokenizer = load_tokenizer()
    torch.manual_seed(0)  # same architecture and speed as the trained target; its answers are noise
    return LlamaForCausalLM(target_config(len(tokenizer))).eval(), tokenizer


def write_steady(name: str, values: dict) -> bool:
    """Write a result unless one of its spreads exceeds SPREAD_LIMIT; return whether it was written."""
    problems = unsteady(values)
    if problems:
        print(
            f"NOT writing docs/results/{name}.json: repeats differ by more than {SPREAD_LIMIT}x "
            f"(the machine was busy?): {', '.join(problems[:6])}",
            file=sys.stderr,
        )
        shown = {key: value for key, value in values.items() if key != "runs"}  # runs: per-block detail
        print(json.dumps(shown, indent=1), file=sys.stderr)  # what was measured, for the record
        return False
    write_result(name, values)
    return True


def run_labs(names: list[str], quick: bool, random_weights: bool = False) -> bool:
    """Run the labs on the bundled target; return False if any result was too unsteady to write."""
    from inferlab.paged import labs

    target, tokenizer = load_target(random_weights)
    repeats = 1 if quick else None  # None: each lab's own default
    steady = True
    for name in tqdm(names, desc="paged labs"):
        if name == "invalidation":
            runs = labs.invalidation_lab(target, tokenizer, **({"repeats": repeats} if repeats else {}))
            keep = (
                "run",
                "prompt_tokens",
                "first_changed_token",
                "cached_tokens",
                "computed_tokens",
                "ttft_ms",
                "forward_ms",
                "ttft_vs_forward",
                "spread",
            )
            values = {
                "summary": [{k: r[k] for k in keep} for r in runs],
                "runs": runs,
                "miss_over_hit_ttft": runs[2]["ttft_ms"] / runs[1]["ttft_ms"],
            }
            if write_steady("paged_invalidation", values):
                plot_invalidation()
            else:
                steady = False
        elif name == "multiturn":
            values = labs.multiturn_lab(target, tokenizer, **({"repeats": repeats} if repeats else {}))
            if write_steady("paged_multiturn", values):
                plot_multiturn()
            else:
                steady = False
        elif name == "throughput":
            sizes = (1, 2, 4) if quick else (1, 2, 4, 8, 16, 32)
            with tqdm(total=len(sizes), desc="throughput: concurrent requests", leave=False) as bar:
                values = labs.throughput_lab(
                    target,
                    tokenizer,
                    batch_sizes=sizes,
                    max_new_tokens=16 if quick else 48,
                    repeats=1 if quick else 3,
                    min_call_seconds=0.5 if quick else 4.0,
                    progress=lambda _: bar.update(),
                )
            if write_steady("paged_throughput", values):
                plot_throughput()
            else:
                steady = False
    return steady


# ----- figures, drawn from the result files only ---------------------------------------------


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_fragmentation() -> None:
    plt = _plt()
    v = read_result("paged_fragmentation")["values"]
    fig, ax = plt.subplots(figsize=(6, 3.2))
    labels = ["contiguous\n(reserve max_len)", "paged\n(blocks of 16)"]
    reserved = [v["contiguous_reserved_slots"], v["paged_reserved_slots"]]
    ax.bar(labels, reserved, color=["#c44e52", "#4c72b0"], label="reserved")
    ax.bar(labels, [v["used_slots"]] * 2, color="#55a868", label="used by tokens")
    ax.set_ylabel("KV slots (tokens)")
    ax.legend()
    ax.set_title(f"{len(v['lengths'])} requests, max_len={v['max_len']}")
    fig.tight_layout()
    save_figure(fig, "fragmentation")
    plt.close(fig)


def plot_offload() -> None:
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    plt = _plt()
    v = read_result("paged_offload_model")["values"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.8))
    styles = dict(zip(v["batches"], ("o-", "s--", "^:"), strict=False))
    for gpu, color in (("T4", "#c44e52"), ("H200", "#4c72b0")):
        rows = [r for r in v["curve"] if r["gpu"] == gpu]
        xs = [r["offloaded_gb"] for r in rows]
        for batch in v["batches"]:
            slowdowns = [r[f"slowdown_batch_{batch}"] for r in rows]
            left.plot(xs, slowdowns, styles[batch], color=color, label=f"{gpu}, batch {batch}")
        right.plot(xs, [r["kv_capacity_tokens"] / 1000 for r in rows], "o-", color=color, label=gpu)
    left.set_yscale("log")
    left.set_xlabel("weights offloaded to CPU (GB)")
    left.set_ylabel("step time ÷ no offloading (model)")
    left.legend(fontsize=7, ncol=2)
    right.set_xlabel("weights offloaded to CPU (GB)")
    right.set_ylabel("KV-cache capacity (thousand tokens)")
    right.set_yscale("log")
    right.legend()
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.yaxis.set_major_formatter(ScalarFormatter())  # 10, 100, not 10^1, 10^2
        ax.yaxis.set_minor_formatter(NullFormatter())
    fig.suptitle(v["model"])
    fig.tight_layout()
    save_figure(fig, "offload_curve")
    plt.close(fig)


def plot_invalidation() -> None:
    """Draw every run's blocks in prompt order: green when served from the cache, red when computed.

    Laid out for a phone as much as for a desktop: 6.4 inches wide, text of 10 points or more.
    """
    plt = _plt()
    runs = read_result("paged_invalidation")["values"]["runs"]
    width = max(len(r["block_hits"]) for r in runs)
    colors = {True: "#55a868", False: "#c44e52"}
    fig, ax = plt.subplots(figsize=(6.4, 0.55 * len(runs) + 1.4))
    for row, run in enumerate(runs):
        for i, hit in enumerate(run["block_hits"]):
            # A thin white edge keeps neighbouring blocks apart where there is room to show it.
            ax.add_patch(plt.Rectangle((i, row + 0.1), 1, 0.8, facecolor=colors[hit], edgecolor="white", linewidth=0.3))
    ax.set_xlim(0, width)
    ax.set_ylim(len(runs), 0)
    ax.set_yticks([row + 0.5 for row in range(len(runs))], [run["run"] for run in runs], fontsize=10)
    ax.tick_params(axis="y", length=0)
    ax.set_xlabel("full blocks of 16 tokens, in prompt order")
    legend = [plt.Rectangle((0, 0), 1, 1, color=colors[hit]) for hit in (True, False)]
    ax.legend(
        legend, ["served from cache", "computed"], loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, frameon=False
    )
    fig.tight_layout()
    save_figure(fig, "invalidation_chain", bbox_inches="tight")
    plt.close(fig)


def plot_multiturn() -> None:
    plt = _plt()
    v = read_result("paged_multiturn")["values"]
    turns = v["turns"]
    xs = [t["turn"] for t in turns]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4))
    offset = 0.2
    left.bar(
        [x - offset for x in xs], [t["ttft_ms_no_cache"] for t in turns], 0.4, label="no prefix cache", color="#c44e52"
    )
    left.bar([x + offset for x in xs], [t["ttft_ms_cached"] for t in turns], 0.4, label="prefix cache", color="#4c72b0")
    left.plot(
        xs, [t["forward_ms"] for t in turns], "k_", markersize=22, mew=2, label="transformers forward (same prompt)"
    )
    left.set_xlabel("turn")
    left.set_ylabel("time to first token (ms)")
    left.legend(fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, frameon=False)
    right.bar(xs, [t["cached_tokens"] for t in turns], label="served from cache", color="#55a868")
    right.bar(
        xs,
        [t["computed_tokens"] for t in turns],
        bottom=[t["cached_tokens"] for t in turns],
        label="computed",
        color="#c44e52",
    )
    right.set_xlabel("turn")
    right.set_ylabel("prompt tokens")
    right.legend()
    for ax in (left, right):
        ax.set_xticks(xs)
    fig.tight_layout()
    save_figure(fig, "multiturn_ttft")
    plt.close(fig)


def plot_throughput() -> None:
    from matplotlib.ticker import ScalarFormatter

    from inferlab.paged.labs import THROUGHPUT_METHODS

    plt = _plt()
    v = read_result("paged_throughput")["values"]
    sizes = [row["requests"] for row in v["rows"]]
    fig, ax = plt.subplots(figsize=(6.4, 4))
    styles = {
        "engine_batched": "o-",
        "engine_one_at_a_time": "o--",
        "generate_batched": "s-",
        "generate_one_at_a_time": "s--",
    }
    for method, label in THROUGHPUT_METHODS.items():
        ax.plot(sizes, [row[f"{method}_tokens_per_s"] for row in v["rows"]], styles[method], label=label)
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes, [str(size) for size in sizes])
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(ScalarFormatter())  # 100, 200, not 10^2, 2 x 10^2
    ax.yaxis.set_minor_formatter(ScalarFormatter())
    ax.set_xlabel("concurrent requests")
    ax.set_ylabel("generated tokens / s")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=9)
    fig.tight_layout()
    save_figure(fig, "throughput")
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one repeat and short outputs (a smoke test)")
    parser.add_argument("--only", nargs="+", choices=LABS, default=list(LABS), help="run only these labs")
    parser.add_argument(
        "--random-weights",
        action="store_true",
        help="use an untrained model of the bundled target's shape (before the bundled pair exists)",
    )
    parser.add_argument("--threads", type=int, help="torch CPU threads (1 avoids oversubscription on a busy machine)")
    args = parser.parse_args(argv)
    if args.threads is not None:
        if args.threads < 1:
            parser.error(f"--threads must be >= 1, got {args.threads}")
        import torch

        torch.set_num_threads(args.threads)
    COMMAND[0] = " ".join(["python -m inferlab.paged.bench", *(sys.argv[1:] if argv is None else argv)])
    if "fragmentation" in args.only:
        run_fragmentation()
    if "model" in args.only or "offload" in args.only:
        run_offload_model()
    if "offload-gpu" in args.only and args.only != list(LABS):  # only on request: it needs a GPU
        run_offload_gpu(args.random_weights)
    model_labs = [name for name in ("invalidation", "multiturn", "throughput") if name in args.only]
    if model_labs and not run_labs(model_labs, args.quick, args.random_weights):
        return 1  # an unsteady result was not written: run again on a quiet machine
    return 0


if __name__ == "__main__":
    sys.exit(main())
