# %% [markdown]
# # 實作：FlashAttention
#
# FlashAttention（Dao et al., 2022）背後的兩個實驗：讓注意力可以一個區塊一個區塊計算的線上 softmax（Milakov and Gimelshein, 2018），並與 PyTorch 自己的注意力對照；以及一個計算器，估算標準注意力與分塊注意力在你選的 GPU 上的主記憶體（HBM）流量，和以屋頂線模型估計的執行時間。這個實作不需要模型，只需要 torch。對應的導讀：[為什麼注意力受限於記憶體](../../flash/memory-bound/)、[分塊與線上 softmax](../../flash/tiling/) 與 [HBM 流量與執行時間](../../flash/hbm-traffic/)。

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
# ## 線上 softmax，一個區塊一個區塊
#
# 這一格把一個查詢的分數，每次三個鍵，併入執行中的最大值、執行中的總和與未正規化的輸出，再把結果與 `torch.nn.functional.scaled_dot_product_attention` 比較。

# %%
# --8<-- "flash/online_softmax.py"

# %% [markdown]
# ## HBM 流量與執行時間
#
# 這個計算器計算每種方法的浮點運算數，以及它與主記憶體之間搬移的位元組數，用三種方式計數：標準注意力、以 GPU 的 SRAM 決定區塊大小的分塊演算法，以及每個張量只經過記憶體一次的理想計數（臺大實驗的慣例）。執行時間也用兩種方式估計：計算與記憶體中較慢的一個（屋頂線模型，Williams et al., 2009），以及兩者相加（實驗的相加模型）。在這一格的結尾修改 `N`、`d`、`GPU` 與 `PRECISION`。

# %%
# --8<-- "flash/hbm_calculator.py"

# %% [markdown]
# ## 自己試試看
#
# - 在第一格把 `BLOCK` 改成 1，再改成 `N`。輸出會改變嗎？最後一個區塊之後，執行中的總和等於什麼？
# - 在計算器裡把 `N` 加倍：每種方法的流量變成幾倍？再改成把 `d` 加倍。
# - 把 `GPU` 從 `"T4"` 換成 `"H100"`。在哪一個 GPU 上，哪一種方法受限於記憶體？把每種方法的算術強度與這一格印出的脊點比較。接著改成 fp16。
# - 為什麼理想計數的「max」與「sum」兩欄幾乎相同，標準注意力卻不是？
