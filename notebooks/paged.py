# %% [markdown]
# # Lab: paged serving
#
# Three experiments behind vLLM-style serving (Kwon et al., 2023): attention that reads keys and
# values from blocks scattered over one pool through block tables, the hash chain that names each
# block of a prompt for prefix caching (and why one extra space breaks it), and the cost model of
# offloading weights to CPU memory. The guides: [PagedAttention](../../paged/paged-attention/),
# [Automatic prefix caching](../../paged/prefix-caching/),
# [Why one space breaks the cache](../../paged/invalidation/) and
# [Offloading weights](../../paged/offloading/). The real-vLLM labs need a GPU: see
# [vLLM labs in Colab](../../paged/vllm-colab/).

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
# ## PagedAttention
#
# Three sequences store their keys and values in blocks taken from a shuffled free list; the
# paged attention gathers them through the block tables and must match PyTorch's attention on the
# contiguous tensors.

# %%
# --8<-- "paged/paged_attention.py"

# %% [markdown]
# ## The hash chain
#
# Each full block of 16 tokens gets a name that folds in the name of the block before it. The cell
# sends five prompts to a "server" that remembers every name it has seen and draws which blocks it
# could serve from the cache (`#`) and which it must compute (`.`). Only the target's tokenizer is
# loaded.

# %%
# --8<-- "paged/hash_chain.py"

# %% [markdown]
# ## What offloading costs
#
# With `cpu_offload_gb`, vLLM keeps part of the weights in CPU memory and streams them to the GPU
# at every step. The cell's cost model shows the decoding speed and the room left for the KV cache
# as more weights move out.

# %%
# --8<-- "paged/offload_model.py"

# %% [markdown]
# ## Try it yourself
#
# - In the first cell, set `block_size` to 1 and then to 16. Does attention still match? How many
#   blocks does each sequence need, and how many slots are wasted at the end of its last block?
# - In the hash-chain cell, predict before running: if one character in the middle of the shared
#   document changes, which blocks of the later prompts can still be served from the cache?
# - In the offload cell, change `WEIGHT_BYTES` to a 7 B model in fp16. On a T4, how much must be
#   offloaded to fit at all, and what speed does the model predict then?
