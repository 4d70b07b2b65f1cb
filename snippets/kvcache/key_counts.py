"""Count the key projections W_K h_t that generation computes, with and without a KV cache.

A forward hook on one layer's k_proj counts the tokens it projects. Fill in your own closed
forms in my_naive_keys / my_cached_keys and the script checks them on a grid of T and k, under
both conventions for the last token: the loop stops as soon as the k-th token is chosen (its key
is never computed), or every new token is fed back, the last one too (its key is computed, as when
the cache is kept for a next turn). It says which convention your formula follows.
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
def naive(ids, k, feed_last=False):
    """Greedy generation that re-runs the whole sequence at every step.

    feed_last=True runs the finished sequence once more, so the last token's key is computed too.
    """
    for _ in range(k):
        next_token = model(ids, use_cache=False).logits[:, -1].argmax(-1, keepdim=True)
        ids = torch.cat([ids, next_token], dim=1)
    if feed_last:
        model(ids, use_cache=False)
    return ids


@torch.no_grad()
def cached(ids, k, feed_last=False):
    """Greedy generation (k >= 1) that runs the prompt once, then only the newest token, reusing the cache.

    feed_last=True also feeds the last new token, so that every token of the result is in the cache.
    """
    out = model(ids, use_cache=True)
    tokens = [out.logits[:, -1].argmax(-1, keepdim=True)]
    for _ in range(k - 1):
        out = model(tokens[-1], use_cache=True, **{CACHE_ARG: cache_of(out)})
        tokens.append(out.logits[:, -1].argmax(-1, keepdim=True))
    if feed_last:
        model(tokens[-1], use_cache=True, **{CACHE_ARG: cache_of(out)})
    return torch.cat([ids, *tokens], dim=1)


def keys_counted(loop, ids, k, feed_last=False):
    counter["keys"] = 0
    tokens = loop(ids, k, feed_last)
    return tokens, counter["keys"]
# --8<-- [end:loops]


# --8<-- [start:grid]
CONVENTIONS = {
    "stop": "the loop stops once the k-th token is chosen: that token's key is never computed",
    "fed": "every new token is fed back, the last one too: its key is computed, ready for a next turn",
}
counts = {"naive": {"stop": {}, "fed": {}}, "cached": {"stop": {}, "fed": {}}}
print(f"{'T':>3} {'k':>3}   naive keys (stop / fed)   cached keys (stop / fed)   same tokens")
for T in (1, 4) if FAST else (1, 4, 16):
    for k in (1, 3) if FAST else (1, 2, 5, 10):
        ids = torch.randint(1, model.config.vocab_size, (1, T), generator=torch.Generator().manual_seed(T))
        outputs = []
        for name, loop in (("naive", naive), ("cached", cached)):
            for convention in CONVENTIONS:
                tokens, counts[name][convention][T, k] = keys_counted(loop, ids, k, convention == "fed")
                outputs.append(tokens)
        same = all(torch.equal(outputs[0], other) for other in outputs[1:])
        naive_pair = f"{counts['naive']['stop'][T, k]} / {counts['naive']['fed'][T, k]}"
        cached_pair = f"{counts['cached']['stop'][T, k]} / {counts['cached']['fed'][T, k]}"
        print(f"{T:>3} {k:>3}   {naive_pair:>23}   {cached_pair:>24}   {str(same):>11}")


def verdict(formula, measured):
    """Which convention a formula follows on the whole grid, or where it fails under both."""
    if formula(1, 1) is None:
        return "not filled in"
    for convention, meaning in CONVENTIONS.items():
        if all(formula(T, k) == count for (T, k), count in measured[convention].items()):
            return f"correct under the '{convention}' convention ({meaning})"
    (T, k), count = next((key, c) for key, c in measured["stop"].items() if formula(*key) != c)
    fed = measured["fed"][T, k]
    return f"matches neither convention: at T={T}, k={k} you say {formula(T, k)}, the loops count {count} or {fed}"


print("your naive formula: ", verdict(my_naive_keys, counts["naive"]))
print("your cached formula:", verdict(my_cached_keys, counts["cached"]))
# --8<-- [end:grid]
