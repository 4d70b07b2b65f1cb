"""Count the key projections W_K h_t that generation computes, with and without a KV cache.

A forward hook on every layer's k_proj counts the tokens it projects. Fill in your own closed
forms in my_naive_keys / my_cached_keys and the script checks them on a grid of T and k.
Runs in Colab as it is; offline here with INFERLAB_TARGET pointing at a local model.
"""

import inspect
import os

import torch
from transformers import AutoModelForCausalLM

TARGET = os.environ.get("INFERLAB_TARGET", "Qwen/Qwen2.5-1.5B-Instruct")
FAST = os.environ.get("INFERLAB_FAST") == "1"


def my_naive_keys(T, k):
    """Your closed form: keys one layer computes for k new tokens after a T-token prompt, no cache."""
    return None  # replace with an expression in T and k


def my_cached_keys(T, k):
    """Your closed form for the same count with a KV cache."""
    return None


# --8<-- [start:hooks]
model = AutoModelForCausalLM.from_pretrained(TARGET, dtype=torch.float32).eval()
key_projections = [m for name, m in model.named_modules() if name.endswith("k_proj")]
counter = {"keys": 0}


def count_keys(module, inputs, output):
    hidden = inputs[0]  # (batch, tokens this call, hidden): one key per token
    counter["keys"] += hidden.shape[0] * hidden.shape[1]


key_projections[0].register_forward_hook(count_keys)  # one layer; every layer does the same work
# transformers 5 renamed the argument that takes the cache; older versions (Colab) call it past_key_values.
CACHE_ARG = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def cache_of(out):
    """Return the cache a forward pass handed back (renamed like the argument in transformers 5)."""
    return getattr(out, CACHE_ARG)
# --8<-- [end:hooks]


# --8<-- [start:loops]
@torch.no_grad()
def naive(ids, k):
    """Greedy generation that re-runs the whole sequence at every step."""
    for _ in range(k):
        next_token = model(ids, use_cache=False).logits[:, -1].argmax(-1, keepdim=True)
        ids = torch.cat([ids, next_token], dim=1)
    return ids


@torch.no_grad()
def cached(ids, k):
    """Greedy generation that runs the prompt once, then only the newest token, reusing the cache."""
    if k == 0:
        return ids
    out = model(ids, use_cache=True)
    tokens = [out.logits[:, -1].argmax(-1, keepdim=True)]
    for _ in range(k - 1):
        out = model(tokens[-1], use_cache=True, **{CACHE_ARG: cache_of(out)})
        tokens.append(out.logits[:, -1].argmax(-1, keepdim=True))
    return torch.cat([ids, *tokens], dim=1)


def keys_counted(loop, ids, k):
    counter["keys"] = 0
    tokens = loop(ids, k)
    return tokens, counter["keys"]
# --8<-- [end:loops]


# --8<-- [start:grid]
print(f"{'T':>3} {'k':>3} {'naive keys':>10} {'cached keys':>11}  same tokens  your formulas")
for T in (1, 4) if FAST else (1, 4, 16):
    for k in (0, 1, 3) if FAST else (0, 1, 2, 5, 10):
        ids = torch.randint(1, model.config.vocab_size, (1, T), generator=torch.Generator().manual_seed(T))
        naive_tokens, naive_count = keys_counted(naive, ids, k)
        cached_tokens, cached_count = keys_counted(cached, ids, k)
        guesses = (my_naive_keys(T, k), my_cached_keys(T, k))
        verdict = "not filled in" if None in guesses else (
            "correct" if guesses == (naive_count, cached_count) else f"wrong: you said {guesses}")
        same = torch.equal(naive_tokens, cached_tokens)
        print(f"{T:>3} {k:>3} {naive_count:>10} {cached_count:>11}  {str(same):>11}  {verdict}")
# --8<-- [end:grid]
