# %% [markdown]
# # 實作：KV 快取
#
# 三個實驗，看 KV 快取為什麼讓生成變快、又要付出什麼代價：計算模型在有快取與沒有快取時各算了多少次鍵投影（並檢查你自己的公式）、量測預填與解碼階段每一步的時間，以及估算真實模型的快取大小。對應的導讀：[為什麼生成是循序的](../../kvcache/why-sequential/)、[KV 快取原理](../../kvcache/kv-cache/)、[預填與解碼階段](../../kvcache/prefill-decode/) 與 [快取有多大](../../kvcache/cache-size/)。

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

# %% [markdown]
# ## 模型組
#
# 下面每一格都從 `INFERLAB_TARGET` 與 `INFERLAB_DRAFT` 讀取模型。`SITE_PAIR = True` 時，它們指向本站自己的小型模型組：在 Colab 上，這一格會安裝帶有這組模型的本站套件 `inferlab`，並把模型組連結到這裡的 `inferlab-pair/`。之後每一格在免費的 CPU 執行環境上只要幾秒，印出的內容也和本站顯示的一樣（本站執行時設定了 `INFERLAB_FAST=1`，迴圈較短）。`SITE_PAIR = False` 時，它們指向 Hugging Face 上的一組 Qwen2.5 模型；任何共用同一個分詞器的目標模型與草稿模型都可以，本機資料夾也可以。已經設定的環境變數優先：執行這一格之後若要換模型組，請直接指定 `os.environ[...]`。

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
# ## 計算鍵的數量
#
# 在第一層的鍵投影上掛一個前向 hook，計算模型以貪婪解碼生成時投影了多少個詞元：一次在每一步重新執行整個序列，一次使用快取；兩者都用兩種方式各跑一次：選出最後一個新詞元就停下，或是把那個詞元也送回模型（就像把快取留給下一輪的伺服器）。在 `my_naive_keys` 與 `my_cached_keys`（在這一格的開頭）寫下你自己的封閉形式再執行：最後幾行會告訴你每個公式遵循哪一種慣例，或是在哪裡兩種都不符合。

# %%
# --8<-- "kvcache/key_counts.py"

# %% [markdown]
# ## 預填與解碼階段
#
# 第一次前向傳播一口氣讀完整個提示（預填）；之後每一步只讀一個新詞元與快取（解碼階段）。這一格在這台機器上量測兩者的時間，再比較對 L 個詞元做一次教師強制的前向傳播，與一個一個生成同樣 L 個詞元。

# %%
# --8<-- "kvcache/prefill_decode.py"

# %% [markdown]
# ## 快取有多大
#
# 每一層、每一個鍵／值頭、每一個詞元各存兩個向量（一個鍵、一個值）。這個計算器從模型的 config 讀出這些數字，並顯示分組查詢注意力（Ainslie et al., 2023）如何縮小快取。

# %%
# --8<-- "kvcache/cache_calculator.py"

# %% [markdown]
# ## 自己試試看
#
# - 在第一個實驗的格子裡填好 `my_naive_keys` 與 `my_cached_keys`，直到兩者都顯示 "correct"。你的無快取公式中，哪一項來自提示、哪一項來自生成？接著寫出另一種慣例下的公式。
# - 在預填那一格：解碼階段每一步的時間如何隨提示長度 `T` 改變？預填每秒處理的詞元數與解碼階段相比如何？為什麼？
# - 在計算器那一格修改 `TOKENS` 與 `FREE_GIB`：上下文長到多少時，Llama-3.2-3B 的一個序列就放不進 16 GiB？用 `kv_cache_bytes` 檢查。
