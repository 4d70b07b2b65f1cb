# %% [markdown]
# # Lab: decoding
#
# Four experiments on how a language model turns next-token probabilities into text: greedy
# decoding against the most probable sequence (MAP) on a small table, the dynamic program that
# finds the MAP sequence of a k-th order model, the perplexity of a line of code, and temperature,
# top-k and top-p on a real model. Each code cell is one of the site's snippets, run as it is.
# The guides: [Autoregressive models](../../decoding/autoregressive/),
# [Greedy is not MAP](../../decoding/greedy-vs-map/),
# [MAP by dynamic programming](../../decoding/map-dp/) and
# [Sampling strategies](../../decoding/sampling/).

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
# Every cell below reads its models from `INFERLAB_TARGET` and `INFERLAB_DRAFT`. In Colab the
# defaults load a Qwen2.5 pair from Hugging Face; any target and draft that share a tokenizer work,
# and so does a local folder. The outputs shown on the site come from the site's bundled pair with
# `INFERLAB_FAST=1` (short loops). Variables already set win: to switch pairs after running this
# cell, assign `os.environ[...]` directly.

# %%
import os

os.environ.setdefault("INFERLAB_TARGET", "Qwen/Qwen2.5-1.5B-Instruct")
os.environ.setdefault("INFERLAB_DRAFT", "Qwen/Qwen2.5-0.5B-Instruct")
print("target:", os.environ["INFERLAB_TARGET"])
print("draft: ", os.environ["INFERLAB_DRAFT"])

# %% [markdown]
# ## Greedy is not MAP
#
# A three-step model over two tokens, written as tables. The cell lists the probability of all
# eight sequences, the one greedy decoding builds and the most probable one (Stahlberg and Byrne,
# 2019, show how far apart the two can be in a translation model).

# %%
# --8<-- "decoding/greedy_vs_map.py"

# %% [markdown]
# ## MAP by dynamic programming
#
# For a model whose next token depends only on the last k tokens, a dynamic program (Viterbi,
# 1967, at k = 1) finds the most probable sequence without listing all \(V^T\) of them. The cell
# checks it against brute force on a random second-order model and counts the work of both.

# %%
# --8<-- "decoding/viterbi.py"

# %% [markdown]
# ## Perplexity
#
# One forward pass over a known text (teacher forcing) gives every token's probability; the
# exponential of their mean negative log-probability is the perplexity. The cell checks its number
# against the loss transformers computes.

# %%
# --8<-- "decoding/perplexity.py"

# %% [markdown]
# ## Temperature, top-k and top-p
#
# The filters reshape one next-token distribution of the target model; then the cell generates
# with greedy decoding and with nucleus sampling (Holtzman et al., 2020) and measures how
# repetitive each text is.

# %%
# --8<-- "decoding/sampling.py"

# %% [markdown]
# ## Try it yourself
#
# - In the first cell, change the tables so that greedy decoding and MAP agree. What has to be true
#   of the first step's probabilities? Rerun the cell to check.
# - In the dynamic-program cell, raise `ORDER` to 3 and rerun: how do the operation counts grow
#   with the length, and how do they compare with brute force?
# - In the perplexity cell, replace `text` with a sentence in plain English, then with random
#   characters. Which has the higher perplexity under the model, and why?
# - In the last cell, change `top_p_filter(z, 0.9)` to 0.5 and 0.99. How do the number of kept
#   tokens and distinct-2 move?
