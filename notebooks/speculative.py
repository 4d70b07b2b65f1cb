# %% [markdown]
# # Lab: speculative decoding
#
# A hand-written speculative sampler (Leviathan et al., 2023; Chen et al., 2023) on a target and
# draft pair: with temperature 0 it must reproduce the target's own greedy output exactly, and
# with sampling it reports the acceptance rate $\alpha$ and how many target calls it needed. The
# guides are in the [Speculative decoding](../../courses/ntu-ml-hw3/) part of the site; the course
# map lists them.

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
# ## Draft, verify, accept
#
# The draft proposes `gamma` tokens; one target forward pass scores them all; each draft token is
# kept with probability $\min(1, p/q)$, and the first rejected one is replaced by a sample from
# the residual distribution. The sampler's code is generated from the site's tested package.

# %%
# --8<-- "speculative/manual_sampler.py"

# %% [markdown]
# ## Try it yourself
#
# - In `main()`, change `gamma` (1, 2, 4, 8) and rerun: how do the number of target calls and
#   $\alpha$ move? Compare with the expected number of tokens per target call that the guide
#   derives from $\alpha$ and $\gamma$.
# - Use the target as its own draft (set `INFERLAB_DRAFT` to the target). What acceptance rate
#   should the formula $\min(1, p/q)$ give, and what does the cell print?
# - Change the temperature of the sampled run. Does the greedy check still hold, and why is it
#   run at temperature 0 only?
# - The sampled run prints accepted / drafted, which falls as `gamma` grows even when the pair does
#   not change. Print `sample.alpha_per_token` too: it counts only the drafts the target checked,
#   and estimates the per-token $\alpha$ of the formulas (the model card measures the same
#   quantity under greedy verification).
