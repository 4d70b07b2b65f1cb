# %% [markdown]
# # 快速上手：一個詞元一個詞元地生成文字
#
# 這本筆記本載入一個因果語言模型，一次寫出一個詞元，這正是其他實作要加速的迴圈。`SITE_PAIR = True`（環境設定之後那一格）時，它執行本站自己的小型模型：在 Colab 上，這一格會連同本站套件 `inferlab` 一起安裝，並把模型連結到這裡的 `inferlab-pair/`，在免費的 CPU 執行環境上只要幾秒。`SITE_PAIR = False` 時，它從 Hugging Face 載入一個 Qwen2.5 模型；任何因果語言模型都可以，由 `INFERLAB_TARGET` 指定。

# %% [markdown]
# ## 環境設定
#
# Colab 已經有這個實作需要的一切（torch、transformers、matplotlib）。這一格只安裝缺少的套件，所以在其他環境執行一次就夠了。

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
# ## 生成迴圈
#
# 每一步都讓模型讀入目前為止的全部內容，再接上機率最高的下一個詞元（貪婪解碼）。這裡沒有任何快取：那正是 KV 快取導讀要解決的問題。

# %%
prompt = "def fibonacci(n):"
ids = tokenizer(prompt, return_tensors="pt").input_ids
with torch.no_grad():
    for _ in range(24):
        next_id = model(ids).logits[:, -1].argmax(-1, keepdim=True)
        ids = torch.cat([ids, next_id], dim=1)
print(tokenizer.decode(ids[0]))

# %% [markdown]
# ## 與 Hugging Face 對照
#
# `generate(do_sample=False)` 以同樣的貪婪規則、搭配快取執行；產生的詞元必須一致。

# %%
reference = model.generate(
    tokenizer(prompt, return_tensors="pt").input_ids, max_new_tokens=24, do_sample=False
)
print("identical:", torch.equal(reference, ids))
