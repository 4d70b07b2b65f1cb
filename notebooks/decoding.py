# %% [markdown]
# # Lab: decoding
#
# Four experiments on how a language model turns next-token probabilities into text: greedy
# decoding against the most probable sequence (MAP) on a small table model, the dynamic program
# (Viterbi) that finds the MAP sequence of a first-order model, with a checker for your own count
# of its cost at any order k, the perplexity of a line of code, and temperature, top-k and top-p on
# a real model. Each code cell is one of the site's snippets, run as it is.
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
# ## Greedy is not MAP
#
# The guides' first-order model over three tokens X, Y and Z, written as two tables. The cell lists
# the probability of all nine two-token sequences, the one greedy decoding builds and the most
# probable one (Stahlberg and Byrne, 2019, show how far apart the two can be in a translation
# model).

# %%
# --8<-- "decoding/greedy_vs_map.py"

# %% [markdown]
# ## MAP by dynamic programming
#
# For a model whose next token depends only on the last token, the Viterbi algorithm (1967) finds
# the most probable sequence without listing all $V^T$ of them. The cell prints its trellis on
# the same model and checks the answer against brute force.

# %%
# --8<-- "decoding/viterbi.py"

# %% [markdown]
# For a model of order k the state is the last k tokens. How many (state, next token) pairs does
# the dynamic program score over T steps? Write your answer into `my_states` and `my_operations`
# at the top of the next cell and run it: it counts the pairs without any formula and says whether
# yours matches.

# %%
# --8<-- "decoding/dp_count_check.py"

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
# - In the first cell, change `START` so that greedy decoding and MAP agree. How much probability
#   must move from X to Y? Rerun the cell to check.
# - In the Viterbi cell, set `LENGTH = 6` and rerun: which row of the trellis first shows the
#   winner, and does the winner ever change after that?
# - In the counting cell, fill in your formulas until it says "exact".
# - In the perplexity cell, replace `text` with a sentence in plain English, then with random
#   characters. Which has the higher perplexity under the model, and why?
# - In the last cell, change `top_p_filter(z, 0.9)` to 0.5 and 0.99. How do the number of kept
#   tokens and distinct-2 move?
