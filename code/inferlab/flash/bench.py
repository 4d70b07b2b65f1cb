"""Benchmarks and figures for the FlashAttention pages.

    python -m inferlab.flash.bench            # CPU: peak memory, traffic and runtime models, figures
    python -m inferlab.flash.bench --quick    # the same with N only up to 4k
    python -m inferlab.flash.bench --gpu      # GPU: forward/backward TFLOP/s (needs CUDA and Triton)

Result files (docs/results/):
    flash_memory_cpu.json   peak memory of the tiled forward vs standard attention, N up to 16k
    flash_traffic.json      hbm_traffic and estimate_runtime over N, for several SRAM sizes
    flash_gpu.json          measured TFLOP/s on a GPU (a placeholder saying so until one is run)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tqdm import tqdm

from inferlab.bench import read_result, results_dir, write_result

from .traffic import GPU_PRESETS, attention_flops, blocks_from_sram, estimate_runtime, hbm_traffic

HEAD_DIM = 64
MEMORY_NS = [1024, 2048, 4096, 8192, 16384]
MEMORY_BLOCK = 128  # the tiled forward's tile for the memory run (bigger tiles, fewer Python steps)
TRAFFIC_NS = [512, 1024, 2048, 4096, 8192, 16384]
SRAM_KIB = [16, 64]  # Dao et al. (2022) Algorithm 1 tiles; at d = 64 any SRAM above 64 KiB gives the same tiles
TILE_ROWS = [128, 256]  # query tiles taller than d, as FlashAttention-2 kernels use
EXAMPLE = {"N": 6144, "d": 64, "gpu": "T4", "sram_kib": 64}  # the site's own worked example
GPU_NS = [1024, 2048, 4096, 8192, 16384]
NO_GPU_YET = "no GPU result yet / 尚無 GPU 結果"


def figures_dir() -> Path:
    """Return docs/figures/flash next to the results folder."""
    folder = results_dir().parent / "figures" / "flash"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def save_figure(fig, name: str) -> None:
    """Save docs/figures/flash/<name>.png (both languages show it: the plots carry no text to translate)."""
    fig.savefig(figures_dir() / f"{name}.png", dpi=120)


# ---------------------------------------------------------------- CPU peak memory

MEASURE_ONE = """
import json, sys, time, torch
from inferlab.flash import flash_attention, standard_attention
torch.set_num_threads(1)
method, n, d, block = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
q, k, v = (torch.randn(n, d) for _ in range(3))
run = (lambda: standard_attention(q, k, v)) if method == "standard" else (
    lambda: flash_attention(q, k, v, block_q=block, block_k=block))
run_small = torch.randn(8, d)
flash_attention(run_small, run_small, run_small); standard_attention(run_small, run_small, run_small)

def resident_kib(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1])

open("/proc/self/clear_refs", "w").write("5")  # reset the peak (VmHWM) to the current size
before = resident_kib("VmRSS")
start = time.perf_counter()
out = run()
seconds = time.perf_counter() - start
print(json.dumps({"peak_mib": (resident_kib("VmHWM") - before) / 1024, "seconds": seconds}))
"""


def measure_peak_memory(method: str, n: int, d: int = HEAD_DIM, block: int = MEMORY_BLOCK) -> dict:
    """Return peak resident memory above the inputs (MiB) and seconds of one forward, in a fresh process."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    done = subprocess.run(
        [sys.executable, "-c", MEASURE_ONE, method, str(n), str(d), str(block)],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
    )
    if done.returncode != 0:
        raise RuntimeError(f"memory run {method} N={n} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_memory(ns: list[int], command: str | None = None) -> dict:
    """Measure both methods at each N and write flash_memory_cpu.json."""
    rows = []
    for n in tqdm(ns, desc="peak memory (standard vs tiled)"):
        standard = measure_peak_memory("standard", n)
        tiled = measure_peak_memory("tiled", n)
        rows.append(
            {
                "N": n,
                "standard_mib": round(standard["peak_mib"], 1),
                "tiled_mib": round(tiled["peak_mib"], 1),
                "tiled_over_standard": round(tiled["peak_mib"] / standard["peak_mib"], 4),
                "standard_s": round(standard["seconds"], 3),
                "tiled_s": round(tiled["seconds"], 3),
                # What each must hold at once, fp32: S and P (2 N^2), vs O plus one tile of S (N d + block^2).
                "standard_model_mib": round(2 * n * n * 4 / 2**20, 1),
                "tiled_model_mib": round((n * HEAD_DIM + MEMORY_BLOCK**2) * 4 / 2**20, 2),
            }
        )
    last = rows[-1]
    values = {
        "d": HEAD_DIM,
        "block": MEMORY_BLOCK,
        "rows": rows,
        "largest_N": last["N"],
        "ratio_at_largest_N": last["tiled_over_standard"],
        "standard_mib_at_largest_N": last["standard_mib"],
        "tiled_mib_at_largest_N": last["tiled_mib"],
        "goal_ratio": 1 / 20,
        "goal_met": last["tiled_over_standard"] <= 1 / 20,
    }
    write_result("flash_memory_cpu", values, command=command)
    return values


def plot_memory(values: dict) -> None:
    import matplotlib.pyplot as plt

    ns = [row["N"] for row in values["rows"]]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.loglog(ns, [row["standard_mib"] for row in values["rows"]], "o-", label="standard (S and P in memory)")
    ax.loglog(
        ns,
        [max(row["tiled_mib"], 0.1) for row in values["rows"]],
        "s-",
        label=f"tiled, {values['block']}x{values['block']} tiles",
    )
    ax.set_xlabel("sequence length N")
    ax.set_ylabel("peak extra memory (MiB)")
    ax.set_title(f"Attention forward on a CPU, one head, d = {values['d']}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    save_figure(fig, "memory_cpu")
    plt.close(fig)


# ---------------------------------------------------------------- traffic and runtime models


def run_traffic() -> dict:
    """Evaluate the traffic and runtime models and write flash_traffic.json."""
    values = traffic_values()
    write_result("flash_traffic", values, command="python -m inferlab.flash.bench (traffic model, no measurement)")
    return values


def traffic_values() -> dict:
    """Return hbm_traffic and estimate_runtime over N and SRAM sizes, and the worked example."""
    rows = []
    for n in TRAFFIC_NS:
        row = {"N": n, "standard": hbm_traffic(n, HEAD_DIM, "standard")["total"]}
        for kib in SRAM_KIB:
            row[f"flash_{kib}KiB"] = hbm_traffic(n, HEAD_DIM, "flash", sram_bytes=kib * 1024)["total"]
        for block_q in TILE_ROWS:
            row[f"flash_{block_q}x64"] = hbm_traffic(n, HEAD_DIM, "flash", block_q=block_q, block_k=64)["total"]
        rows.append(row)
    runtime_rows = []
    for n in TRAFFIC_NS:
        flops = attention_flops(n, HEAD_DIM)
        row = {"N": n}
        for gpu in ("T4", "A100"):
            sram = GPU_PRESETS[gpu].sram_kib_per_sm * 1024
            standard = estimate_runtime(flops, 4 * hbm_traffic(n, HEAD_DIM, "standard")["total"], gpu)
            flash = estimate_runtime(flops, 4 * hbm_traffic(n, HEAD_DIM, "flash", sram_bytes=sram)["total"], gpu)
            row[f"{gpu}_standard_ms"] = round(standard["runtime_s"] * 1e3, 4)
            row[f"{gpu}_flash_ms"] = round(flash["runtime_s"] * 1e3, 4)
        runtime_rows.append(row)
    return {
        "d": HEAD_DIM,
        "element_bytes": 4,
        "traffic_rows": rows,
        "runtime_rows": runtime_rows,
        "example": worked_example(),
    }


def worked_example() -> dict:
    """Return every number of the HBM-traffic page's worked example, computed by the package."""
    n, d, gpu, kib = EXAMPLE["N"], EXAMPLE["d"], EXAMPLE["gpu"], EXAMPLE["sram_kib"]
    block_q, block_k = blocks_from_sram(kib * 1024, d)
    flops = attention_flops(n, d)
    standard = hbm_traffic(n, d, "standard")
    flash = hbm_traffic(n, d, "flash", sram_bytes=kib * 1024)
    standard_time = estimate_runtime(flops, 4 * standard["total"], gpu)
    flash_time = estimate_runtime(flops, 4 * flash["total"], gpu)
    spec = GPU_PRESETS[gpu]
    return {
        "N": n,
        "d": d,
        "gpu": gpu,
        "sram_kib": kib,
        "block_q": block_q,
        "block_k": block_k,
        "flops_g": round(flops / 1e9, 3),
        "standard_elements_m": round(standard["total"] / 1e6, 2),
        "flash_elements_m": round(flash["total"] / 1e6, 2),
        "standard_mb": round(4 * standard["total"] / 1e6, 1),
        "flash_mb": round(4 * flash["total"] / 1e6, 1),
        "traffic_ratio": round(standard["total"] / flash["total"], 2),
        "compute_ms": round(standard_time["compute_s"] * 1e3, 3),
        "standard_memory_ms": round(standard_time["memory_s"] * 1e3, 3),
        "flash_memory_ms": round(flash_time["memory_s"] * 1e3, 3),
        "standard_ms": round(standard_time["runtime_s"] * 1e3, 3),
        "flash_ms": round(flash_time["runtime_s"] * 1e3, 3),
        "standard_bound": standard_time["bound"],
        "flash_bound": flash_time["bound"],
        "standard_intensity": round(standard_time["arithmetic_intensity"], 2),
        "flash_intensity": round(flash_time["arithmetic_intensity"], 2),
        "ridge_point": round(standard_time["ridge_point"], 2),
        "gpu_tflops": spec.fp32_tflops,
        "gpu_bandwidth_gbs": spec.bandwidth_gbs,
    }


def plot_traffic(values: dict) -> None:
    import matplotlib.pyplot as plt

    ns = [row["N"] for row in values["traffic_rows"]]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    left.loglog(ns, [row["standard"] for row in values["traffic_rows"]], "o-", label="standard")
    for kib in SRAM_KIB:
        left.loglog(
            ns,
            [row[f"flash_{kib}KiB"] for row in values["traffic_rows"]],
            "s--",
            label=f"flash, SRAM {kib} KiB (Alg. 1 tiles)",
        )
    for block_q in TILE_ROWS:
        left.loglog(
            ns, [row[f"flash_{block_q}x64"] for row in values["traffic_rows"]], "^:", label=f"flash, {block_q}x64 tiles"
        )
    left.set_xlabel("sequence length N")
    left.set_ylabel("HBM reads + writes (elements)")
    left.set_title(f"HBM traffic, one head, d = {values['d']}")
    left.legend()
    left.grid(True, which="both", alpha=0.3)
    for gpu, marker in (("T4", "o"), ("A100", "^")):
        right.loglog(
            ns, [row[f"{gpu}_standard_ms"] for row in values["runtime_rows"]], marker + "-", label=f"{gpu} standard"
        )
        right.loglog(
            ns, [row[f"{gpu}_flash_ms"] for row in values["runtime_rows"]], marker + "--", label=f"{gpu} flash"
        )
    right.set_xlabel("sequence length N")
    right.set_ylabel("roofline estimate (ms, fp32)")
    right.set_title("Estimated forward time, one head")
    right.legend()
    right.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    save_figure(fig, "traffic")
    plt.close(fig)


def plot_roofline(values: dict) -> None:
    """Draw the T4 fp32 roofline with the worked example's two methods on it."""
    import matplotlib.pyplot as plt

    example = values["example"]
    spec = GPU_PRESETS[example["gpu"]]
    intensity = [2 ** (i / 4) for i in range(-8, 41)]
    attainable = [min(spec.fp32_tflops, x * spec.bandwidth_gbs / 1e3) for x in intensity]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.loglog(intensity, attainable, "k-", label=f"{spec.name} roof (fp32)")
    for key, label, marker in (("standard", "standard attention", "o"), ("flash", "tiled (flash)", "s")):
        x = example[f"{key}_intensity"]
        ax.loglog([x], [min(spec.fp32_tflops, x * spec.bandwidth_gbs / 1e3)], marker, markersize=9, label=label)
    ax.axvline(example["ridge_point"], color="gray", linestyle=":", label="ridge point")
    ax.set_xlabel("arithmetic intensity (FLOPs per byte)")
    ax.set_ylabel("attainable TFLOP/s")
    ax.set_title(f"Roofline, N = {example['N']}, d = {example['d']}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    save_figure(fig, "roofline")
    plt.close(fig)


def plot_tiles(n_tiles: int = 8, block: int = 4) -> None:
    """Draw which (query tile, key tile) pairs the causal forward visits, as the code decides it."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    from .tiled import tile_crosses_diagonal, visible_key_end

    n = n_tiles * block
    fig, ax = plt.subplots(figsize=(4.5, 4.8))
    for row in range(n_tiles):
        q_start, q_end = row * block, (row + 1) * block
        for col in range(n_tiles):
            k_start, k_end = col * block, (col + 1) * block
            if k_start >= visible_key_end(q_end, n, n, causal=True):
                color = "#f2f2f2"  # never loaded
            elif not tile_crosses_diagonal(q_start, k_end, n, n):
                color = "#cfd8ff"  # loaded, no mask needed
            else:
                color = "#ffd27f"  # loaded, masked inside
            ax.add_patch(Rectangle((col, n_tiles - 1 - row), 1, 1, facecolor=color, edgecolor="black"))
    ax.set_xlim(0, n_tiles)
    ax.set_ylim(0, n_tiles)
    ax.set_aspect("equal")
    ax.set_xticks([i + 0.5 for i in range(n_tiles)], [f"K{i}" for i in range(n_tiles)])
    ax.set_yticks([i + 0.5 for i in range(n_tiles)], [f"Q{n_tiles - 1 - i}" for i in range(n_tiles)])
    ax.set_title(
        "causal forward, 8 x 8 tiles\nblue: loaded, orange: loaded and masked inside,\ngrey: skipped", fontsize=9
    )
    fig.tight_layout()
    save_figure(fig, "tiles_causal")
    plt.close(fig)


def plot_online_softmax(n_keys: int = 12, block: int = 3, seed: int = 3) -> None:
    """Draw one query row's scores tile by tile with the running max and the rescaled running sum."""
    import matplotlib.pyplot as plt
    import torch

    from .tiled import online_softmax_step

    generator = torch.Generator().manual_seed(seed)
    scores = torch.randn(1, n_keys, generator=generator) * 2
    values = torch.zeros(n_keys, 1)  # only the max and the sum are drawn here
    row_max, row_sum, acc = torch.full((1,), float("-inf")), torch.zeros(1), torch.zeros(1, 1)
    maxima, sums = [], []
    for start in range(0, n_keys, block):
        row_max, row_sum, acc = online_softmax_step(
            row_max, row_sum, acc, scores[:, start : start + block], values[start : start + block]
        )
        maxima.append(row_max.item())
        sums.append(row_sum.item())
    full_sum = torch.exp(scores - scores.max()).sum().item()

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 5), sharex=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for tile, start in enumerate(range(0, n_keys, block)):
        keys = list(range(start, min(start + block, n_keys)))
        top.bar(keys, scores[0, keys].tolist(), color=colors[tile % len(colors)], label=f"tile {tile}")
        top.hlines(maxima[tile], start - 0.4, n_keys - 0.6, colors="black", linestyles=":")
        bottom.bar(start + (block - 1) / 2, sums[tile], width=block * 0.9, color=colors[tile % len(colors)])
    bottom.axhline(full_sum, color="black", linestyle="--", label="full softmax denominator")
    top.set_ylabel("score s_j")
    top.set_title("scores by tile; dotted: running max m after each tile")
    top.legend(ncol=4, fontsize=8)
    bottom.set_ylabel("running sum l")
    bottom.set_xlabel("key j")
    bottom.set_title("running sum after each tile, rescaled to the current max")
    bottom.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, "online_softmax")
    plt.close(fig)


# ---------------------------------------------------------------- GPU throughput


def run_gpu(ns: list[int], repeat: int = 10, command: str | None = None, tokens: int = 16384, heads: int = 16) -> dict:
    """Measure forward and backward TFLOP/s of our kernel, SDPA's flash backend and standard attention."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from .reference import standard_attention
    from .triton_kernel import triton_attention

    if not torch.cuda.is_available():
        raise SystemExit("--gpu needs a CUDA GPU; none was found (run the CPU benchmark without --gpu)")

    def sdpa(q, k, v, causal):
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

    methods = {
        "triton (ours)": lambda q, k, v, c: triton_attention(q, k, v, causal=c),
        "sdpa flash": sdpa,
        "standard": lambda q, k, v, c: standard_attention(q, k, v, causal=c),
    }
    d = HEAD_DIM
    rows = []
    dtypes = (torch.float16, torch.bfloat16) if torch.cuda.is_bf16_supported() else (torch.float16,)
    configs = [(dt, c, n) for dt in dtypes for c in (False, True) for n in ns]
    for dtype, causal, n in tqdm(configs, desc="GPU TFLOP/s"):
        batch = max(1, tokens // n)  # the same 16k tokens per step at every N (Dao 2023, Section 4.1)
        q, k, v = (torch.randn(batch, heads, n, d, device="cuda", dtype=dtype, requires_grad=True) for _ in range(3))
        grad = torch.randn_like(q)
        fwd_flops = attention_flops(n, d, causal) * batch * heads
        bwd_flops = attention_flops(n, d, causal, backward=True) * batch * heads
        for name, fn in methods.items():
            row = {"method": name, "dtype": str(dtype).replace("torch.", ""), "causal": causal, "N": n}
            try:
                fwd_s, bwd_s = time_forward_backward(fn, q, k, v, grad, causal, repeat)
                row["fwd_tflops"] = round(fwd_flops / fwd_s / 1e12, 1)
                row["bwd_tflops"] = round(bwd_flops / bwd_s / 1e12, 1)
            except torch.cuda.OutOfMemoryError:
                row["fwd_tflops"] = row["bwd_tflops"] = "OOM"
            torch.cuda.empty_cache()
            rows.append(row)
    ratios = []
    for row in rows:
        if row["method"] == "triton (ours)" and row["N"] >= 4096 and isinstance(row["fwd_tflops"], float):
            sdpa_row = next(
                r
                for r in rows
                if r["method"] == "sdpa flash"
                and (r["dtype"], r["causal"], r["N"]) == (row["dtype"], row["causal"], row["N"])
            )
            if isinstance(sdpa_row["fwd_tflops"], float) and sdpa_row["fwd_tflops"] > 0:
                ratios.append(row["fwd_tflops"] / sdpa_row["fwd_tflops"])
    values = {
        "measured": True,
        "device": torch.cuda.get_device_name(0),
        "heads": heads,
        "d": d,
        "tokens_per_step": tokens,
        "rows": rows,
        "forward_vs_sdpa_min_at_4k_plus": f"{min(ratios):.2f}x" if ratios else "—",
        "forward_vs_sdpa_goal": "0.80x",
    }
    write_result("flash_gpu", values, command=command)
    return values


def time_forward_backward(fn, q, k, v, grad, causal: bool, repeat: int) -> tuple[float, float]:
    """Return the median seconds of one forward and of one backward pass of an attention function."""
    import torch

    fwd_s = cuda_time(lambda: fn(q, k, v, causal), repeat)
    out = fn(q, k, v, causal)
    bwd_s = cuda_time(lambda: torch.autograd.grad(out, (q, k, v), grad, retain_graph=True), repeat)
    return fwd_s, bwd_s


def cuda_time(fn, repeat: int) -> float:
    """Return the median seconds of ``fn`` on the GPU, timed with CUDA events after a warm-up."""
    import statistics

    import torch

    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def write_gpu_placeholder_if_missing() -> None:
    """Write flash_gpu.json saying no GPU result exists yet, unless a measured one is there."""
    try:
        if read_result("flash_gpu")["values"].get("measured"):
            return
    except FileNotFoundError:
        pass
    write_result(
        "flash_gpu",
        {
            "measured": False,
            "rows": [{"status": NO_GPU_YET}],
            "forward_vs_sdpa_min_at_4k_plus": "—",
            "forward_vs_sdpa_goal": "0.80x",
        },
        command="python -m inferlab.flash.bench (a placeholder until python -m inferlab.flash.bench --gpu runs on a GPU)",
    )


def plot_gpu(values: dict) -> None:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, causal in zip(axes, (False, True), strict=True):
        for method in ("triton (ours)", "sdpa flash", "standard"):
            rows = [
                r
                for r in values["rows"]
                if r["method"] == method
                and r["causal"] == causal
                and r["dtype"] == "float16"
                and isinstance(r["fwd_tflops"], float)
            ]
            ax.semilogx([r["N"] for r in rows], [r["fwd_tflops"] for r in rows], "o-", label=method)
        ax.set_title(f"forward, fp16, {'causal' if causal else 'not causal'}")
        ax.set_xlabel("sequence length N")
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("TFLOP/s")
    axes[0].legend()
    fig.tight_layout()
    save_figure(fig, "gpu_tflops")
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="FlashAttention benchmarks and figures.")
    parser.add_argument("--quick", action="store_true", help="N only up to 4k (a minute on a CPU)")
    parser.add_argument("--gpu", action="store_true", help="measure TFLOP/s on a CUDA GPU instead")
    args = parser.parse_args(argv)
    command = " ".join(["python -m inferlab.flash.bench", *(sys.argv[1:] if argv is None else argv)])
    if args.gpu:
        values = run_gpu(GPU_NS[:3] if args.quick else GPU_NS, command=command)
        plot_gpu(values)
        print(f"forward vs SDPA (min over N >= 4k): {values['forward_vs_sdpa_min_at_4k_plus']}")
        return 0
    started = time.perf_counter()
    traffic = run_traffic()
    plot_traffic(traffic)
    plot_roofline(traffic)
    plot_tiles()
    plot_online_softmax()
    write_gpu_placeholder_if_missing()
    memory = run_memory([n for n in MEMORY_NS if n <= 4096] if args.quick else MEMORY_NS, command=command)
    plot_memory(memory)
    print(
        f"tiled / standard peak memory at N={memory['largest_N']}: {memory['ratio_at_largest_N']:.4f} "
        f"(goal <= {memory['goal_ratio']:.2f}); {time.perf_counter() - started:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
