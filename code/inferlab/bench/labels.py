"""The words that tables and figures show, in both languages of the site.

Result files name their columns with short keys (``naive_s``, ``ttft_ms``) and their rows with
English labels ("space before document"). A page shows neither as they are: the ``{{table}}`` hook
(``tools/mkdocs_hooks.py``) looks every column up in ``COLUMNS`` (words with units, per language)
and every label in ``CELLS``, and figures are drawn once per language with ``FIGURE_TEXT``
(``inferlab.bench.figures``). A zh-TW page that would show an English header or label fails a
test (``tests/test_labels.py``), which names the missing entry.
"""

from __future__ import annotations

import re

LANGUAGES = ("en", "zh-TW")

# Result-table column key -> (English header, zh-TW header). Units in parentheses.
COLUMNS: dict[str, tuple[str, str]] = {
    # decoding
    "t": ("t", "t"),
    "T": ("T", "T"),
    "token": ("token", "詞元"),
    "p(token ∣ prefix)": ("p(token ∣ prefix)", "p(詞元 ∣ 前文)"),
    "-log p": ("−log p", "−log p"),
    "sequence": ("sequence", "序列"),
    "p": ("p", "p"),
    "log p": ("log p", "log p"),
    "found by": ("found by", "誰找到它"),
    "X": ("X", "X"),
    "Y": ("Y", "Y"),
    "Z": ("Z", "Z"),
    "DP operations": ("DP operations", "動態規劃運算次數"),
    "brute-force operations": ("brute-force operations", "暴力枚舉運算次數"),
    "DP ms": ("DP (ms)", "動態規劃（毫秒）"),
    "brute-force ms": ("brute force (ms)", "暴力枚舉（毫秒）"),
    "setting": ("setting", "設定"),
    "kept tokens": ("tokens kept", "保留的詞元數"),
    "top-1 p": ("p of the top token", "最可能詞元的 p"),
    "entropy (nats)": ("entropy (nats)", "熵（nats）"),
    "strategy": ("strategy", "策略"),
    "distinct-1": ("distinct-1", "distinct-1"),
    "distinct-2": ("distinct-2", "distinct-2"),
    "distinct-3": ("distinct-3", "distinct-3"),
    # kvcache
    "model": ("model", "模型"),
    "layers": ("layers", "層數"),
    "kv_heads": ("KV heads", "KV 頭數"),
    "head_dim": ("head size", "每頭維度"),
    "KiB_per_token": ("cache per token (KiB)", "每個詞元的快取（KiB）"),
    "GiB_at_8192_tokens": ("cache at 8192 tokens (GiB)", "8192 個詞元的快取（GiB）"),
    "max_batch_in_16_GiB": ("sequences of 8192 tokens in 16 GiB", "16 GiB 能放幾條 8192 詞元的序列"),
    "attention": ("attention", "注意力"),
    "layer": ("layer", "層"),
    "causal_max_change": ("largest key change, causal", "鍵的最大變化（因果）"),
    "bidirectional_max_change": ("largest key change, bidirectional", "鍵的最大變化（雙向）"),
    "k": ("k", "k"),
    "naive_s": ("naive loop (s)", "無快取迴圈（秒）"),
    "cached_s": ("cached loop (s)", "有快取迴圈（秒）"),
    "time_ratio": ("time ratio", "時間比"),
    "naive_keys": ("keys, naive", "鍵的數量（無快取）"),
    "cached_keys": ("keys, cached", "鍵的數量（有快取）"),
    "key_ratio": ("key ratio", "鍵數比"),
    "prefill_ms": ("prefill (ms)", "預填（毫秒）"),
    "decode_ms_per_token": ("decode step (ms per token)", "解碼一步（毫秒／詞元）"),
    "prefill_tokens_per_s": ("prefill (tokens/s)", "預填（詞元／秒）"),
    "decode_tokens_per_s": ("decode (tokens/s)", "解碼（詞元／秒）"),
    "prefill_vs_one_decode": ("prefill ÷ one decode step", "預填 ÷ 一步解碼"),
    "loop": ("loop", "迴圈"),
    "tokens_per_s": ("tokens/s", "詞元／秒"),
    "L": ("L", "L"),
    "parallel_ms": ("one parallel pass (ms)", "一次平行前向傳播（毫秒）"),
    "sequential_ms": ("one token at a time (ms)", "一次一個詞元（毫秒）"),
    "ratio": ("ratio", "比值"),
    # flash
    "N": ("N", "N"),
    "traffic count": ("traffic count", "流量算法"),
    "elements (M)": ("elements (millions)", "元素數（百萬）"),
    "memory ms": ("memory (ms)", "記憶體（毫秒）"),
    "max(compute, memory) ms": ("max(compute, memory) (ms)", "max(計算, 記憶體)（毫秒）"),
    "compute + memory ms": ("compute + memory (ms)", "計算 + 記憶體（毫秒）"),
    "T4 standard ms": ("T4, standard (ms)", "T4，標準（毫秒）"),
    "T4 tiled ms": ("T4, tiled (ms)", "T4，分塊（毫秒）"),
    "A100 standard ms": ("A100, standard (ms)", "A100，標準（毫秒）"),
    "A100 tiled ms": ("A100, tiled (ms)", "A100，分塊（毫秒）"),
    "T4_standard_ms": ("T4, standard (ms)", "T4，標準（毫秒）"),
    "T4_flash_ms": ("T4, tiled (ms)", "T4，分塊（毫秒）"),
    "A100_standard_ms": ("A100, standard (ms)", "A100，標準（毫秒）"),
    "A100_flash_ms": ("A100, tiled (ms)", "A100，分塊（毫秒）"),
    "GPU": ("GPU", "GPU"),
    "gpu": ("GPU", "GPU"),
    "dtype": ("dtype", "資料型別"),
    "d": ("d", "d"),
    "causal": ("causal", "因果遮罩"),
    "ours_fwd_tflops": ("ours, forward (TFLOP/s)", "本站，前向（TFLOP/s）"),
    "sdpa_fwd_tflops": ("SDPA flash, forward (TFLOP/s)", "SDPA flash 後端，前向（TFLOP/s）"),
    "fwd_vs_sdpa": ("forward speed, ours ÷ SDPA", "前向速度：本站 ÷ SDPA"),
    "fwd_vs_tiled": ("forward speed, ours ÷ tiled PyTorch", "前向速度：本站 ÷ PyTorch 分塊"),
    "ours_bwd_tflops": ("ours, backward (TFLOP/s)", "本站，反向（TFLOP/s）"),
    "sdpa_bwd_tflops": ("SDPA flash, backward (TFLOP/s)", "SDPA flash 後端，反向（TFLOP/s）"),
    "bwd_vs_sdpa": ("backward speed, ours ÷ SDPA", "反向速度：本站 ÷ SDPA"),
    "precision": ("precision", "精度"),
    "peak TFLOP/s": ("peak (TFLOP/s)", "峰值（TFLOP/s）"),
    "ridge point (FLOP/byte)": ("ridge point (FLOP/byte)", "脊點（FLOP/位元組）"),
    "standard attention (FLOP/byte)": ("standard attention (FLOP/byte)", "標準注意力（FLOP/位元組）"),
    "bound": ("limited by", "受限於"),
    "standard_mib": ("standard, measured (MiB)", "標準，實測（MiB）"),
    "tiled_mib": ("tiled, measured (MiB)", "分塊，實測（MiB）"),
    "tiled_over_standard": ("tiled ÷ standard", "分塊 ÷ 標準"),
    "standard_s": ("standard (s)", "標準（秒）"),
    "tiled_s": ("tiled (s)", "分塊（秒）"),
    "standard_model_mib": ("standard, predicted (MiB)", "標準，預測（MiB）"),
    "tiled_model_mib": ("tiled, predicted (MiB)", "分塊，預測（MiB）"),
    "status": ("status", "狀態"),
    # speculative
    "target_p": ("target p", "目標模型 p"),
    "draft_q": ("draft q", "草稿模型 q"),
    "sampled": ("sampled frequency", "取樣頻率"),
    "regime": ("prompt", "提示"),
    "alpha": ("α", "α"),
    "c": ("c", "c"),
    "best_gamma_measured": ("best γ, measured", "實測最佳 γ"),
    "best_speedup_measured": ("best speed-up, measured", "實測最佳加速"),
    "predicted_at_best_gamma": ("predicted at that γ", "該 γ 的預測加速"),
    "measured_over_predicted": ("measured ÷ predicted", "實測 ÷ 預測"),
    "measured_over_predicted_whole_run": (
        "measured ÷ predicted (whole run measured)",
        "實測 ÷ 預測（整次執行實測成本）",
    ),
    "ours_over_hf_assisted_at_best_gamma": (
        "ours ÷ transformers assisted, at that γ",
        "本站 ÷ transformers 輔助生成（該 γ）",
    ),
    "best_speedup_prompt_lookup": ("best speed-up, prompt lookup", "提示查找的最佳加速"),
    "gamma": ("γ", "γ"),
    "predicted": ("predicted", "預測"),
    "predicted, verify measured": ("predicted, verify cost measured", "預測（實測驗證成本）"),
    "ours speculative": ("ours, speculative", "本站，推測解碼"),
    "transformers assisted": ("transformers, assisted", "transformers，輔助生成"),
    "ours prompt lookup": ("ours, prompt lookup", "本站，提示查找"),
    "transformers prompt lookup": ("transformers, prompt lookup", "transformers，提示查找"),
    "target verify / step": ("target verify ÷ one step", "目標模型驗證 ÷ 一步"),
    "round / step": ("a whole round ÷ one target step", "一整輪 ÷ 目標模型一步"),
    "predicted, whole run measured": ("predicted, whole run measured", "預測（整次執行皆為實測成本）"),
    "target calls, counted": ("target calls, counted", "目標模型呼叫次數（實際）"),
    "target calls, formula": ("target calls, formula's expectation", "目標模型呼叫次數（公式期望值）"),
    # The theory check over all of a regime's prompts (speculative/bench.py, pooled_theory).
    "measured": ("measured speed-up, all prompts", "實測加速（所有提示合計）"),
    "measured ÷ predicted": ("measured ÷ predicted", "實測 ÷ 預測"),
    "measured ÷ cost model": ("measured ÷ cost model (counted calls)", "實測 ÷ 成本模型（實際呼叫次數）"),
    "predicted_whole_run_at_best_gamma": (
        "predicted at that γ, whole run measured",
        "該 γ 的預測加速（整次執行實測成本）",
    ),
    "prompt_read_in_target_steps": ("reading the prompt, in target steps", "讀取提示的時間（以目標模型步數計）"),
    "shape": ("shape", "形狀"),
    "nodes_per_tree": ("nodes per tree", "每棵樹的節點數"),
    "tokens_per_target_call": ("tokens per target call", "每次目標模型呼叫的詞元數"),
    "target_calls": ("target calls", "目標模型呼叫次數"),
    "speedup": ("speed-up", "加速"),
    "spread": ("spread (slowest ÷ fastest run)", "波動（最慢 ÷ 最快）"),
    "predicted_with_verify_cost_at_best_gamma": (
        "predicted at that γ, with verify cost",
        "該 γ 的預測加速（計入驗證成本）",
    ),
    "best_speedup_transformers_pair": (
        "best speed-up, ours on transformers models",
        "最佳加速（本站，transformers 模型）",
    ),
    "ours speculative (inferlab)": ("ours, speculative (inferlab models)", "本站推測解碼（inferlab 模型）"),
    "ours speculative (transformers)": ("ours, speculative (transformers models)", "本站推測解碼（transformers 模型）"),
    "nodes": ("nodes", "節點數"),
    "tree": ("tree", "樹"),
    "tree_tokens_per_call": ("tree: tokens per target call", "樹：每次目標模型呼叫的詞元數"),
    "chain_tokens_per_call": ("chain: tokens per target call", "鏈：每次目標模型呼叫的詞元數"),
    "chain": ("chain: tokens per target call", "鏈：每次目標模型呼叫的詞元數"),
    "dynamic tree": ("dynamic tree: tokens per target call", "動態樹：每次目標模型呼叫的詞元數"),
    "dynamic / chain": ("dynamic tree ÷ chain", "動態樹 ÷ 鏈"),
    "tokens_per_target_call_long_prompt": ("tokens per target call, long prompt", "每次目標模型呼叫的詞元數（長提示）"),
    # models
    "prompt": ("prompt", "提示"),
    "kind": ("kind", "類型"),
    # paged
    "run": ("run", "執行"),
    "prompt_tokens": ("prompt tokens", "提示詞元數"),
    "first_changed_token": ("first changed token", "第一個改變的詞元"),
    "cached_tokens": ("tokens from the cache", "來自快取的詞元數"),
    "computed_tokens": ("tokens computed", "重新計算的詞元數"),
    "ttft_ms": ("TTFT (ms)", "首詞元延遲（毫秒）"),
    "offloaded_gb": ("weights offloaded (GB)", "卸載的權重（GB）"),
    "kv_capacity_tokens": ("KV cache room (tokens)", "KV 快取容量（詞元）"),
    "tokens_per_s_batch_1": ("tokens/s, batch 1", "詞元／秒，批次 1"),
    "tokens_per_s_batch_32": ("tokens/s, batch 32", "詞元／秒，批次 32"),
    "tokens_per_s_batch_256": ("tokens/s, batch 256", "詞元／秒，批次 256"),
    "slowdown_batch_1": ("slowdown, batch 1", "變慢倍數，批次 1"),
    "slowdown_batch_32": ("slowdown, batch 32", "變慢倍數，批次 32"),
    "slowdown_batch_256": ("slowdown, batch 256", "變慢倍數，批次 256"),
    "turn": ("turn", "輪次"),
    "ttft_ms_cached": ("TTFT with prefix caching (ms)", "有前綴快取的首詞元延遲（毫秒）"),
    "ttft_ms_no_cache": ("TTFT without (ms)", "沒有前綴快取的首詞元延遲（毫秒）"),
    "forward_ms": ("transformers forward, same prompt (ms)", "transformers 前向傳播，同一提示（毫秒）"),
    "ttft_vs_forward": ("TTFT ÷ forward", "首詞元延遲 ÷ 前向傳播"),
    "cached_vs_forward": ("TTFT with caching ÷ forward", "有快取的首詞元延遲 ÷ 前向傳播"),
    "requests": ("concurrent requests", "同時的請求數"),
    "engine_batched_tokens_per_s": ("MiniEngine, all together (tokens/s)", "MiniEngine，一起服務（詞元／秒）"),
    "engine_one_at_a_time_tokens_per_s": ("MiniEngine, one at a time (tokens/s)", "MiniEngine，一次一個（詞元／秒）"),
    "generate_batched_tokens_per_s": ("generate, one batch (tokens/s)", "generate，一個批次（詞元／秒）"),
    "generate_one_at_a_time_tokens_per_s": ("generate, one at a time (tokens/s)", "generate，一次一個（詞元／秒）"),
}

# Columns whose values are data a reader compares with code or output (tokens, token sequences,
# model and GPU names): shown as they are in both languages.
DATA_COLUMNS = frozenset({"token", "sequence", "X", "Y", "Z", "model", "GPU", "gpu", "attention"})

# A label inside a table (a row's name) -> (English, zh-TW). Settings written as code or formulas
# (T=0.7, top-k 20, N(4d + 4N)) need no entry: they read the same in both languages.
CELLS: dict[str, tuple[str, str]] = {
    "greedy": ("greedy", "貪婪"),
    "beam 2, MAP": ("beam 2, MAP", "束寬 2、MAP"),
    "ideal, N(5d + 4)": ("ideal, N(5d + 4)", "理想，N(5d + 4)"),
    "standard, N(4d + 4N)": ("standard, N(4d + 4N)", "標準，N(4d + 4N)"),
    "tiled, 64 x 64 tiles": ("tiled, 64 x 64 tiles", "分塊，64 x 64 的區塊"),
    "fp16, Tensor Cores": ("fp16, Tensor Cores", "fp16，Tensor Core"),
    "fp32, CUDA cores": ("fp32, CUDA cores", "fp32，CUDA 核心"),
    "compute": ("compute", "計算"),
    "memory": ("memory", "記憶體"),
    "no GPU result yet / 尚無 GPU 結果": ("no GPU result yet", "尚無 GPU 結果"),
    "generate, DynamicCache": ("generate, DynamicCache", "generate，DynamicCache"),
    "generate, StaticCache": ("generate, StaticCache", "generate，StaticCache"),
    "ours (preallocated cache)": ("ours (preallocated cache)", "本站（預先配置的快取）"),
    "long": ("long", "長"),
    "short": ("short", "短"),
    # the bundled pair's model card: what each prompt is
    "code": ("code", "程式碼"),
    "comment": ("comment", "註解"),
    "docstring": ("docstring", "說明字串"),
    "prose": ("prose", "文章"),
    "benchmark": ("benchmark", "基準測試"),
    "a queue class": ("a queue class", "一個佇列類別"),
    "a loop over files": ("a loop over files", "走訪檔案的迴圈"),
    "parse a config line": ("parse a config line", "解析一行設定"),
    "a block header": ("a block header", "區塊開頭的註解"),
    "explaining a branch": ("explaining a branch", "解釋一個分支"),
    "a function": ("a function", "一個函式"),
    "a module": ("a module", "一個模組"),
    "a changelog entry": ("a changelog entry", "一則變更紀錄"),
    "instructions": ("instructions", "操作說明"),
    "what a cache is": ("what a cache is", "快取是什麼"),
    "long regime": ("long regime", "長提示"),
    "short regime": ("short regime", "短提示"),
    "first": ("first", "第一次"),
    "identical": ("identical", "完全相同"),
    "space before document": ("space before document", "文件前加一個空格"),
    "space after document": ("space after document", "文件後加一個空格"),
    "change at the very start": ("change at the very start", "開頭就改變"),
    "yes": ("yes", "是"),
    "no": ("no", "否"),
}

# Words a zh-TW table or figure may show in Latin letters: units, symbols, acronyms in lower case,
# and terms the glossary keeps in English (top-k, softmax, ...). All-capital acronyms always pass.
KEPT_IN_LATIN = frozenset(
    {"log", "exp", "max", "min", "nats", "top", "softmax", "distinct", "fp16", "fp32", "bf16", "KiB", "MiB", "GiB"}
    | {"generate", "DynamicCache", "StaticCache", "transformers", "inferlab", "Tensor", "Core", "TFLOP", "FLOP"}
    | {"float16", "bfloat16", "float32", "flash", "Triton", "PyTorch", "MiniEngine"}
    | {"argmax"}  # a math function, like max: the zh-TW pages write it so too
)
LATIN_WORD = re.compile(r"\b[A-Za-z][A-Za-z0-9]{2,}")
# Not words to translate: math ($...$, matplotlib's log ticks), identifiers (max_len, s_j) and model
# names (Qwen2.5-1.5B-Instruct, Llama-3.2-3B), which read the same in every language.
NOT_WORDS = re.compile(r"\$[^$]*\$|\b\w*_\w*\b|\b[A-Z][A-Za-z]*-?\d[\w.]*(?:-[\w.]+)*")


def check_language(language: str) -> None:
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {LANGUAGES}, got {language!r}")


def column_label(key: str, language: str) -> str:
    """Return a column's header in a language; a key with no entry is returned as it is."""
    check_language(language)
    if key not in COLUMNS:
        return key
    return COLUMNS[key][LANGUAGES.index(language)]


def cell_label(value: str, language: str) -> str:
    """Return a table label in a language; values with no entry (data, formulas) are returned as they are."""
    return translate(value, language)


def translate(text: str, language: str) -> str:
    """Return a table label or a figure's text in a language: from CELLS, FIGURE_TEXT or a pattern."""
    check_language(language)
    if language == "en":
        return CELLS[text][0] if text in CELLS else text
    return chinese(text)


def table_problems(rows: list[dict]) -> list[str]:
    """Return what a result table would show untranslated: columns with no label, English zh-TW cells.

    The site's tables (``{{table name key}}``) are rendered from such rows; a GPU run writes new
    rows that no CPU build has shown yet, so its dry run checks them with this too.
    """
    columns = list(rows[0]) if rows and isinstance(rows[0], dict) else []
    problems = [f"add column {column!r} to COLUMNS" for column in columns if column not in COLUMNS]
    for row in rows:
        for column, value in row.items():
            if column in DATA_COLUMNS or not isinstance(value, str):
                continue
            if english_words(cell_label(value, "zh-TW")):
                problems.append(f"add label {value!r} (column {column!r}) to CELLS or PATTERNS")
    return sorted(set(problems))


def english_words(text: str) -> list[str]:
    """Return the English words in a zh-TW text that the reader would not expect there."""
    return [
        word
        for word in LATIN_WORD.findall(NOT_WORDS.sub(" ", text))
        if word not in KEPT_IN_LATIN and not (word.isupper() or word[0].isdigit() or re.fullmatch(r"[A-Z]\d+", word))
    ]


# Figure text (titles, axis labels, legend entries, word tick labels) -> its zh-TW version.
# inferlab.bench.figures.save_figure refuses a figure whose zh-TW text would still hold English.
FIGURE_TEXT: dict[str, str] = {
    # decoding
    "Measured time": "實測時間",
    "T (tokens)": "T（詞元數）",
    "brute force": "暴力枚舉",
    "milliseconds (log scale)": "毫秒（對數刻度）",
    "operations (log scale)": "運算次數（對數刻度）",
    "no filter": "不過濾",
    "temperature": "溫度",
    "probability": "機率",
    "Repetition in generated text (higher = less repetitive)": "生成文字的重複程度（越高越不重複）",
    "distinct n-grams / all n-grams": "相異的 n 元組 ÷ 全部 n 元組",
    # kvcache
    "What the cache saves": "快取省下了什麼",
    "cached (KV cache)": "有快取（KV 快取）",
    "naive (recompute)": "無快取（每步重算）",
    "key-projection ratio naive / cached": "鍵投影次數比：無快取 ÷ 有快取",
    "wall-time ratio naive / cached": "耗時比：無快取 ÷ 有快取",
    "new tokens k": "新詞元數 k",
    "ratio": "比值",
    "wall time (s)": "實際耗時（秒）",
    "Prefill vs decode": "預填與解碼",
    "decode: one token": "解碼：一個詞元",
    "prefill: all T prompt tokens": "預填：全部 T 個提示詞元",
    "prompt length T": "提示長度 T",
    "time (ms)": "時間（毫秒）",
    "KV cache per token: MHA vs GQA vs MQA": "每個詞元的 KV 快取：MHA、GQA 與 MQA",
    "KiB per token (bf16)": "每個詞元的 KiB（bf16）",
    # flash
    "standard": "標準",
    "tiled": "分塊",
    "Estimated forward time, fp16 Tensor Cores": "估計的前向傳播時間，fp16 Tensor Core",
    "Estimated forward time, fp32": "估計的前向傳播時間，fp32",
    "HBM reads + writes (elements)": "HBM 讀取 + 寫入（元素數）",
    "ideal: all once, N(5d+4)": "理想：每個元素只讀寫一次，N(5d+4)",
    "roofline estimate (ms)": "屋頂線模型估計（毫秒）",
    "sequence length N": "序列長度 N",
    "arithmetic intensity (FLOPs per byte)": "算術強度（每位元組的 FLOP 數）",
    "attainable TFLOP/s": "可達到的 TFLOP/s",
    "full softmax denominator": "完整 softmax 的分母",
    "key j": "鍵 j",
    "running sum after each tile, rescaled to the current max": "每個區塊之後的累計和，依目前的最大值重新縮放",
    "running sum l": "累計和 l",
    "score s_j": "分數 s_j",
    "scores by tile; dotted: running max m after each tile": "各區塊的分數；虛線：每個區塊之後的累計最大值 m",
    "peak extra memory (MiB)": "額外記憶體的峰值（MiB）",
    "standard (S and P in memory)": "標準（S 與 P 都放在記憶體）",
    "sdpa flash": "SDPA flash 後端",
    "tiled (PyTorch)": "分塊（PyTorch）",
    "triton (ours)": "Triton（本站）",
    "one N x N matrix per head": "每個注意力頭一個 N x N 矩陣",
    "peak extra memory of a forward (MiB)": "一次前向傳播的額外記憶體峰值（MiB）",
    "forward": "前向",
    "backward": "反向",
    "causal": "因果遮罩",
    "not causal": "無因果遮罩",
    # paged
    "KV slots (tokens)": "KV 位置（詞元）",
    "contiguous\n(reserve max_len)": "連續配置\n（預留 max_len）",
    "paged\n(blocks of 16)": "分頁\n（每區塊 16 個）",
    "reserved": "預留",
    "used by tokens": "詞元已使用",
    "physical blocks in the KV-cache pool": "KV 快取池中的實體區塊",
    "KV-cache capacity (thousand tokens)": "KV 快取容量（千個詞元）",
    "decode tokens/s, batch 1 (model)": "解碼詞元／秒，批次 1（模型估計）",
    "step time ÷ no offloading (model)": "每步時間 ÷ 不卸載時（模型估計）",
    "weights offloaded to CPU (GB)": "卸載到 CPU 的權重（GB）",
    "computed": "重新計算",
    "no prefix cache": "沒有前綴快取",
    "prefix cache": "前綴快取",
    "prompt tokens": "提示詞元數",
    "served from cache": "來自快取",
    "time to first token (ms)": "首詞元延遲（毫秒）",
    "turn": "輪次",
    "generated tokens / s": "生成詞元數／秒",
    "one at a time": "一次一個",
    "concurrent requests": "同時的請求數",
    "MiniEngine, all together": "MiniEngine，一起服務",
    "MiniEngine, one at a time": "MiniEngine，一次一個",
    "generate, one padded batch": "generate，一個批次",
    "generate, one at a time": "generate，一次一個",
    "transformers forward (same prompt)": "transformers 前向傳播（同一提示）",
    # ---- speculative and models figures (issue 16: drawn once per language) ----
    "draft q (exact)": "草稿模型 q（精確值）",
    "target p (exact)": "目標模型 p（精確值）",
    "speculative samples": "推測取樣的頻率",
    "two-token continuation": "兩個詞元的接續",
    "ours: speculative (inferlab decoder)": "本站：推測解碼（inferlab 解碼器）",
    "ours: speculative (transformers pair)": "本站：推測解碼（transformers 模型組）",
    "transformers: assistant_model": "transformers：assistant_model",
    "ours: prompt lookup": "本站：提示查找",
    "transformers: prompt_lookup_num_tokens": "transformers：prompt_lookup_num_tokens",
    "predicted, with the measured cost of verifying": "預測（計入實測的驗證成本）",
    "predicted, whole run measured (prompt, drafting, checking)": "預測（整次執行實測：提示、草擬、驗證）",
    "γ (drafted tokens per round)": "γ（每輪草稿詞元數）",
    "speed-up over the fastest plain greedy loop": "相對最快的一般貪婪迴圈的加速",
    "tokens per target call": "每次目標模型呼叫的詞元數",
    "speed-up over plain greedy": "相對一般貪婪解碼的加速",
    "tokens per target call (12 prompts pooled)": "每次目標模型呼叫的詞元數（12 個提示合計）",
    "speed-up over plain greedy\n(the long prompts together)": "相對一般貪婪解碼的加速\n（各長提示合計）",
    "target: cross-entropy": "目標模型：交叉熵",
    "draft: cross-entropy": "草稿模型：交叉熵",
    "step": "訓練步數",
    "loss (nats / token)": "損失（nats／詞元）",
    "draft = target argmax": "草稿 = 目標模型的 argmax",
    "draft-only distillation starts": "開始只蒸餾草稿模型",
    "soft-label cross-entropy (nats)": "軟標籤交叉熵（nats）",
    "draft argmax = target argmax": "草稿的 argmax = 目標模型的 argmax",
}


# Labels and figure text with numbers from a result file in them: (English pattern, zh-TW template).
# Each group is translated in turn (so "no filter (8192 kept)" becomes "不過濾（保留 8192 個）").
def compiled(pairs: list[tuple[str, str]]) -> list[tuple[re.Pattern, str]]:
    """Return (English pattern, zh-TW template) pairs with each pattern compiled (``.`` matches newlines)."""
    return [(re.compile(pattern, re.DOTALL), template) for pattern, template in pairs]


PATTERNS: list[tuple[re.Pattern, str]] = compiled(
    [
        (r"chain ([\d-]+)", "鏈 {0}"),
        (r"tree ([\d-]+)", "樹 {0}"),
        (r"dynamic (\d+)", "動態樹 {0}"),
        (r"dynamic (\d+), depth (\d+)", "動態樹 {0}，深度 {1}"),
        (r"second guesses (\d+), depth (\d+)", "第二猜測 {0}，深度 {1}"),
        (r"fixed ([\d-]+)", "固定樹 {0}"),
        (r"(code|comment|docstring|prose|benchmark): (.+)", "{0}：{1}"),
        (r"(.+) \((\d+) kept\)", "{0}（保留 {1} 個）"),
        (r"(T4|A100|H100|H200) (standard|tiled)", "{0} {1}"),
        (r"(T4|A100|H100|H200) roof, (fp16|fp32)", "{0} 屋頂，{1}"),
        (r"(T4|H200), batch (\d+)", "{0}，批次 {1}"),
        (r"(.+), (fp16|fp32|bf16)", "{0}，{1}"),
        (r"DP, order k=(\d+)", "動態規劃，k = {0} 階"),
        (r"Operations, V=(\d+)", "運算次數，V = {0}"),
        (r"The (\d+) most probable next tokens, reshaped by (.+)", "最可能的 {0} 個下一個詞元，經 {1} 重塑"),
        (r"Wall time, T = (\d+)", "實際耗時，T = {0}"),
        (r"HBM traffic, one head, d = (\d+)", "HBM 流量，單一注意力頭，d = {0}"),
        (r"Roofline, N = (\d+), d = (\d+)", "屋頂線模型，N = {0}，d = {1}"),
        (r"Attention forward on a CPU, one head, d = (\d+)", "CPU 上的注意力前向傳播，單一注意力頭，d = {0}"),
        (r"tiled, (\d+)x(\d+) tiles", "分塊，{0}x{1} 的區塊"),
        (r"tiled, SRAM (\d+) KiB \(Alg\. 1 tiles\)", "分塊，SRAM {0} KiB（演算法 1 的區塊）"),
        (
            r"causal forward, (\d+) x (\d+) tiles\nblue: loaded, orange: loaded and masked inside,\ngrey: skipped",
            "因果前向傳播，{0} x {1} 個區塊\n藍：載入；橙：載入並在區塊內遮罩；\n灰：略過",
        ),
        (r"tile (\d+)", "區塊 {0}"),
        (r"(forward|backward), (float16|bfloat16|float32), d = (\d+), (causal|not causal)", "{0}，{1}，d = {2}，{3}"),
        (r"(float16|bfloat16|float32), batch 1, (\d+) heads, d = (\d+)", "{0}，批次 1，{1} 個注意力頭，d = {2}"),
        (r"no fp16 row at N >= (\d+) in this run", "這次執行沒有 N ≥ {0} 的 fp16 列"),
        (r"([A-Z]) \((\d+) tokens\)", "{0}（{1} 個詞元）"),
        (r"(\d+) requests, max_len=(\d+)", "{0} 個請求，max_len = {1}"),
        (r"(\d+) together", "{0} 個一起"),
        (
            r"full block of (\d+) tokens, in prompt order \(green: served from the cache, red: computed\)",
            "完整區塊（每塊 {0} 個詞元），依提示順序（綠：來自快取；紅：重新計算）",
        ),
        # ---- speculative and models figures (issue 16) ----
        (r"predicted, idealised \(α = ([\d.]+), c = ([\d.]+)\)", "預測（理想化，α = {0}，c = {1}）"),
        (r"(short|long) prompt, (\d+) new tokens", "{0}提示，{1} 個新詞元"),
        (r"(.+) \((\d+) nodes\)", "{0}（{1} 個節點）"),
        (r"agreement, (\d+)-step mean", "一致率，{0} 步平均"),
        (r"(\d+)-step mean, on the target's own continuations", "{0} 步平均，在目標模型自己的接續上"),
        (r"full blocks of (\d+) tokens, in prompt order", "完整區塊（每塊 {0} 個詞元），依提示順序"),
    ]
)


# ---- diagrams: flash/paged (issue 17; inferlab.diagrams.flash and .paged, and their worked example) ----
KEPT_IN_LATIN = KEPT_IN_LATIN | {"warp", "warpgroup", "ping", "pong"}  # kept in English, as the pages do
FIGURE_TEXT.update(
    {
        # flash: tiling, the two-tile online softmax, the backward, FA2's warps, FA3's ping-pong
        "inner loop: K, V tiles": "內層迴圈：K、V 區塊",
        "outer loop: Q tiles": "外層迴圈：Q 區塊",
        "written once": "只寫入一次",
        "blue: the Q tile on chip, with its m, ℓ": "藍色：留在晶片上的 Q 區塊與它的 m、ℓ",
        "rescale": "重新縮放",
        "saved by the forward pass": "前向傳播存下的張量",
        "not saved": "不儲存",
        "backward, for each tile pair (i, j):": "反向傳播，對每一對區塊 (i, j)：",
        "recomputed from L": "由 L 重新計算",
        "once, before the loop:": "迴圈開始前先算一次：",
        "FlashAttention-1: split K, V": "FlashAttention-1：切分 K、V",
        "FlashAttention-2: split Q": "FlashAttention-2：切分 Q",
        "write": "寫出",
        "sync": "同步",
        "add": "相加",
        "no exchange:\neach warp owns\nits rows of O": "不必交換：\n每個 warp 負責\n自己那幾列 O",
        "time": "時間",
        "one warpgroup, in order": "一個 warpgroup，依序執行",
        "ping-pong: two warpgroups": "ping-pong 排程：兩個 warpgroup",
        "Tensor Cores": "Tensor Core",
        r"GEMM ($QK^{\top}$ or $PV$)": r"GEMM（$QK^{\top}$ 或 $PV$）",
        "digits: the K, V tile; time unit: one GEMM": "數字：第幾個 K、V 區塊；時間單位：一次 GEMM",
        # paged: block tables with reference counts, the hash chain
        "block table:": "區塊表：",
        "free": "空閒",
        "physical blocks": "實體區塊",
        "first request (finished, freed)": "第一個請求（已結束、已釋放）",
        "second request": "第二個請求",
        "tokens / hash (first 4 hex digits)": "詞元／雜湊（前 4 個十六進位數字）",
        "the hash they chain onto changed: miss": "但它們串接的前一個雜湊變了：未命中",
        "hit": "命中",
        "miss": "未命中",
        "partial": "未滿",
    }
)
PATTERNS += compiled(
    [
        (r"1–(\d+): order of computation", "1–{0}：計算的順序"),
        (r"warp (\d+)", "warp {0}"),
        (r"warpgroup (\d+)", "warpgroup {0}"),
        (r"Tensor Cores busy (\d+)% of the time", "Tensor Core 有 {0}% 的時間在運算"),
        (r"ref (\d+)", "參考 {0}"),
        (r"block (\d+)", "區塊 {0}"),
        (r"(hit|miss|partial): (\d+)", "{0}：{1}"),
        (r"tokens (\d+)–(\d+): the same as before, but", "詞元 {0}–{1} 和之前相同，"),
    ]
)
COLUMNS.update(
    {
        # flash_online_softmax_by_hand: one online-softmax step per tile
        "tile": ("tile", "區塊"),
        "tile_scores": ("scores s", "分數 s"),
        "running_max": ("running max m", "執行中的最大值 m"),
        "rescale": ("rescale e^(old m − new m)", "重新縮放 e^(舊 m − 新 m)"),
        "tile_sum": ("Σ e^(s − m) over the tile", "本區塊的 Σ e^(s − m)"),
        "running_sum": ("running sum ℓ", "執行中的總和 ℓ"),
    }
)


def figure_text(text: str, language: str) -> str:
    """Return a figure's text in a language; text with no entry (numbers, symbols) is returned as it is."""
    return translate(text, language)


def chinese(text: str) -> str:
    """Return the zh-TW version of a label or figure text (unchanged when no entry or pattern fits)."""
    if text in CELLS:
        return CELLS[text][1]
    if text in FIGURE_TEXT:
        return FIGURE_TEXT[text]
    for pattern, template in PATTERNS:
        match = pattern.fullmatch(text)
        if match:
            return template.format(*(chinese(group) for group in match.groups()))
    return text


# ---- diagrams: decoding/kvcache/speculative (issue 17; inferlab.diagrams and their worked examples) ----
FIGURE_TEXT.update(
    {
        # decoding: the probability tree and the trellis
        "start": "開始",
        "first token": "第一個詞元",
        "second token": "第二個詞元",
        "p(sequence)": "p(序列)",
        "greedy path": "貪婪解碼的路徑",
        "most probable sequence": "機率最高的序列",
        "state = the last token (a window of k = 1)": "狀態 = 最後一個詞元（k = 1 的視窗）",
        "a candidate, beaten": "被比下去的候選",
        "the best way into a state": "進入每個狀態的最佳路徑",
        "the most probable sequence": "機率最高的序列",
        # kvcache: masks and the growing cache
        "causal": "因果遮罩",
        "bidirectional": "雙向注意力",
        "key": "鍵",
        "query": "查詢",
        "new": "新",
        "read before the new token came": "新詞元加入前就已讀取",
        "read by the new token": "被新詞元讀取",
        "an earlier token reads the new one": "較早的詞元讀取了新詞元",
        "masked: not read": "被遮罩：不讀取",
        "prefill": "預填",
        "cached keys and values, by position": "快取中的鍵與值，依位置排列",
        "computed this step": "這一步計算的",
        "reused from the cache": "從快取重複使用的",
        "empty (preallocated)": "空位（預先配置）",
        "training:\none pass": "訓練：\n一次前向傳播",
        "generation:\none step per token": "生成：\n每個詞元一步",
        "a key the position reads (causal mask)": "該位置讀取的鍵（因果遮罩）",
        "the chosen token is the next step's input": "選出的詞元是下一步的輸入",
        # speculative: one round, and a token tree with its mask
        "draft model:\none token per call": "草稿模型：\n每次呼叫一個詞元",
        "target model:\none call": "目標模型：\n一次呼叫",
        "keep with\nmin(1, p/q)": "以 min(1, p/q)\n的機率保留",
        "output": "輸出",
        "bonus": "額外詞元",
        "time": "時間",
        r"drawn from $\mathrm{norm}(\max(0, p - q))$": r"從 $\mathrm{norm}(\max(0, p - q))$ 取樣",
        "bonus: drawn from p4 if all drafts are kept": "額外詞元：草稿全被保留時從 p4 取樣",
        "prefix": "前綴",
        "key →": "鍵 →",
        "query ↓": "查詢 ↓",
        "the shared prefix": "共用的前綴",
        "the node and its ancestors": "節點自己與它的祖先",
        "hidden: other branches": "看不到：其他分支",
    }
)
PATTERNS += compiled(
    [
        (r"decode step (\d+)", "解碼第 {0} 步"),
        (r"depth (\d+)", "深度 {0}"),
    ]
)
COLUMNS.update(
    {
        # decoding_worked_viterbi: three Viterbi steps by hand
        "x": ("x", "x"),
        "from X": ("from X", "來自 X"),
        "from Y": ("from Y", "來自 Y"),
        "from Z": ("from Z", "來自 Z"),
        "s_t(x)": ("sₜ(x) ← from", "sₜ(x) ← 來自"),
        # speculative_worked_round: one accept-or-resample step by hand
        "target p(v)": ("target p(v)", "目標 p(v)"),
        "draft q(v)": ("draft q(v)", "草稿 q(v)"),
        "min(1, p/q)": ("kept with probability min(1, p/q)", "保留的機率 min(1, p/q)"),
        "proposed and kept": ("proposed and kept", "提出且保留"),
        "thrown away": ("thrown away", "丟掉"),
        "still missing": ("still missing", "仍然缺少"),
        "comes out": ("comes out: kept + rejected × residual", "輸出：保留 + 拒絕 × 殘差"),
    }
)


# ---- diagrams: every other guide page (issue 17; the loop, the filters, weight reuse, tokens per round,
# prompt lookup, the merged tree, standard attention's passes, traffic by tensor, the Triton grid,
# one space, and the offloading step worked by hand) ----
KEPT_IN_LATIN = KEPT_IN_LATIN | {"PCIe"}  # an acronym with a small letter: the host link, as the pages write it
FIGURE_TEXT.update(
    {
        # decoding: the generation loop, and the filters on one small distribution
        "the input so far": "目前的輸入",
        "p(next token | input)": "p(下一個詞元 | 輸入)",
        "orange: the token appended": "橙色：接上的詞元",
        "as the model gives it": "模型原本的分布",
        "temperature τ = 0.5": "溫度 τ = 0.5",
        "pale: ruled out (probability 0)": "淡色：被排除（機率 0）",
        # kvcache: one weight matrix in prefill and in decode
        "prefill: the prompt in one call": "預填：整段提示一次呼叫",
        "decode: one token per call": "解碼：每次呼叫一個詞元",
        # speculative: tokens per round, prompt lookup, SpecInfer's merged tree
        "sum": "總和",
        "the target's own token: 1": "目標模型自己的詞元：1",
        r"draft $j$: counts with chance $\alpha^j$": r"第 $j$ 個草稿：以 $\alpha^j$ 的機率算數",
        "draft for the next tokens:": "接下來幾個詞元的草稿：",
        "their latest earlier occurrence": "它們在前面最近一次出現的位置",
        "what followed it: copied": "接在後面的詞元：複製過來",
        "shared by several models (numbers below)": "多個模型共用（編號見下方）",
        # flash: standard attention's passes, traffic by tensor, the Triton grid
        "read from HBM": "從 HBM 讀取",
        "on chip": "在晶片上",
        "written to HBM": "寫回 HBM",
        "hatched: rows past N, masked": "斜線：超過 N 的列，被遮罩",
        # paged: one space, tokenized
        "as written": "原本的文字",
        "one space added before line 2": "在第 2 行前面加一個空格",
        "same name": "名稱相同",
        "new name": "新的名稱",
        "not full": "未滿",
        "under each block: its name (hash)": "每個區塊下方：它的名稱（雜湊）",
    }
)
PATTERNS += compiled(
    [
        (r"call (\d+)", "第 {0} 次呼叫"),
        (r"\$W\$: (\d+) bytes, read once", "$W$：{0} 位元組，只讀一次"),
        (r"(\d+) FLOPs", "{0} 次浮點運算"),
        (r"([\d.]+) FLOPs per byte", "每位元組 {0} 次浮點運算"),
        (r"fp32 weights \((\d+) bytes each\); orange: tokens fed", "fp32 權重（每個 {0} 位元組）；橙色：輸入的詞元"),
        (r"limit 1/\(1 − α\) = ([\d.]+)", "上限 1/(1 − α) = {0}"),
        (r"the last (\d+) tokens", "最後 {0} 個詞元"),
        (r"model (\d+)", "模型 {0}"),
        (r"merged: (\d+) nodes for (\d+) proposed tokens", "合併後：{1} 個提出的詞元只需 {0} 個節點"),
        (r"N = (\d+), d = (\d+): (\d+) elements moved", "N = {0}，d = {1}：共搬運 {2} 個元素"),
        (r"N = (\d+), d = (\d+), tiles of (\d+) rows", "N = {0}，d = {1}，每個區塊 {2} 列"),
        (r"standard attention: (\d+) in all", "標準注意力：共 {0}"),
        (r"tiled forward: (\d+) in all", "分塊前向傳播：共 {0}"),
        (r"\((\d+), (\d+)\)\nrows (\d+)–(\d+)", "({0}, {1})\n第 {2}–{3} 列"),
        (r"N = (\d+), BLOCK_Q = (\d+): labels are", "N = {0}，BLOCK_Q = {1}：標籤是"),
        (r"head (\d+)", "注意力頭 {0}"),
        (r"blocks of (\d+) tokens; · a space, ↵ a newline", "每個區塊 {0} 個詞元；· 是空格，↵ 是換行"),
    ]
)
COLUMNS.update(
    {
        # paged_worked_offload: one decoding step with part of the weights offloaded, by hand
        "part": ("part of the weights", "權重的哪一部分"),
        "GB": ("size (GB)", "大小（GB）"),
        "bandwidth GB/s": ("read at (GB/s)", "讀取頻寬（GB/s）"),
        "read ms": ("read (ms)", "讀取（毫秒）"),
        "arithmetic ms": ("arithmetic (ms)", "計算（毫秒）"),
        "time ms": ("time: the longer (ms)", "時間：取較長者（毫秒）"),
    }
)
CELLS.update(
    {
        "resident on the GPU": ("resident on the GPU", "留在 GPU 上"),
        "streamed over PCIe": ("streamed over PCIe", "經 PCIe 串流傳入"),
    }
)
