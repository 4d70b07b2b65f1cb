"""Weight offloading: what ``cpu_offload_gb`` buys (memory) and what it costs (time per token).

vLLM's ``cpu_offload_gb`` keeps that many gigabytes of the model's *weights* in CPU memory and
copies them to the GPU during every forward pass (vLLM engine arguments, "cpu_offload_gb": "a
virtual way to increase the GPU memory size ... requires fast CPU-GPU interconnect"). The KV cache
stays on the GPU; in fact it grows, because the weights it no longer holds leave room for blocks.

The cost model: a decoding step reads every weight once and does 2 floating-point operations per
weight per sequence in the batch. Each part of the weights takes the longer of its read and its
arithmetic (a roofline per part):

    time per step = max(offloaded bytes / host-link bandwidth, FLOPs on them / peak)
                  + max(resident bytes / GPU memory bandwidth, FLOPs on them / peak)

A batch of B requests shares each step. At small B both reads dominate, so the step time, and
with it the slowdown that offloading causes, does not depend on B. Batching divides every byte
read among more tokens, offloaded and resident alike, which leaves the ratio unchanged; only when
the resident part turns compute-bound (B in the hundreds on a T4) does the streamed part weigh
less. The model is a lower bound on time: it ignores kernel launches and any overlap of copying
with computing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

# --8<-- [start:presets]
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
# --8<-- [end:presets]


# --8<-- [start:cost_model]
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


# --8<-- [end:cost_model]


def offload_curve(
    weight_bytes: float,
    gpu: str | OffloadSpec,
    offloaded_gb: list[float],
    kv_bytes_per_token: int,
    batches: tuple[int, ...] = (1, 32),
) -> list[dict]:
    """Return one record per offloaded amount: tokens/s and slowdown per batch size, KV-cache capacity."""
    rows = []
    for gb in offloaded_gb:
        row = {"gpu": _spec(gpu).name, "offloaded_gb": gb}
        for batch in batches:
            row[f"tokens_per_s_batch_{batch}"] = tokens_per_second(weight_bytes, gb * GB, gpu, batch)
        for batch in batches:
            row[f"slowdown_batch_{batch}"] = slowdown(weight_bytes, gb * GB, gpu, batch)
        row["kv_capacity_tokens"] = kv_capacity_tokens(weight_bytes, gb * GB, gpu, kv_bytes_per_token)
        rows.append(row)
    return rows


# ----- a measurement on a real GPU: stream some layers' weights from pinned host memory --------


# --8<-- [start:streaming]
class StreamLayersFromHost:
    """Keep the weights of a decoder's first ``num_offloaded`` layers in pinned CPU memory.

    Before an offloaded layer runs, a forward pre-hook copies its weights to the GPU; after it
    runs, a hook drops them again. That is what ``cpu_offload_gb`` does, layer by layer.
    """

    def __init__(self, decoder: torch.nn.Module, num_offloaded: int) -> None:
        layers = decoder.layers
        if (
            isinstance(num_offloaded, bool)
            or not isinstance(num_offloaded, int)
            or not 0 <= num_offloaded <= len(layers)
        ):
            raise ValueError(f"num_offloaded must be an integer in 0..{len(layers)}, got {num_offloaded!r}")
        self.device = next(decoder.parameters()).device
        self.host_copies, self.hooks, self.offloaded_bytes = [], [], 0
        for layer in list(layers)[:num_offloaded]:
            params = [p for name, p in layer.named_parameters() if not name.startswith("rotary")]
            # Pinned (page-locked) host memory lets the GPU copy engine read it directly, asynchronously.
            copies = [p.detach().to("cpu") for p in params]
            if self.device.type == "cuda":
                copies = [c.pin_memory() for c in copies]
            self.offloaded_bytes += sum(c.numel() * c.element_size() for c in copies)
            for p in params:  # the GPU copy goes away: that memory is what offloading frees
                p.data = torch.empty(0, dtype=p.dtype, device=self.device)
            self.host_copies.append((params, copies))
            self.hooks.append(layer.register_forward_pre_hook(self._loader(params, copies)))
            self.hooks.append(layer.register_forward_hook(self._dropper(params)))

    def _loader(self, params, copies):
        def load(module, args):
            for p, c in zip(params, copies, strict=True):
                p.data = c.to(self.device, non_blocking=True)

        return load

    def _dropper(self, params):
        def drop(module, args, output):
            for p in params:
                p.data = torch.empty(0, dtype=p.dtype, device=self.device)

        return drop

    def restore(self) -> None:
        """Put every offloaded weight back on the GPU and remove the hooks."""
        for hook in self.hooks:
            hook.remove()
        for params, copies in self.host_copies:
            for p, c in zip(params, copies, strict=True):
                p.data = c.to(self.device)
        self.hooks, self.host_copies = [], []


# --8<-- [end:streaming]


def time_decode_step(decoder: torch.nn.Module, batch: int = 1, repeat: int = 20) -> float:
    """Return the median seconds of one forward pass over ``batch`` one-token sequences (a decode step's weight reads)."""
    for name, value in (("batch", batch), ("repeat", repeat)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    ids = torch.zeros(batch, 1, dtype=torch.long, device=next(decoder.parameters()).device)
    seconds = []
    with torch.no_grad():
        for i in range(repeat + 2):
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            start = time.perf_counter()
            decoder(ids)
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            if i >= 2:  # the first calls warm up kernels and allocators
                seconds.append(time.perf_counter() - start)
    return sorted(seconds)[len(seconds) // 2]
