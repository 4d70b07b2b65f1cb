"""HBM traffic and runtime estimates for attention, in both conventions: change the numbers and rerun.

Three traffic counts (standard; tiled FlashAttention with tiles from the GPU's SRAM; the ideal
count where every input and output crosses HBM once, as the NTU lab counts) and two runtime
models (roofline: the max of compute and memory time; additive: their sum, as the NTU lab adds).
Runs anywhere (plain Python). The functions are generated from inferlab/flash/traffic.py.
"""

import math
from dataclasses import dataclass

# >>> generated from inferlab/flash/traffic.py:calculator (python -m inferlab.snippetsync)
METHODS = ("standard", "flash", "flash_ideal")
RUNTIME_MODELS = ("roofline", "additive")


@dataclass(frozen=True)
class GPUSpec:
    """Peak numbers of one GPU, from its vendor data sheet."""

    name: str
    fp32_tflops: float  # dense FP32 on CUDA cores
    fp16_tflops: float  # dense FP16/BF16 on Tensor Cores (data sheets also quote 2x "with sparsity")
    bandwidth_gbs: float  # main-memory (HBM or GDDR) bandwidth in GB/s (1 GB = 1e9 bytes)
    sram_kib_per_sm: int  # shared memory (the SRAM a kernel tiles into) per streaming multiprocessor
    source: str


GPU_PRESETS = {
    # NVIDIA T4 data sheet (2019): 8.1 TFLOPS FP32, 65 TFLOPS FP16 Tensor Core, 320 GB/s GDDR6.
    # Turing tuning guide: up to 64 KB shared memory per SM. These are the numbers the NTU lab uses.
    "T4": GPUSpec("T4", 8.1, 65.0, 320.0, 64, "NVIDIA T4 Tensor Core GPU data sheet (2019); Turing Tuning Guide"),
    # NVIDIA A100 data sheet (2021), SXM 80 GB: 19.5 TFLOPS FP32, 312 TFLOPS FP16/BF16 Tensor Core
    # (dense), 2,039 GB/s HBM2e. A100 Tuning Guide: up to 164 KB shared memory per SM.
    "A100": GPUSpec(
        "A100", 19.5, 312.0, 2039.0, 164, "NVIDIA A100 Tensor Core GPU data sheet (2021, SXM 80GB); Ampere Tuning Guide"
    ),
    # NVIDIA H100 data sheet (2023), SXM: 67 TFLOPS FP32, 989 TFLOPS FP16/BF16 Tensor Core (dense;
    # 1,979 with sparsity), 3.35 TB/s HBM3. Hopper Tuning Guide: up to 228 KB shared memory per SM.
    "H100": GPUSpec(
        "H100", 67.0, 989.0, 3350.0, 228, "NVIDIA H100 Tensor Core GPU data sheet (2023, SXM5); Hopper Tuning Guide"
    ),
    # NVIDIA H200 data sheet (2024), SXM: same compute as H100 SXM, 4.8 TB/s HBM3e, 141 GB.
    "H200": GPUSpec(
        "H200", 67.0, 989.0, 4800.0, 228, "NVIDIA H200 Tensor Core GPU data sheet (2024, SXM); Hopper Tuning Guide"
    ),
}


MAX_QUERY_TILES = 1_000_000  # the causal count loops over query tiles: more would take seconds


def _check_positive_int(value, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


def _is_finite_number(value) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return isinstance(value, int) or math.isfinite(value)  # an int is finite, however large


def blocks_from_sram(sram_bytes: int, d: int, element_bytes: int = 4) -> tuple[int, int]:
    """Return (block_q, block_k) from an SRAM size as Dao et al. (2022), Algorithm 1 picks them.

    With M elements of SRAM: block_k = ceil(M / 4d) and block_q = min(ceil(M / 4d), d), so that the
    Q, K, V and O tiles fit together.
    """
    _check_positive_int(sram_bytes, "sram_bytes")
    _check_positive_int(d, "d")
    _check_positive_int(element_bytes, "element_bytes")
    sram_elements = sram_bytes // element_bytes
    if sram_elements < 4 * d:
        raise ValueError(
            f"sram_bytes={sram_bytes} holds {sram_elements} elements of {element_bytes} bytes, "
            f"fewer than 4d = {4 * d}: not even one row each of Q, K, V and O fits"
        )
    block_k = math.ceil(sram_elements / (4 * d))
    return min(block_k, d), block_k


def hbm_traffic(
    N: int,
    d: int,
    method: str,
    sram_bytes: int | None = None,
    block_q: int | None = None,
    block_k: int | None = None,
    causal: bool = False,
    element_bytes: int = 4,
) -> dict[str, int]:
    """Return the elements one attention head reads from and writes to HBM: reads, writes, total."""
    _check_positive_int(N, "N")
    _check_positive_int(d, "d")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if not isinstance(causal, bool):
        raise ValueError(f"causal must be True or False, got {causal!r}")
    if method in ("standard", "flash_ideal"):
        if sram_bytes is not None or block_q is not None or block_k is not None:
            raise ValueError(f"{method} has no tiles: leave sram_bytes, block_q and block_k as None")
    if method == "standard":
        reads = 3 * N * d + 2 * N * N  # Q, K, V, and S and P read back
        writes = 2 * N * N + N * d  # S, P, and the output O
        return {"reads": reads, "writes": writes, "total": reads + writes}
    if method == "flash_ideal":
        reads = 4 * N * d + 2 * N  # Q, K, V and O once each; the row statistics l and m once
        writes = N * d + 2 * N  # O, l and m once
        return {"reads": reads, "writes": writes, "total": reads + writes}

    if sram_bytes is not None:
        if block_q is not None or block_k is not None:
            raise ValueError("give either sram_bytes or block_q/block_k, not both")
        block_q, block_k = blocks_from_sram(sram_bytes, d, element_bytes)
    block_q = 64 if block_q is None else block_q
    block_k = 64 if block_k is None else block_k
    _check_positive_int(block_q, "block_q")
    _check_positive_int(block_k, "block_k")
    query_tiles = -(-N // block_q)
    writes = N * d + N  # O, and the log-sum-exp L kept for the backward pass
    if not causal:  # every query tile streams all N keys and values past itself
        reads = N * d + query_tiles * 2 * N * d
        return {"reads": reads, "writes": writes, "total": reads + writes}
    if query_tiles > MAX_QUERY_TILES:  # the causal count below visits the tiles one by one
        raise ValueError(
            f"block_q={block_q} cuts N={N} into {query_tiles} query tiles, over the {MAX_QUERY_TILES} "
            "this count visits one by one; use a larger block_q (or sram_bytes)"
        )

    reads = N * d  # every query tile is loaded once
    for q_start in range(0, N, block_q):
        q_end = min(q_start + block_q, N)
        # Key tiles this query tile visits: those that reach the diagonal (the rest are all masked).
        keys_loaded = min(N, -(-q_end // block_k) * block_k)
        reads += 2 * keys_loaded * d  # one K tile and one V tile per visit
    return {"reads": reads, "writes": writes, "total": reads + writes}




def attention_flops(N: int, d: int, causal: bool = False, backward: bool = False) -> float:
    """Return the matmul FLOPs of one head: 4 N^2 d forward (QK^T and PV), 2.5x that backward, halved if causal.

    This is the convention of Dao (2023), Section 4.1, used to report TFLOP/s.
    """
    _check_positive_int(N, "N")
    _check_positive_int(d, "d")
    for name, value in (("causal", causal), ("backward", backward)):
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be True or False, got {value!r}")
    flops = 4.0 * N * N * d
    if backward:
        flops *= 2.5  # five matmuls instead of two
    return flops / 2 if causal else flops


def estimate_runtime(
    flops: float, bytes_moved: float, gpu: str | GPUSpec, precision: str = "fp32", runtime_model: str = "roofline"
) -> dict:
    """Return compute time, memory time, the runtime estimate (their max, or their sum), and which term is larger.

    precision "fp16" means the 16-bit Tensor Core peak (fp16, and bf16 on GPUs that have it).
    """
    spec = GPU_PRESETS.get(gpu) if isinstance(gpu, str) else gpu
    peaks = (spec.fp32_tflops, spec.fp16_tflops, spec.bandwidth_gbs) if isinstance(spec, GPUSpec) else ()
    if not peaks or not all(_is_finite_number(x) and x > 0 for x in peaks):
        raise ValueError(f"gpu must be one of {sorted(GPU_PRESETS)} or a GPUSpec with peaks > 0, got {gpu!r}")
    if precision not in ("fp32", "fp16"):
        raise ValueError(f"precision must be 'fp32' or 'fp16', got {precision!r}")
    if runtime_model not in RUNTIME_MODELS:
        raise ValueError(f"runtime_model must be one of {RUNTIME_MODELS}, got {runtime_model!r}")
    for name, value in (("flops", flops), ("bytes_moved", bytes_moved)):
        if not _is_finite_number(value) or value < 0:  # NaN would give NaN times, not an estimate
            raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    peak_flops = (spec.fp32_tflops if precision == "fp32" else spec.fp16_tflops) * 1e12
    bandwidth = spec.bandwidth_gbs * 1e9
    compute_s = flops / peak_flops
    memory_s = bytes_moved / bandwidth
    return {
        "compute_s": compute_s,
        "memory_s": memory_s,
        # roofline: arithmetic and memory traffic overlap perfectly; additive: not at all.
        "runtime_s": max(compute_s, memory_s) if runtime_model == "roofline" else compute_s + memory_s,
        "bound": "compute" if compute_s >= memory_s else "memory",
        "arithmetic_intensity": flops / bytes_moved if bytes_moved else math.inf,
        "ridge_point": peak_flops / bandwidth,  # FLOPs per byte where the two roofs meet
    }


# <<< generated

# --8<-- [start:use]
N, d = 6144, 64  # sequence length and head dim: try your own
GPU = "T4"  # or "A100", "H100", "H200"
PRECISION, ELEMENT_BYTES = "fp32", 4  # or "fp16", 2: the 16-bit Tensor Core peak, half the bytes

flops = attention_flops(N, d)
sram = GPU_PRESETS[GPU].sram_kib_per_sm * 1024
counts = {
    "standard": hbm_traffic(N, d, "standard"),
    "flash, tiled": hbm_traffic(N, d, "flash", sram_bytes=sram, element_bytes=ELEMENT_BYTES),
    "flash, ideal": hbm_traffic(N, d, "flash_ideal"),
}
print(f"{'':>12}  {'elements':>10}  {'FLOP/byte':>9}  {'max (ms)':>9}  {'sum (ms)':>9}  bound")
for name, traffic in counts.items():
    moved = ELEMENT_BYTES * traffic["total"]
    overlapped = estimate_runtime(flops, moved, GPU, PRECISION, runtime_model="roofline")
    additive = estimate_runtime(flops, moved, GPU, PRECISION, runtime_model="additive")
    print(
        f"{name:>12}  {traffic['total'] / 1e6:8.2f} M  {overlapped['arithmetic_intensity']:9.1f}  "
        f"{overlapped['runtime_s'] * 1e3:9.3f}  {additive['runtime_s'] * 1e3:9.3f}  {overlapped['bound']}"
    )
print(f"ridge point of {GPU} at {PRECISION}: {overlapped['ridge_point']:.1f} FLOP/byte")
# --8<-- [end:use]
