"""Benchmarks and figures for the FlashAttention pages.

    python -m inferlab.flash.bench            # CPU: peak memory, traffic and runtime models, figures
    python -m inferlab.flash.bench --quick    # the same with N only up to 4k
    python -m inferlab.flash.bench --gpu      # GPU: forward/backward TFLOP/s (needs CUDA and Triton)

Result files (docs/results/):
    flash_memory_cpu.json   peak memory of the tiled forward vs standard attention, N up to 16k
    flash_traffic.json      hbm_traffic and estimate_runtime over N, for several SRAM sizes
    flash_gpu.json          measured TFLOP/s and peak memory on a GPU (a placeholder saying so until one is run)
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
from inferlab.bench.figures import save_figure as save_bilingual

from .traffic import GPU_PRESETS, attention_flops, blocks_from_sram, estimate_runtime, hbm_traffic

HEAD_DIM = 64
MEMORY_NS = [1024, 2048, 4096, 8192, 16384]
MEMORY_BLOCK = 128  # the tiled forward's tile for the memory run (bigger tiles, fewer Python steps)
TRAFFIC_NS = [768, 1536, 3072, 6144, 12288, 24576]  # not the NTU lab's own sizes: its questions are yours
SRAM_KIB = [16, 64]  # Dao et al. (2022) Algorithm 1 tiles; at d = 64 any SRAM above 64 KiB gives the same tiles
TILE_ROWS = [128, 256]  # query tiles taller than d, as FlashAttention-2 kernels use
EXAMPLE = {"N": 6144, "d": 64, "gpu": "T4", "sram_kib": 64}  # the site's own worked example
GPU_NS = [512, 1024, 2048, 4096, 8192, 16384]
NO_GPU_YET = "no GPU result yet / 尚無 GPU 結果"


def figures_dir() -> Path:
    """Return docs/figures/flash next to the results folder."""
    folder = results_dir().parent / "figures" / "flash"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def save_figure(fig, name: str) -> None:
    """Save docs/figures/flash/<name>.png and its zh-TW version, <name>.zh-TW.png."""
    save_bilingual(fig, figures_dir() / f"{name}.png", dpi=120)


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

PRECISIONS = {"fp32": 4, "fp16": 2}  # estimate_runtime's precision -> bytes per element
RUNTIME_GPUS = ("T4", "A100")
BOUND_ZH = {"memory": "受限於記憶體", "compute": "受限於計算"}  # the glossary's terms, for the zh-TW pages


def run_traffic() -> dict:
    """Evaluate the traffic and runtime models and write flash_traffic.json (a model: nothing is timed)."""
    values = traffic_values()
    write_result("flash_traffic", values, command="python -m inferlab.flash.bench --traffic-only")
    return values


def tiled_traffic(n: int, d: int, gpu: str, precision: str) -> dict:
    """Return hbm_traffic of the tiled forward with Algorithm 1's tiles for one SM of ``gpu`` at ``precision``."""
    sram = GPU_PRESETS[gpu].sram_kib_per_sm * 1024
    return hbm_traffic(n, d, "flash", sram_bytes=sram, element_bytes=PRECISIONS[precision])


def traffic_of(method: str, n: int, d: int, gpu: str, precision: str) -> dict:
    """Return hbm_traffic of one method; only the tiled count depends on the GPU's SRAM and the precision."""
    return tiled_traffic(n, d, gpu, precision) if method == "flash" else hbm_traffic(n, d, method)


def runtime_rows(precision: str) -> list[dict]:
    """Return roofline estimates (ms) of standard and tiled attention over N on the T4 and the A100."""
    rows = []
    for n in TRAFFIC_NS:
        flops = attention_flops(n, HEAD_DIM)
        row = {"N": n}
        for gpu in RUNTIME_GPUS:
            for method, label in (("standard", "standard"), ("flash", "tiled")):
                moved = traffic_of(method, n, HEAD_DIM, gpu, precision)["total"] * PRECISIONS[precision]
                estimate = estimate_runtime(flops, moved, gpu, precision)
                row[f"{gpu} {label} ms"] = round(estimate["runtime_s"] * 1e3, 4)
        rows.append(row)
    return rows


def traffic_values() -> dict:
    """Return hbm_traffic and estimate_runtime over N, SRAM sizes and precisions, and the worked example."""
    rows = []
    for n in TRAFFIC_NS:
        row = {
            "N": n,
            "standard": hbm_traffic(n, HEAD_DIM, "standard")["total"],
            "flash_ideal": hbm_traffic(n, HEAD_DIM, "flash_ideal")["total"],
        }
        for kib in SRAM_KIB:
            row[f"flash_{kib}KiB"] = hbm_traffic(n, HEAD_DIM, "flash", sram_bytes=kib * 1024)["total"]
        for block_q in TILE_ROWS:
            row[f"flash_{block_q}x64"] = hbm_traffic(n, HEAD_DIM, "flash", block_q=block_q, block_k=64)["total"]
        rows.append(row)
    return {
        "d": HEAD_DIM,
        "element_bytes": 4,
        "traffic_rows": rows,
        "runtime_rows": runtime_rows("fp32"),
        "runtime_rows_fp16": runtime_rows("fp16"),
        "precision_rows": precision_rows(),
        "example": worked_example(),
    }


def precision_rows() -> list[dict]:
    """Return, per GPU and precision, the ridge point and where the worked example's standard attention sits."""
    n, d = EXAMPLE["N"], EXAMPLE["d"]
    flops = attention_flops(n, d)
    rows = []
    for gpu, spec in GPU_PRESETS.items():
        for precision, element_bytes in PRECISIONS.items():
            moved = hbm_traffic(n, d, "standard")["total"] * element_bytes
            estimate = estimate_runtime(flops, moved, gpu, precision)
            rows.append(
                {
                    "GPU": gpu,
                    "precision": "fp32, CUDA cores" if precision == "fp32" else "fp16, Tensor Cores",
                    "peak TFLOP/s": spec.fp32_tflops if precision == "fp32" else spec.fp16_tflops,
                    "ridge point (FLOP/byte)": round(estimate["ridge_point"], 1),
                    "standard attention (FLOP/byte)": round(estimate["arithmetic_intensity"], 1),
                    "bound": estimate["bound"],
                }
            )
    return rows


def worked_example() -> dict:
    """Return every number of the HBM-traffic page's worked example, computed by the package."""
    n, d, gpu, kib = EXAMPLE["N"], EXAMPLE["d"], EXAMPLE["gpu"], EXAMPLE["sram_kib"]
    block_q, block_k = blocks_from_sram(kib * 1024, d)
    flops = attention_flops(n, d)
    spec = GPU_PRESETS[gpu]
    values = {
        "N": n,
        "d": d,
        "gpu": gpu,
        "sram_kib": kib,
        "block_q": block_q,
        "block_k": block_k,
        "flops_g": round(flops / 1e9, 3),
        "gpu_tflops": spec.fp32_tflops,
        "gpu_fp16_tflops": spec.fp16_tflops,
        "gpu_bandwidth_gbs": spec.bandwidth_gbs,
        "compute_ms": round(flops / (spec.fp32_tflops * 1e12) * 1e3, 3),
        "ridge_point": round(spec.fp32_tflops * 1e12 / (spec.bandwidth_gbs * 1e9), 2),
        "ridge_point_fp16": round(spec.fp16_tflops * 1e12 / (spec.bandwidth_gbs * 1e9), 2),
    }
    labels = {
        "standard": "standard, N(4d + 4N)",
        "flash": f"tiled, {block_q} x {block_k} tiles",
        "flash_ideal": "ideal, N(5d + 4)",
    }
    conventions, totals = [], {}
    for method, label in labels.items():
        totals[method] = traffic_of(method, n, d, gpu, "fp32")["total"]
        roofline = estimate_runtime(flops, 4 * totals[method], gpu)
        additive = estimate_runtime(flops, 4 * totals[method], gpu, runtime_model="additive")
        half = traffic_of(method, n, d, gpu, "fp16")["total"]
        fp16 = estimate_runtime(flops, 2 * half, gpu, "fp16")
        values.update(
            {
                f"{method}_elements_m": round(totals[method] / 1e6, 2),
                f"{method}_mb": round(4 * totals[method] / 1e6, 1),
                f"{method}_memory_ms": round(roofline["memory_s"] * 1e3, 3),
                f"{method}_ms": round(roofline["runtime_s"] * 1e3, 3),
                f"{method}_additive_ms": round(additive["runtime_s"] * 1e3, 3),
                f"{method}_bound": roofline["bound"],
                f"{method}_bound_zh": BOUND_ZH[roofline["bound"]],
                f"{method}_intensity": round(roofline["arithmetic_intensity"], 2),
                f"{method}_fp16_ms": round(fp16["runtime_s"] * 1e3, 4),
                f"{method}_fp16_bound": fp16["bound"],
                f"{method}_fp16_bound_zh": BOUND_ZH[fp16["bound"]],
            }
        )
        conventions.append(
            {
                "traffic count": label,
                "elements (M)": round(totals[method] / 1e6, 2),
                "memory ms": round(roofline["memory_s"] * 1e3, 3),
                "max(compute, memory) ms": round(roofline["runtime_s"] * 1e3, 3),
                "compute + memory ms": round(additive["runtime_s"] * 1e3, 3),
            }
        )
    values["traffic_ratio"] = round(totals["standard"] / totals["flash"], 2)
    values["tiled_over_ideal"] = round(totals["flash"] / totals["flash_ideal"], 1)
    # The ideal count is Algorithm 1's when one key/value block holds all N keys: B_c = M / 4d >= N.
    ideal_sram_bytes = 4 * n * d * 4
    values["ideal_sram_mib"] = round(ideal_sram_bytes / 2**20, 1)
    values["ideal_sram_over_sm"] = round(ideal_sram_bytes / (kib * 1024))
    values["conventions"] = conventions
    return values


def plot_traffic(values: dict) -> None:
    """Draw HBM traffic against N (top) and the roofline estimates in fp32 and fp16 (below).

    Laid out for a phone as much as for a desktop: 6.4 inches wide, text of 10 points or more,
    one legend shared by the two estimate plots.
    """
    import matplotlib.pyplot as plt

    ns = [row["N"] for row in values["traffic_rows"]]
    fig = plt.figure(figsize=(6.4, 8.2))
    grid = fig.add_gridspec(2, 2, height_ratios=(1.15, 1))
    top = fig.add_subplot(grid[0, :])
    middle, right = fig.add_subplot(grid[1, 0]), fig.add_subplot(grid[1, 1])
    top.loglog(ns, [row["standard"] for row in values["traffic_rows"]], "o-", label="standard")
    for kib in SRAM_KIB:
        top.loglog(
            ns,
            [row[f"flash_{kib}KiB"] for row in values["traffic_rows"]],
            "s--",
            label=f"tiled, SRAM {kib} KiB (Alg. 1 tiles)",
        )
    for block_q in TILE_ROWS:
        top.loglog(
            ns, [row[f"flash_{block_q}x64"] for row in values["traffic_rows"]], "^:", label=f"tiled, {block_q}x64 tiles"
        )
    top.loglog(ns, [row["flash_ideal"] for row in values["traffic_rows"]], "k-.", label="ideal: all once, N(5d+4)")
    top.set_xlabel("sequence length N")
    top.set_ylabel("HBM reads + writes (elements)")
    top.set_title(f"HBM traffic, one head, d = {values['d']}")
    top.legend(fontsize=10)
    top.grid(True, which="both", alpha=0.3)
    for ax, key, precision in (
        (middle, "runtime_rows", "fp32, CUDA cores"),
        (right, "runtime_rows_fp16", "fp16, Tensor Cores"),
    ):
        for gpu, marker in (("T4", "o"), ("A100", "^")):
            ax.loglog(ns, [row[f"{gpu} standard ms"] for row in values[key]], marker + "-", label=f"{gpu} standard")
            ax.loglog(ns, [row[f"{gpu} tiled ms"] for row in values[key]], marker + "--", label=f"{gpu} tiled")
        ax.set_xlabel("sequence length N")
        ax.set_title(precision, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
    middle.set_ylabel("roofline estimate (ms)")
    handles, names = middle.get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=4, fontsize=10, frameon=False)
    fig.tight_layout(rect=(0, 0.04, 1, 1))  # room for the shared legend under the plots
    save_figure(fig, "traffic")
    plt.close(fig)


def plot_roofline(values: dict) -> None:
    """Draw the T4 rooflines (fp32 and fp16) with the worked example's two methods on each."""
    import matplotlib.pyplot as plt

    example = values["example"]
    spec = GPU_PRESETS[example["gpu"]]
    n, d = example["N"], example["d"]
    flops = attention_flops(n, d)
    intensity = [2 ** (i / 4) for i in range(-8, 48)]
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for precision, peak, style in (("fp32", spec.fp32_tflops, "k-"), ("fp16", spec.fp16_tflops, "k--")):
        attainable = [min(peak, x * spec.bandwidth_gbs / 1e3) for x in intensity]
        ax.loglog(intensity, attainable, style, label=f"{spec.name} roof, {precision}")
        for method, label, marker in (("standard", "standard", "o"), ("flash", "tiled", "s")):
            moved = traffic_of(method, n, d, spec.name, precision)["total"] * PRECISIONS[precision]
            x = flops / moved
            point = min(peak, x * spec.bandwidth_gbs / 1e3)
            ax.loglog([x], [point], marker, markersize=8, label=f"{label}, {precision}")
    ax.set_xlabel("arithmetic intensity (FLOPs per byte)")
    ax.set_ylabel("attainable TFLOP/s")
    ax.set_title(f"Roofline, N = {n}, d = {d}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
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


# ---------------------------------------------------------------- GPU throughput and memory

GPU_HEAD_DIMS = [64, 128]
GPU_DTYPES = ["float16", "bfloat16"]
GPU_TOKENS = 16384  # the same tokens per step at every N: batch = tokens // N (Dao 2023, Section 4.1)
GPU_HEADS = 16
GPU_REPEAT = 10
GOAL_MIN_N = 4096  # the forward goal is judged at N >= 4k, fp16 (issue: 0.8x of SDPA's flash backend)
TILED_BLOCK = 256  # the PyTorch tiled version on a GPU: every tile costs kernel launches, so big tiles
SECONDS_PER_MEASUREMENT = 0.3  # a slow call gets fewer repeats (never under 3), so the sweep fits its budget
METHODS = ("triton (ours)", "sdpa flash", "tiled (PyTorch)", "standard")


def attention_methods() -> dict:
    """Return the four implementations the GPU benchmark compares, each (q, k, v, causal) -> O, differentiable."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from .reference import standard_attention
    from .tiled import FlashAttention
    from .triton_kernel import triton_attention

    def sdpa_flash(q, k, v, causal):
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):  # this backend or an error, never a silent fallback
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return {
        "triton (ours)": lambda q, k, v, causal: triton_attention(q, k, v, causal=causal),
        "sdpa flash": sdpa_flash,
        "tiled (PyTorch)": lambda q, k, v, causal: FlashAttention.apply(q, k, v, causal, TILED_BLOCK, TILED_BLOCK),
        "standard": lambda q, k, v, causal: standard_attention(q, k, v, causal=causal),
    }


def wait_for(device) -> None:
    """Wait for the GPU's queued work (a no-op on a CPU): kernels run asynchronously."""
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_once(fn, device) -> float:
    """Return the seconds of one call of fn: CUDA events on a GPU, the wall clock on a CPU."""
    import torch

    if device.type != "cuda":
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize(device)
    return start.elapsed_time(end) / 1e3


def device_time(fn, repeat: int, device) -> float:
    """Return the median seconds of fn after a warm-up; calls slower than the per-measurement budget repeat less."""
    import math
    import statistics

    fn()  # warm-up: compiles the Triton kernel for this shape class, fills the allocator's cache
    wait_for(device)
    times = [time_once(fn, device)]
    wanted = min(repeat, max(3, math.ceil(SECONDS_PER_MEASUREMENT / max(times[0], 1e-9))))
    times += [time_once(fn, device) for _ in range(wanted - 1)]
    return statistics.median(times)


def time_forward_backward(fn, q, k, v, grad, causal: bool, repeat: int) -> tuple[float, float]:
    """Return the median seconds of one forward and of one backward pass of an attention function."""
    import torch

    fwd_s = device_time(lambda: fn(q, k, v, causal), repeat, q.device)
    out = fn(q, k, v, causal)
    bwd_s = device_time(lambda: torch.autograd.grad(out, (q, k, v), grad, retain_graph=True), repeat, q.device)
    return fwd_s, bwd_s


def peak_memory_mib(fn, device) -> float | None:
    """Return the peak GPU memory (MiB) fn allocates above what was allocated before it; None on a CPU."""
    import torch

    if device.type != "cuda":
        fn()  # still run it: the CPU dry run checks that every method works
        return None
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    result = fn()
    torch.cuda.synchronize(device)
    peak = torch.cuda.max_memory_allocated(device) - before
    del result
    return round(peak / 2**20, 1)


def failure_status(error: Exception) -> str:
    """Return a short status for a failed measurement: OOM, or the error's type and first line."""
    import torch

    if isinstance(error, torch.cuda.OutOfMemoryError):
        return "OOM"
    return f"error: {type(error).__name__}: {str(error).splitlines()[0][:160] if str(error) else ''}"


def measure_throughput(methods: dict, dtype, d: int, causal: bool, n: int, repeat: int, device, tokens, heads):
    """Return one row per method: forward and backward TFLOP/s and milliseconds at one (dtype, d, causal, N)."""
    import torch

    batch = max(1, tokens // n)
    q, k, v = (torch.randn(batch, heads, n, d, device=device, dtype=dtype, requires_grad=True) for _ in range(3))
    grad = torch.randn_like(q)
    fwd_flops = attention_flops(n, d, causal) * batch * heads
    bwd_flops = attention_flops(n, d, causal, backward=True) * batch * heads
    rows = []
    for name, fn in methods.items():
        row = throughput_row(name, dtype, d, causal, n, batch)
        try:
            fwd_s, bwd_s = time_forward_backward(fn, q, k, v, grad, causal, repeat)
            row.update(
                fwd_tflops=round(fwd_flops / fwd_s / 1e12, 2),
                bwd_tflops=round(bwd_flops / bwd_s / 1e12, 2),
                fwd_ms=round(fwd_s * 1e3, 4),
                bwd_ms=round(bwd_s * 1e3, 4),
                status="ok",
            )
        except Exception as error:  # noqa: BLE001 - one failing method must not lose the whole sweep
            row["status"] = failure_status(error)
        if device.type == "cuda":
            torch.cuda.empty_cache()
        rows.append(row)
    return rows


def throughput_row(method: str, dtype, d: int, causal: bool, n: int, batch: int) -> dict:
    """Return a row with every column present (so the tables line up) and nothing measured yet."""
    return {
        "method": method,
        "dtype": str(dtype).replace("torch.", ""),
        "d": d,
        "causal": causal,
        "N": n,
        "batch": batch,
        "fwd_tflops": None,
        "bwd_tflops": None,
        "fwd_ms": None,
        "bwd_ms": None,
        "status": "not run",
    }


def measure_memory(methods: dict, dtype, d: int, n: int, heads: int, device) -> list[dict]:
    """Return one row per method: peak extra memory of a forward (no autograd) and of forward + backward."""
    import torch

    q, k, v = (torch.randn(1, heads, n, d, device=device, dtype=dtype, requires_grad=True) for _ in range(3))
    grad = torch.randn_like(q)
    rows = []
    for name, fn in methods.items():
        row = memory_row(name, n, d, heads, q.element_size()) | {"status": "ok"}

        def forward(fn=fn):
            with torch.no_grad():
                return fn(q, k, v, False)

        def forward_backward(fn=fn):
            return torch.autograd.grad(fn(q, k, v, False), (q, k, v), grad)

        try:
            row["fwd_peak_mib"] = peak_memory_mib(forward, device)
            row["fwd_bwd_peak_mib"] = peak_memory_mib(forward_backward, device)
        except Exception as error:  # noqa: BLE001 - standard attention may run out of memory at the largest N
            row["status"] = failure_status(error)
        if device.type == "cuda":
            torch.cuda.empty_cache()
        rows.append(row)
    return rows


def memory_row(method: str, n: int, d: int, heads: int, element_bytes: int) -> dict:
    """Return a memory row with every column present and nothing measured yet."""
    return {
        "method": method,
        "N": n,
        "fwd_peak_mib": None,
        "fwd_bwd_peak_mib": None,
        # One N x N matrix per head (S or P): what standard attention must hold, the O(N^2) reference line.
        "scores_mib": round(heads * n * n * element_bytes / 2**20, 1),
        "inputs_mib": round(3 * heads * n * d * element_bytes / 2**20, 2),
        "status": "not run",
    }


def comparison_rows(rows: list[dict]) -> list[dict]:
    """Return ours against SDPA's flash backend and the tiled PyTorch version, one row per (dtype, d, causal, N)."""
    by_key = {(r["method"], r["dtype"], r["d"], r["causal"], r["N"]): r for r in rows}
    out = []
    for r in rows:
        if r["method"] != "triton (ours)":
            continue
        key = (r["dtype"], r["d"], r["causal"], r["N"])
        sdpa, tiled = by_key.get(("sdpa flash", *key), {}), by_key.get(("tiled (PyTorch)", *key), {})
        out.append(
            {
                "dtype": r["dtype"],
                "d": r["d"],
                "causal": r["causal"],
                "N": r["N"],
                "ours_fwd_tflops": r["fwd_tflops"],
                "sdpa_fwd_tflops": sdpa.get("fwd_tflops"),
                "fwd_vs_sdpa": speed_ratio(r["fwd_ms"], sdpa.get("fwd_ms")),
                "fwd_vs_tiled": speed_ratio(r["fwd_ms"], tiled.get("fwd_ms")),
                "ours_bwd_tflops": r["bwd_tflops"],
                "sdpa_bwd_tflops": sdpa.get("bwd_tflops"),
                "bwd_vs_sdpa": speed_ratio(r["bwd_ms"], sdpa.get("bwd_ms")),
            }
        )
    return out


def speed_ratio(our_ms, their_ms) -> float | None:
    """Return our speed over theirs (their time / ours: same FLOPs), or None when either was not measured."""
    if not isinstance(our_ms, (int, float)) or not isinstance(their_ms, (int, float)) or our_ms <= 0:
        return None
    return round(their_ms / our_ms, 3)


def run_gpu(
    ns: list[int],
    head_dims: list[int] | None = None,
    dtypes: list[str] | None = None,
    repeat: int = GPU_REPEAT,
    device: str = "cuda",
    max_seconds: float | None = None,
    command: str | None = None,
    tokens: int = GPU_TOKENS,
    heads: int = GPU_HEADS,
) -> dict:
    """Measure our Triton kernel, SDPA's flash backend, the tiled PyTorch version and standard attention.

    Peak memory first (one forward, and one forward + backward, at batch 1: O(N) against O(N^2)), then
    forward and backward TFLOP/s at every (dtype, d, causal, N), fp16 first. Past ``max_seconds`` the
    remaining measurements are recorded as skipped, so a result file is always written.
    """
    import torch

    head_dims = head_dims or GPU_HEAD_DIMS
    dtypes = dtypes or GPU_DTYPES
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--gpu needs a CUDA GPU; none was found (run the CPU benchmark without --gpu)")
    where = torch.device(device)
    skipped_dtypes = []
    if device == "cuda" and "bfloat16" in dtypes and not torch.cuda.is_bf16_supported():
        skipped_dtypes.append("bfloat16")  # compute capability < 8.0
    dtypes = [name for name in dtypes if name not in skipped_dtypes]
    started = time.monotonic()

    def out_of_time() -> bool:
        return max_seconds is not None and time.monotonic() - started > max_seconds

    methods = attention_methods()
    memory_rows = []
    memory_dtype, memory_d = getattr(torch, dtypes[0]), head_dims[0]
    for n in tqdm(ns, desc="GPU peak memory"):
        if out_of_time():
            skipped = {"status": "skipped: time budget"}
            memory_rows += [memory_row(m, n, memory_d, heads, memory_dtype.itemsize) | skipped for m in methods]
            continue
        memory_rows += measure_memory(methods, memory_dtype, memory_d, n, heads, where)

    rows = []
    configs = [(dt, d, c, n) for dt in dtypes for d in head_dims for c in (False, True) for n in ns]
    for dtype_name, d, causal, n in tqdm(configs, desc="GPU TFLOP/s"):
        if out_of_time():
            batch = max(1, tokens // n)
            for name in methods:
                rows.append(throughput_row(name, dtype_name, d, causal, n, batch) | {"status": "skipped: time budget"})
            continue
        rows += measure_throughput(methods, getattr(torch, dtype_name), d, causal, n, repeat, where, tokens, heads)

    comparisons = comparison_rows(rows)
    goal = [r for r in comparisons if r["dtype"] == "float16" and r["N"] >= GOAL_MIN_N]
    goal_ratios = [r["fwd_vs_sdpa"] for r in goal if r["fwd_vs_sdpa"] is not None]
    values = {
        "measured": device == "cuda",
        "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu (plumbing check, not a measurement)",
        "heads": heads,
        "head_dims": head_dims,
        "dtypes": dtypes,
        "dtypes_skipped": skipped_dtypes,
        "tokens_per_step": tokens,
        "tiled_block": TILED_BLOCK,
        "seconds": round(time.monotonic() - started, 1),
        "rows": rows,
        "comparison_rows": comparisons,
        "goal_rows": goal or [{"status": f"no fp16 row at N >= {GOAL_MIN_N} in this run"}],
        "memory": {"dtype": dtypes[0], "d": memory_d, "batch": 1, "heads": heads, "rows": memory_rows},
        "forward_vs_sdpa_min_at_4k_plus": f"{min(goal_ratios):.2f}x" if goal_ratios else "—",
        "forward_vs_sdpa_goal": "0.80x",
        "goal_met": (min(goal_ratios) >= 0.8) if goal_ratios else None,
    }
    write_result("flash_gpu", values, command=command)
    return values


def write_gpu_placeholder_if_missing() -> None:
    """Write flash_gpu.json saying no GPU result exists yet, unless a measured one is there."""
    try:
        if read_result("flash_gpu")["values"].get("measured"):
            return
    except FileNotFoundError:
        pass
    status = [{"status": NO_GPU_YET}]
    write_result(
        "flash_gpu",
        {
            "measured": False,
            "rows": status,
            "comparison_rows": status,
            "goal_rows": status,
            "memory": {"rows": status},
            "forward_vs_sdpa_min_at_4k_plus": "—",
            "forward_vs_sdpa_goal": "0.80x",
            "goal_met": None,
        },
        command="python -m inferlab.flash.bench (a placeholder until python -m inferlab.flash.bench --gpu runs on a GPU)",
    )


def plot_gpu(values: dict) -> None:
    """Draw forward and backward TFLOP/s (first dtype, every d, causal and not) and the peak-memory figure."""
    import matplotlib.pyplot as plt

    dtype = values["dtypes"][0]
    for key, name, title in (
        ("fwd_tflops", "gpu_tflops", "forward"),
        ("bwd_tflops", "gpu_tflops_backward", "backward"),
    ):
        head_dims = values["head_dims"]
        fig, axes = plt.subplots(len(head_dims), 2, figsize=(11, 3.6 * len(head_dims)), sharey=True, squeeze=False)
        for axes_row, d in zip(axes, head_dims, strict=True):
            for ax, causal in zip(axes_row, (False, True), strict=True):
                for method in METHODS:
                    rows = [
                        r
                        for r in values["rows"]
                        if (r["method"], r["dtype"], r["d"], r["causal"]) == (method, dtype, d, causal)
                        and isinstance(r[key], (int, float))
                    ]
                    ax.semilogx([r["N"] for r in rows], [r[key] for r in rows], "o-", label=method)
                ax.set_title(f"{title}, {dtype}, d = {d}, {'causal' if causal else 'not causal'}")
                ax.set_xlabel("sequence length N")
                ax.grid(True, alpha=0.3)
            axes_row[0].set_ylabel("TFLOP/s")
        axes[0][0].legend()
        fig.tight_layout()
        save_figure(fig, name)
        plt.close(fig)

    memory = values["memory"]
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for method in METHODS:
        rows = [r for r in memory["rows"] if r["method"] == method and isinstance(r.get("fwd_peak_mib"), (int, float))]
        ax.loglog([r["N"] for r in rows], [max(r["fwd_peak_mib"], 0.01) for r in rows], "o-", label=method)
    reference = [r for r in memory["rows"] if r["method"] == METHODS[0] and "scores_mib" in r]
    ax.loglog(
        [r["N"] for r in reference], [r["scores_mib"] for r in reference], "k:", label="one N x N matrix per head"
    )
    ax.set_xlabel("sequence length N")
    ax.set_ylabel("peak extra memory of a forward (MiB)")
    ax.set_title(f"{memory['dtype']}, batch 1, {memory['heads']} heads, d = {memory['d']}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, "gpu_memory")
    plt.close(fig)


def gpu_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of the GPU benchmark (they need --gpu)."""
    group = parser.add_argument_group("GPU benchmark (with --gpu)")
    group.add_argument("--ns", type=int, nargs="+", help=f"sequence lengths (default {GPU_NS})")
    group.add_argument("--head-dims", type=int, nargs="+", help=f"head dims (default {GPU_HEAD_DIMS})")
    group.add_argument("--dtypes", nargs="+", help=f"float16, bfloat16, float32 (default {GPU_DTYPES})")
    group.add_argument("--repeat", type=int, help=f"timed repeats per measurement, at most (default {GPU_REPEAT})")
    group.add_argument("--max-seconds", type=float, help="stop starting measurements after this; the rest are skipped")
    group.add_argument("--heads", type=int, help=f"attention heads (default {GPU_HEADS})")
    group.add_argument("--tokens", type=int, help=f"tokens per step, batch = tokens // N (default {GPU_TOKENS})")
    group.add_argument(
        "--device",
        default="cuda",
        help="cuda (default), or cpu to check the plumbing on tiny sizes: needs TRITON_INTERPRET=1 and "
        "INFERLAB_RESULTS pointing away from docs/results (tools/gpu_run.sh --dry-run does this)",
    )


def check_gpu_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Reject bad GPU options before any work starts, naming the option and what is allowed."""
    names = ("ns", "head_dims", "dtypes", "repeat", "max_seconds", "heads", "tokens")
    given = [f"--{name.replace('_', '-')}" for name in names]
    given = [flag for flag in given if getattr(args, flag[2:].replace("-", "_")) is not None]
    if not args.gpu:
        if given or args.device != "cuda":
            parser.error(f"{', '.join(given) or '--device'} only apply with --gpu")
        return
    if args.ns is not None and any(n < 1 for n in args.ns):
        parser.error(f"--ns must be integers >= 1, got {args.ns}")
    allowed_dims = (16, 32, 64, 128)  # the Triton kernel's SUPPORTED_HEAD_DIMS
    if args.head_dims is not None and any(d not in allowed_dims for d in args.head_dims):
        parser.error(f"--head-dims must each be one of {allowed_dims}, got {args.head_dims}")
    if args.dtypes is not None and any(t not in ("float16", "bfloat16", "float32") for t in args.dtypes):
        parser.error(f"--dtypes must each be float16, bfloat16 or float32, got {args.dtypes}")
    for flag, value in (("--repeat", args.repeat), ("--heads", args.heads), ("--tokens", args.tokens)):
        if value is not None and value < 1:
            parser.error(f"{flag} must be an integer >= 1, got {value}")
    if args.max_seconds is not None and args.max_seconds <= 0:
        parser.error(f"--max-seconds must be > 0, got {args.max_seconds}")
    if args.device not in ("cuda", "cpu"):
        parser.error(f"--device must be cuda or cpu, got {args.device!r}")
    if args.device == "cpu":
        if os.environ.get("TRITON_INTERPRET") != "1":
            parser.error("--device cpu runs our Triton kernel in Triton's interpreter: set TRITON_INTERPRET=1")
        if not os.environ.get("INFERLAB_RESULTS"):
            parser.error(
                "--device cpu only checks the plumbing; set INFERLAB_RESULTS to a scratch folder so that "
                "docs/results/flash_gpu.json is not overwritten"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="FlashAttention benchmarks and figures.")
    parser.add_argument("--quick", action="store_true", help="N only up to 4k (a minute on a CPU)")
    parser.add_argument("--gpu", action="store_true", help="measure TFLOP/s and peak memory on a CUDA GPU instead")
    parser.add_argument(
        "--traffic-only",
        action="store_true",
        help="only the traffic and runtime models and the explanatory figures (seconds; nothing is timed)",
    )
    gpu_arguments(parser)
    args = parser.parse_args(argv)
    check_gpu_arguments(parser, args)
    command = " ".join(["python -m inferlab.flash.bench", *(sys.argv[1:] if argv is None else argv)])
    if args.gpu:
        ns = args.ns or ([n for n in GPU_NS if n <= 4096] if args.quick else GPU_NS)
        values = run_gpu(
            ns,
            head_dims=args.head_dims,
            dtypes=args.dtypes,
            repeat=args.repeat or GPU_REPEAT,
            device=args.device,
            max_seconds=args.max_seconds,
            command=command,
            tokens=args.tokens or GPU_TOKENS,
            heads=args.heads or GPU_HEADS,
        )
        plot_gpu(values)
        print(
            f"forward vs SDPA (fp16, min over N >= {GOAL_MIN_N}): {values['forward_vs_sdpa_min_at_4k_plus']} "
            f"(goal {values['forward_vs_sdpa_goal']}); {values['seconds']} s"
        )
        return 0
    started = time.perf_counter()
    traffic = run_traffic()
    plot_traffic(traffic)
    plot_roofline(traffic)
    plot_tiles()
    plot_online_softmax()
    if args.traffic_only:
        return 0
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
