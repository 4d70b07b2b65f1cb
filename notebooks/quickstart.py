# %% [markdown]
# # Quick start: generate text token by token
#
# This notebook loads a causal language model and writes text one token at a time, the loop every
# other lab speeds up. With `SITE_PAIR = True` (the cell after the set-up) it runs the site's own
# small model, which the cell installs in Colab with the site's `inferlab` package and links here as
# `inferlab-pair/`: seconds on a free CPU runtime. With `SITE_PAIR = False` it loads a Qwen2.5
# model from Hugging Face; any causal model works, named by `INFERLAB_TARGET`.

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

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

TARGET = os.environ.get("INFERLAB_TARGET", "inferlab-pair/target" if SITE_PAIR else "Qwen/Qwen2.5-0.5B-Instruct")
tokenizer = AutoTokenizer.from_pretrained(TARGET)
model = AutoModelForCausalLM.from_pretrained(TARGET, dtype=torch.float32).eval()
print(f"{TARGET}: {sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters")

# %% [markdown]
# ## The generation loop
#
# Each step runs the model on everything so far and appends the most probable next token
# (greedy decoding). Nothing is cached: that is what the KV cache guide fixes.

# %%
prompt = "def fibonacci(n):"
ids = tokenizer(prompt, return_tensors="pt").input_ids
with torch.no_grad():
    for _ in range(24):
        next_id = model(ids).logits[:, -1].argmax(-1, keepdim=True)
        ids = torch.cat([ids, next_id], dim=1)
print(tokenizer.decode(ids[0]))

# %% [markdown]
# ## Check against Hugging Face
#
# `generate(do_sample=False)` runs the same greedy rule with a cache; the tokens must match.

# %%
reference = model.generate(
    tokenizer(prompt, return_tensors="pt").input_ids, max_new_tokens=24, do_sample=False
)
print("identical:", torch.equal(reference, ids))
