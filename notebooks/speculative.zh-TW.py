# %% [markdown]
# # 實作：推測解碼
#
# 在一組目標模型與草稿模型上，親手寫的推測取樣器（Leviathan et al., 2023；Chen et al., 2023）：溫度為 0 時，它必須與目標模型自己的貪婪輸出完全一致；取樣時，它回報接受率 $\alpha$ 以及需要呼叫目標模型幾次。對應的導讀在本站的[推測解碼](../../courses/ntu-ml-hw3/)部分；課程對照頁列出了它們。

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
# ## 草稿、驗證、接受
#
# 草稿模型提出 `gamma` 個詞元；目標模型一次前向傳播為它們全部打分數；每個草擬詞元以 $\min(1, p/q)$ 的機率被保留，第一個被拒絕的詞元改由殘差分布取樣取代。取樣器的程式碼由本站經過測試的套件產生。

# %%
# --8<-- "speculative/manual_sampler.py"

# %% [markdown]
# ## 自己試試看
#
# - 在 `main()` 裡修改 `gamma`（1、2、4、8）再執行：目標模型的呼叫次數與 $\alpha$ 如何變化？與導讀由 $\alpha$ 和 $\gamma$ 推導出的「每次呼叫目標模型的期望詞元數」比較。
# - 把目標模型也當成自己的草稿模型（把 `INFERLAB_DRAFT` 設成目標模型）。公式 $\min(1, p/q)$ 應該給出多少接受率？這一格印出了什麼？
# - 修改取樣那一次的溫度。貪婪檢查仍然成立嗎？為什麼它只在溫度 0 時執行？
# - 取樣那一次印出的是接受數／草擬數，即使模型組不變，它也會隨 `gamma` 增加而下降。把 `sample.alpha_per_token` 也印出來：它只計入目標模型實際檢查過的草稿，估計的是公式中每個詞元的 $\alpha$（模型卡在貪婪驗證下測量的也是同一個量）。
