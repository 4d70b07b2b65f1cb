"""What cpu_offload_gb costs: the memory-bound cost model of decoding with offloaded weights.

Plain Python plus matplotlib. Change the model size or the GPU and rerun. The functions are
generated from inferlab/paged/offload.py.
"""

import os
from dataclasses import dataclass

import matplotlib.pyplot as plt

# >>> generated from inferlab/paged/offload.py:presets (python -m inferlab.snippetsync)
GB = 1e9  # bandwidths are quoted in decimal GB/s (vLLM's cpu_offload_gb itself counts GiB)
BYTES_PER_WEIGHT = 2  # fp16 or bf16 weights


@dataclass(frozen=True)
class OffloadSpec:
    """A GPU and its link to host memory: the two bandwidths the cost model needs."""

    name: str
    memory_gb_s: float  # GPU memory bandwidth, GB/s
    link_gb_s: float  # host-to-GPU bandwidth in one direction, GB/s
    memory_gb: float  # GPU memory, GB
    source: str
    fp16_tflops: float = 0.0  # dense FP16 Tensor Core peak, TFLOP/s (0: compute is not modelled)


OFFLOAD_PRESETS = {
    # T4 data sheet: 16 GB GDDR6 at 320 GB/s; PCIe Gen3 x16 (32 GB/s both directions, so 16 one way;
    # 8 GT/s x 16 lanes x 128/130 encoding = 15.75 GB/s). Colab's free GPU. 65 TFLOP/s FP16 Tensor
    # Core, as in the FlashAttention pages' presets (a test keeps the two equal).
    "T4": OffloadSpec("T4", 320.0, 15.75, 16.0, "NVIDIA T4 data sheet (2019); PCI-SIG PCIe 3.0", 65.0),
    # H200 data sheet (SXM): 141 GB HBM3e at 4.8 TB/s; PCIe Gen5 x16 (128 GB/s both directions,
    # 32 GT/s x 16 lanes x 128/130 = 63 GB/s one way) to an x86 host.
    # 989 TFLOP/s dense FP16/BF16 Tensor Core (1,979 with sparsity).
    "H200": OffloadSpec("H200", 4800.0, 63.0, 141.0, "NVIDIA H200 data sheet (2024); PCI-SIG PCIe 5.0", 989.0),
}
# <<< generated

# >>> generated from inferlab/paged/offload.py:cost_model (python -m inferlab.snippetsync)
def _is_finite(value) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and -float("inf") < value < float("inf")


def _spec(gpu: str | OffloadSpec) -> OffloadSpec:
    spec = gpu if isinstance(gpu, OffloadSpec) else OFFLOAD_PRESETS.get(gpu) if isinstance(gpu, str) else None
    bandwidths = (spec.memory_gb_s, spec.link_gb_s, spec.memory_gb) if spec else ()
    if not bandwidths or not all(_is_finite(x) and x > 0 for x in bandwidths):  # a 0 bandwidth divides by zero
        raise ValueError(f"gpu must be one of {sorted(OFFLOAD_PRESETS)} or an OffloadSpec with sizes > 0, got {gpu!r}")
    return spec


def _check_bytes(weight_bytes: float, offloaded_bytes: float) -> None:
    for name, value in (("weight_bytes", weight_bytes), ("offloaded_bytes", offloaded_bytes)):
        if not _is_finite(value):  # NaN slips through every comparison below
            raise ValueError(f"{name} must be a finite number, got {value!r}")
    if weight_bytes <= 0:
        raise ValueError(f"weight_bytes must be > 0, got {weight_bytes}")
    if not 0 <= offloaded_bytes <= weight_bytes:
        raise ValueError(f"offloaded_bytes must be in 0..weight_bytes ({weight_bytes:.3g}), got {offloaded_bytes}")


def _check_batch(batch) -> None:
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be an integer >= 1, got {batch!r}")


def part_seconds(num_bytes: float, bandwidth_gb_s: float, batch: int, spec: OffloadSpec) -> float:
    """Return one part of the weights' time in a step: its read, or its arithmetic if that is longer."""
    read = num_bytes / (bandwidth_gb_s * GB)
    flops = 2 * (num_bytes / BYTES_PER_WEIGHT) * batch  # a multiply and an add per weight per sequence
    compute = flops / (spec.fp16_tflops * 1e12) if spec.fp16_tflops else 0.0
    return max(read, compute)


def step_seconds(weight_bytes: float, offloaded_bytes: float, gpu: str | OffloadSpec, batch: int = 1) -> float:
    """Return the time of one decoding step of ``batch`` sequences: streamed part + resident part."""
    _check_bytes(weight_bytes, offloaded_bytes)
    _check_batch(batch)
    spec = _spec(gpu)
    resident_bytes = weight_bytes - offloaded_bytes
    return part_seconds(offloaded_bytes, spec.link_gb_s, batch, spec) + part_seconds(
        resident_bytes, spec.memory_gb_s, batch, spec
    )


def tokens_per_second(weight_bytes: float, offloaded_bytes: float, gpu: str | OffloadSpec, batch: int = 1) -> float:
    """Return the decoding throughput bound: ``batch`` tokens per step."""
    _check_batch(batch)
    return batch / step_seconds(weight_bytes, offloaded_bytes, gpu, batch)


def slowdown(weight_bytes: float, offloaded_bytes: float, gpu: str | OffloadSpec, batch: int = 1) -> float:
    """Return how many times longer a step of ``batch`` sequences takes with the offloading than without."""
    return step_seconds(weight_bytes, offloaded_bytes, gpu, batch) / step_seconds(weight_bytes, 0, gpu, batch)


def kv_capacity_tokens(
    weight_bytes: float,
    offloaded_bytes: float,
    gpu: str | OffloadSpec,
    kv_bytes_per_token: int,
    gpu_memory_utilization: float = 0.9,
    other_bytes: float = 1.0 * GB,
) -> int:
    """Return how many tokens of KV cache fit in what the resident weights leave of the GPU budget."""
    _check_bytes(weight_bytes, offloaded_bytes)
    if not _is_finite(gpu_memory_utilization) or not 0 < gpu_memory_utilization <= 1:
        raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization!r}")
    if not _is_finite(kv_bytes_per_token) or kv_bytes_per_token < 1:
        raise ValueError(f"kv_bytes_per_token must be a finite number >= 1, got {kv_bytes_per_token!r}")
    if not _is_finite(other_bytes) or other_bytes < 0:
        raise ValueError(f"other_bytes must be a finite number >= 0, got {other_bytes!r}")
    budget = _spec(gpu).memory_gb * GB * gpu_memory_utilization
    free_for_kv = budget - (weight_bytes - offloaded_bytes) - other_bytes  # other: activations, CUDA graphs
    return max(0, int(free_for_kv // kv_bytes_per_token))


# <<< generated

WEIGHT_BYTES = 1.54e9 * 2  # Qwen2.5-1.5B-Instruct: 1.54 B parameters in fp16
KV_BYTES_PER_TOKEN = 2 * 28 * 2 * 128 * 2  # K and V x 28 layers x 2 kv heads x head_dim 128 x 2 bytes

offloaded = [0, 0.5, 1, 1.5, 2, 2.5, 3]
for gpu in OFFLOAD_PRESETS:
    print(f"{gpu}: offloaded GB -> tokens/s (batch 1), KV-cache capacity in tokens")
    for gb in offloaded:
        rate = tokens_per_second(WEIGHT_BYTES, gb * GB, gpu)
        capacity = kv_capacity_tokens(WEIGHT_BYTES, gb * GB, gpu, KV_BYTES_PER_TOKEN)
        print(f"  {gb:3.1f} GB  {rate:8.1f} tok/s  {capacity:9,d} tokens")
    plt.plot(offloaded, [tokens_per_second(WEIGHT_BYTES, gb * GB, gpu) for gb in offloaded], "o-", label=gpu)
plt.yscale("log")
plt.xlabel("weights offloaded to CPU (GB)")
plt.ylabel("decode tokens/s, batch 1")
plt.legend()
plt.savefig(os.path.join(os.environ.get("INFERLAB_OUT", "."), "offload_model.png"), dpi=100)
