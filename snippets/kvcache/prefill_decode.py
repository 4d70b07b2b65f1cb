"""Prefill vs decode: time the first forward over a T-token prompt, then one-token decode steps.

Also times "training-style" teacher forcing (one forward over L tokens) against generating the
same L tokens one at a time. Runs in Colab as it is (set INFERLAB_TARGET to change the model).
"""

import inspect
import os
import time

import torch
from transformers import AutoModelForCausalLM

TARGET = os.environ.get("INFERLAB_TARGET", "Qwen/Qwen2.5-1.5B-Instruct")
FAST = os.environ.get("INFERLAB_FAST") == "1"
device = "cuda" if torch.cuda.is_available() else "cpu"
model = AutoModelForCausalLM.from_pretrained(TARGET, dtype=torch.float32).to(device).eval()
CACHE_ARG = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def cache_of(out):
    """Return the cache a forward pass handed back (renamed like the argument in transformers 5)."""
    return getattr(out, CACHE_ARG)


def seconds(fn):
    if device == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    result = fn()
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start, result


def random_ids(length):
    return torch.randint(1, model.config.vocab_size, (1, length), device=device)


# --8<-- [start:prefill_decode]
@torch.no_grad()
def prefill_then_decode(T, steps):
    """Return (prefill seconds, mean seconds per decode step) after a T-token prompt."""
    prefill_s, out = seconds(lambda: model(random_ids(T), use_cache=True))
    token = out.logits[:, -1:].argmax(-1)
    start = time.perf_counter()
    for _ in range(steps):
        out = model(token, use_cache=True, **{CACHE_ARG: cache_of(out)})
        token = out.logits[:, -1:].argmax(-1)
    if device == "cuda":
        torch.cuda.synchronize()
    return prefill_s, (time.perf_counter() - start) / steps


prefill_then_decode(8, 2)  # warm-up: the first call pays one-time costs
for T in (8, 64) if FAST else (16, 64, 256, 1024):
    prefill_s, decode_s = prefill_then_decode(T, 2 if FAST else 16)
    print(f"T={T:5d}: prefill {1e3 * prefill_s:8.1f} ms ({T / prefill_s:8.0f} tokens/s), "
          f"decode {1e3 * decode_s:6.1f} ms per token ({1 / decode_s:6.0f} tokens/s)")
# --8<-- [end:prefill_decode]


# --8<-- [start:parallel_vs_sequential]
@torch.no_grad()
def teacher_forced(ids):
    return model(ids).logits  # L next-token predictions, all in one pass


@torch.no_grad()
def sequential(ids):
    out = model(ids[:, :1], use_cache=True)
    token = out.logits[:, -1:].argmax(-1)
    for _ in range(ids.shape[1] - 1):  # each step needs the token the previous step chose
        out = model(token, use_cache=True, **{CACHE_ARG: cache_of(out)})
        token = out.logits[:, -1:].argmax(-1)


L = 12 if FAST else 256
ids = random_ids(L)
parallel_s, _ = seconds(lambda: teacher_forced(ids))
sequential_s, _ = seconds(lambda: sequential(ids))
print(f"L={L}: one teacher-forced pass {1e3 * parallel_s:.1f} ms, {L} sequential steps "
      f"{1e3 * sequential_s:.1f} ms ({sequential_s / parallel_s:.1f}x slower)")
# --8<-- [end:parallel_vs_sequential]
