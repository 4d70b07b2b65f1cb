# %% [markdown]
# # 實作：解碼
#
# 四個實驗，看語言模型如何把下一個詞元的機率變成文字：在一個小表格模型上比較貪婪解碼與機率最高的序列（MAP）、用動態規劃（Viterbi）找出一階模型的 MAP 序列，並檢查你自己對任意 k 階成本的計數、計算一行程式碼的困惑度，以及在真實模型上試驗溫度、top-k 與 top-p。每一個程式碼格都是本站的一個程式片段，原封不動地執行。對應的導讀：[自迴歸模型](../../decoding/autoregressive/)、[貪婪不等於 MAP](../../decoding/greedy-vs-map/)、[以動態規劃求 MAP](../../decoding/map-dp/) 與 [取樣策略](../../decoding/sampling/)。

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
# ## 貪婪不等於 MAP
#
# 導讀中以兩張表格寫成、在三個詞元 X、Y、Z 上的一階模型。這一格列出全部九個兩詞元序列的機率、貪婪解碼建出的序列，以及機率最高的序列（Stahlberg and Byrne, 2019 顯示了兩者在翻譯模型中可以差得多遠）。

# %%
# --8<-- "decoding/greedy_vs_map.py"

# %% [markdown]
# ## 以動態規劃求 MAP
#
# 如果模型的下一個詞元只取決於前一個詞元，Viterbi 演算法（1967）不必列出全部 $V^T$ 個序列，就能找到機率最高的那一個。這一格在同一個模型上印出它的格狀表，並拿答案與暴力搜尋對照。

# %%
# --8<-- "decoding/viterbi.py"

# %% [markdown]
# 對 k 階模型來說，狀態是最後 k 個詞元。動態規劃在 T 步中總共要為多少個（狀態, 下一個詞元）組合打分數？把你的答案寫進下一格最上面的 `my_states` 與 `my_operations` 再執行：它不用任何公式數出組合數，並告訴你你的答案對不對。

# %%
# --8<-- "decoding/dp_count_check.py"

# %% [markdown]
# ## 困惑度
#
# 對一段已知文字做一次前向傳播（教師強制），就能得到每個詞元的機率；平均負對數機率的指數就是困惑度。這一格拿它與 transformers 算出的損失對照。

# %%
# --8<-- "decoding/perplexity.py"

# %% [markdown]
# ## 溫度、top-k 與 top-p
#
# 這些過濾器改變目標模型的一個下一詞元分布；接著這一格分別用貪婪解碼與核取樣（Holtzman et al., 2020）生成文字，並量測各自有多重複。

# %%
# --8<-- "decoding/sampling.py"

# %% [markdown]
# ## 自己試試看
#
# - 在第一個實驗的格子裡修改 `START`，讓貪婪解碼與 MAP 一致。要從 X 移多少機率給 Y？重新執行這一格來檢查。
# - 在 Viterbi 那一格設定 `LENGTH = 6` 再執行：格狀表從哪一列開始看得出贏家？之後贏家還會改變嗎？
# - 在計數那一格填入你的公式，直到它說 "exact"。
# - 在困惑度那一格把 `text` 換成一句普通的英文，再換成隨機字元。模型對哪一個的困惑度較高？為什麼？
# - 在最後一格把 `top_p_filter(z, 0.9)` 改成 0.5 與 0.99。保留的詞元數與 distinct-2 如何變化？
