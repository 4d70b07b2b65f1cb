# %% [markdown]
# # Lab: the KV cache
#
# Three experiments on why a KV cache makes generation fast and what it costs: count the key
# projections a model computes with and without a cache (and check your own formula), time prefill
# against decode steps, and size the cache of real models. The guides:
# [Why generation is sequential](../../kvcache/why-sequential/), [The KV cache](../../kvcache/kv-cache/),
# [Prefill and decode](../../kvcache/prefill-decode/) and [How big is the cache](../../kvcache/cache-size/).

# %% [markdown]
# ## Set up
#
# Colab already has everything this lab needs (torch, transformers, matplotlib). The cell installs
# only what is missing, so elsewhere it is enough to run it once.

# %%
import importlib.util

missing = [name for name in ("torch", "transformers", "matplotlib") if importlib.util.find_spec(name) is None]
if missing:
    packages = " ".join(missing)
    %pip install -q {packages}

# %% [markdown]
# ## The model pair
#
# Every cell below reads its models from `INFERLAB_TARGET` and `INFERLAB_DRAFT`. With
# `SITE_PAIR = True` they name the site's own small pair: in Colab the cell installs the site's
# `inferlab` package, which carries it, and links the pair here as `inferlab-pair/`. Every cell
# then runs in seconds on a free CPU runtime, and prints what the site shows (the site ran it with
# `INFERLAB_FAST=1`, short loops). With `SITE_PAIR = False` they name a Qwen2.5 pair on Hugging
# Face; any target and draft that share a tokenizer work, and so does a local folder. Variables
# already set win: to switch pairs after running this cell, assign `os.environ[...]` directly.

# %%
import importlib.util
import os

# True: the site's own small pair, which runs every cell in seconds on a free CPU runtime.
# False: a Qwen2.5 pair from Hugging Face (gigabytes to download; better on a GPU runtime).
SITE_PAIR = True
if SITE_PAIR and not os.path.isdir("inferlab-pair"):
    if importlib.util.find_spec("inferlab") is None:  # in Colab: the site's package carries the pair
        %pip install -q "git+https://github.com/inferlab/llm-fast-inference"
        importlib.invalidate_caches()
    package = importlib.util.find_spec("inferlab").submodule_search_locations[0]
    os.symlink(os.path.join(package, "models", "bundled"), "inferlab-pair")  # a short name, here
if SITE_PAIR:
    os.environ.setdefault("INFERLAB_TARGET", "inferlab-pair/target")
    os.environ.setdefault("INFERLAB_DRAFT", "inferlab-pair/draft")
os.environ.setdefault("INFERLAB_TARGET", "Qwen/Qwen2.5-1.5B-Instruct")
os.environ.setdefault("INFERLAB_DRAFT", "Qwen/Qwen2.5-0.5B-Instruct")
print("target:", os.environ["INFERLAB_TARGET"])
print("draft: ", os.environ["INFERLAB_DRAFT"])

# %% [markdown]
# ## Counting keys
#
# A forward hook on the first layer's key projection counts how many tokens it projects while the
# model generates greedily, once re-running the whole sequence at every step and once with a
# cache, each both ways: stopping once the last new token is chosen, or feeding that token back
# too (as a server that keeps the cache for the next turn does). Write your own closed forms in
# `my_naive_keys` and `my_cached_keys` (top of the cell) and rerun: the last lines say which
# convention each formula follows, or where it matches neither.

# %%
# --8<-- "kvcache/key_counts.py"

# %% [markdown]
# ## Prefill and decode
#
# The first forward pass reads the whole prompt at once (prefill); every later step reads one new
# token and the cache (decode). The cell times both on this machine, then compares one
# teacher-forced pass over L tokens with generating the same L tokens one by one.

# %%
# --8<-- "kvcache/prefill_decode.py"

# %% [markdown]
# ## How big is the cache
#
# Two vectors (a key and a value) per layer, per key/value head, per token. The calculator reads
# the numbers from a model's config and shows how grouped-query attention (Ainslie et al., 2023)
# shrinks the cache.

# %%
# --8<-- "kvcache/cache_calculator.py"

# %% [markdown]
# ## Try it yourself
#
# - Fill in `my_naive_keys` and `my_cached_keys` in the first cell until both say "correct".
#   Which term of your naive formula comes from the prompt, and which from generation? Then write
#   the formulas of the other convention.
# - In the prefill cell, how does the time per decode step change with the prompt length `T`?
#   How does prefill's tokens per second compare with decode's, and why?
# - In the calculator cell, change `TOKENS` and `FREE_GIB`: at what context length does one
#   sequence of Llama-3.2-3B no longer fit in 16 GiB? Check it with `kv_cache_bytes`.
