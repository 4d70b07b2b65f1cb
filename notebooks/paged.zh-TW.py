# %% [markdown]
# # 實作：分頁服務
#
# vLLM 式服務（Kwon et al., 2023）背後的三個實驗：透過區塊表，從散落在同一個記憶體池中的區塊讀取鍵與值的注意力；為提示的每個區塊命名、供前綴快取使用的雜湊鏈（以及為什麼多一個空格就會讓它失效）；以及把權重卸載到 CPU 記憶體的成本模型。對應的導讀：[PagedAttention](../../paged/paged-attention/)、[自動前綴快取](../../paged/prefix-caching/)、[為什麼一個空格會讓快取失效](../../paged/invalidation/) 與 [權重卸載](../../paged/offloading/)。真正的 vLLM 實驗需要 GPU：見[在 Colab 上跑 vLLM 實驗](../../paged/vllm-colab/)。

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
# ## PagedAttention
#
# 三個序列把它們的鍵與值存進從一個打亂的空閒清單取出的區塊；分頁注意力透過區塊表把它們收集回來，結果必須與 PyTorch 在連續張量上的注意力一致。

# %%
# --8<-- "paged/paged_attention.py"

# %% [markdown]
# ## 雜湊鏈
#
# 每個 16 個詞元的完整區塊都有一個名字，這個名字融入了前一個區塊的名字。這一格把五個提示送給一個記得所有見過的名字的「伺服器」，並畫出哪些區塊可以從快取提供（`#`）、哪些必須計算（`.`）。這裡只載入目標模型的分詞器。

# %%
# --8<-- "paged/hash_chain.py"

# %% [markdown]
# ## 卸載的代價
#
# 使用 `cpu_offload_gb` 時，vLLM 把部分權重放在 CPU 記憶體，每一步再串流到 GPU。這一格的成本模型顯示，當更多權重移出去時，解碼速度與留給 KV 快取的空間如何變化。

# %%
# --8<-- "paged/offload_model.py"

# %% [markdown]
# ## 自己試試看
#
# - 在第一格把 `block_size` 設成 1，再設成 16。注意力仍然一致嗎？每個序列需要幾個區塊？最後一個區塊的結尾浪費了幾個位置？
# - 在雜湊鏈那一格，先預測再執行：如果共用文件中間的一個字元改變了，後面的提示還有哪些區塊可以從快取提供？
# - 在卸載那一格把 `WEIGHT_BYTES` 改成一個 fp16 的 7 B 模型。在 T4 上至少要卸載多少才放得下？這時模型預測的速度是多少？
