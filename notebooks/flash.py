# %% [markdown]
# # Lab: FlashAttention
#
# Two experiments behind FlashAttention (Dao et al., 2022): the online softmax (Milakov and
# Gimelshein, 2018) that lets attention run tile by tile, checked against PyTorch's own attention,
# and a calculator for the main-memory (HBM) traffic and a roofline runtime estimate of standard
# and tiled attention on a GPU of your choice. This lab needs no model, only torch. The guides:
# [Why attention is memory-bound](../../flash/memory-bound/),
# [Tiling and the online softmax](../../flash/tiling/) and
# [HBM traffic and runtime](../../flash/hbm-traffic/).

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
# ## The online softmax, tile by tile
#
# The cell folds the scores of one query into a running maximum, a running sum and an
# unnormalised output, three keys at a time, and compares the result with
# `torch.nn.functional.scaled_dot_product_attention`.

# %%
# --8<-- "flash/online_softmax.py"

# %% [markdown]
# ## HBM traffic and runtime
#
# The calculator counts the floating-point operations and the bytes each method moves to and from
# main memory, in three ways: standard attention, the tiled algorithm with tiles from the GPU's
# SRAM, and the ideal count in which every tensor crosses memory once (the NTU lab's convention).
# It estimates the runtime two ways: the slower of compute and memory (the roofline model,
# Williams et al., 2009) and their sum (the lab's additive model). Change `N`, `d`, `GPU` and
# `PRECISION` at the end of the cell.

# %%
# --8<-- "flash/hbm_calculator.py"

# %% [markdown]
# ## Try it yourself
#
# - In the first cell, change `BLOCK` to 1 and to `N`. Does the output change? What does the
#   running sum equal after the last tile?
# - In the calculator, double `N`: by what factor does each method's traffic grow? Then double `d`
#   instead.
# - Switch `GPU` from `"T4"` to `"H100"`. Which method is memory-bound on which GPU? Compare each
#   method's arithmetic intensity with the ridge point the cell prints. Then switch to fp16.
# - Why do the "max" and "sum" columns agree closely for the ideal count but not for standard
#   attention?
