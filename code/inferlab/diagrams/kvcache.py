"""KV-cache diagrams: which keys a token reads, what the cache holds at each step, and a size by hand.

Which key a query reads is not drawn from a rule typed here: :func:`attention_pattern` asks the
package's own attention (``inferlab.kvcache.decoder.causal_attention``), with equal scores and
one-hot values, so each output row *is* that query's attention weights, and a key is read exactly
where its weight is above zero. The causal mask, its bidirectional counterpart and the cached
loop's steps all come from that one function. Lines and cells a test needs to find carry a
``gid`` (``cell:causal:4:2:read``, ``slot:2:3:new``).

``prefill_vs_decode`` draws one weight matrix used by a whole prompt in one call and by one token,
with the FLOPs counted by PyTorch's FLOP counter on the real matrix product.
"""

from __future__ import annotations

import torch

from inferlab.diagrams.style import (
    BLUE_FILL,
    FONT,
    GREY,
    INK,
    ORANGE,
    ORANGE_FILL,
    PALE,
    SMALL,
    arrow,
    box,
    new_figure,
)
from inferlab.kvcache.decoder import causal_attention
from inferlab.kvcache.size import PRESETS, bytes_per_element, kv_cache_bytes

MASK_TOKENS = 5  # the mask diagrams: four earlier tokens and a new one
PROMPT_TOKENS, DECODE_STEPS = 3, 2  # the growing cache: a 3-token prompt, then two decode steps


def attention_pattern(queries: int, keys: int, causal: bool = True) -> torch.Tensor:
    """Return a (queries, keys) bool tensor: True where inferlab's attention lets a query read a key.

    The queries are the last ``queries`` of ``keys`` positions, as in a cached decode step.
    """
    q = torch.zeros(1, 1, queries, keys)  # all scores equal: every readable key gets the same weight
    k = torch.zeros(1, 1, keys, keys)
    v = torch.eye(keys).reshape(1, 1, keys, keys)  # value j is the j-th unit vector: output row = weight row
    weights = causal_attention(q, k, v, q_start=keys - queries, causal=causal)[0, 0]
    return weights > 0


def new_reads(tokens: int, causal: bool) -> torch.Tensor:
    """Return which (earlier query, key) reads exist after the last token is appended but did not before it."""
    before = torch.zeros(tokens, tokens, dtype=torch.bool)
    before[:-1, :-1] = attention_pattern(tokens - 1, tokens - 1, causal)
    after = attention_pattern(tokens, tokens, causal)
    after[-1] = False  # the new token's own row is new either way; only the earlier rows are asked about
    return after & ~before


def mask_grid(ax, left: float, top: float, cell: float, allowed: torch.Tensor, name: str, changed=None) -> None:
    """Draw a query-by-key grid: read cells filled, masked ones pale; the last row is the new token's."""
    rows, cols = allowed.shape
    for i in range(rows):
        for j in range(cols):
            new_row = i == rows - 1
            if changed is not None and changed[i, j]:
                face, edge, kind, hatch = ORANGE_FILL, ORANGE, "changed", "//"
            elif allowed[i, j]:
                face, edge, kind, hatch = (ORANGE_FILL if new_row else BLUE_FILL), INK, "read", None
            else:
                face, edge, kind, hatch = "white", PALE, "masked", None
            x, y = left + j * cell, top - (i + 1) * cell
            patch = box(ax, x + 0.04, y + 0.04, cell - 0.08, cell - 0.08, face, edge, hatch=hatch)
            patch.set_gid(f"cell:{name}:{i + 1}:{j + 1}:{kind}")
    for j in range(cols):
        ax.text(left + (j + 0.5) * cell, top + 0.3, str(j + 1), fontsize=SMALL, ha="center", va="center")
    for i in range(rows):
        label = "new" if i == rows - 1 else str(i + 1)
        ax.text(left - 0.2, top - (i + 0.5) * cell, label, fontsize=SMALL, ha="right", va="center")


def causal_vs_bidirectional():
    """Return the causal mask beside the bidirectional one, for five tokens the last of which is new.

    Causal: the new token's row reads every cached key and its own; no earlier row reads it.
    Bidirectional: the earlier rows read the new token too (hatched): reads they did not make one
    step earlier, before the new token was appended.
    """
    causal = attention_pattern(MASK_TOKENS, MASK_TOKENS, causal=True)
    bidirectional = attention_pattern(MASK_TOKENS, MASK_TOKENS, causal=False)
    changed = {name: new_reads(MASK_TOKENS, causal=name == "causal") for name in ("causal", "bidirectional")}
    fig, ax = new_figure(5.6, 4.6, (0, 11.2), (-2.6, 6.6))
    cell = 0.9
    for left, title, allowed, name, extra in (
        (0.9, "causal", causal, "causal", changed["causal"]),
        (6.5, "bidirectional", bidirectional, "bidirectional", changed["bidirectional"]),
    ):
        ax.text(left + MASK_TOKENS * cell / 2, 6.25, title, fontsize=FONT, ha="center", va="center", weight="bold")
        mask_grid(ax, left, 5.3, cell, allowed, name, extra)
    ax.text(0.1, 5.6, "key", fontsize=SMALL, color=GREY, va="center")
    ax.text(0.1, 0.5, "query", fontsize=SMALL, color=GREY, va="center")
    legend = (
        (BLUE_FILL, INK, None, "read before the new token came"),
        (ORANGE_FILL, INK, None, "read by the new token"),
        (ORANGE_FILL, ORANGE, "//", "an earlier token reads the new one"),
        ("white", PALE, None, "masked: not read"),
    )
    for i, (face, edge, hatch, text) in enumerate(legend):
        y = -0.35 - 0.58 * i
        box(ax, 0.3, y - 0.22, 0.44, 0.44, face, edge, hatch=hatch)
        ax.text(1.0, y, text, fontsize=SMALL, va="center")
    return fig


def cache_steps(prompt: int = PROMPT_TOKENS, steps: int = DECODE_STEPS) -> list[dict]:
    """Return each call of the cached loop: the positions it computes keys for and the keys its last query reads."""
    calls, length = [], 0
    for fed in [prompt] + [1] * steps:  # prefill feeds the prompt; each decode step feeds one token
        total = length + fed
        reads = attention_pattern(fed, total)[-1]  # the last fed position: the one that predicts
        calls.append(
            {"computed": list(range(length + 1, total + 1)), "reads": [j + 1 for j in range(total) if reads[j]]}
        )
        length = total
    return calls


def kv_cache_growth():
    """Return the cache slots at prefill and at each decode step: reused, computed this step, still empty."""
    calls = cache_steps()
    slots = PROMPT_TOKENS + DECODE_STEPS
    fig, ax = new_figure(5.4, 3.7, (0, 10.8), (-2.2, 5.2))
    cell, left = 1.25, 3.6
    labels = ["prefill"] + [f"decode step {i}" for i in range(1, DECODE_STEPS + 1)]
    ax.text(
        left + slots * cell / 2, 4.75, "cached keys and values, by position", fontsize=SMALL, color=GREY, ha="center"
    )
    for row, (label, call) in enumerate(zip(labels, calls, strict=True)):
        y = 3.5 - 1.45 * row
        ax.text(left - 0.25, y, label, fontsize=FONT, ha="right", va="center")
        for j in range(1, slots + 1):
            if j in call["computed"]:
                face, edge, kind = ORANGE_FILL, INK, "new"
            elif j in call["reads"]:
                face, edge, kind = BLUE_FILL, INK, "cached"
            else:
                face, edge, kind = "white", PALE, "empty"
            x = left + (j - 1) * cell
            patch = box(ax, x + 0.06, y - 0.5, cell - 0.12, 1.0, face, edge, linestyle="--" if kind == "empty" else "-")
            patch.set_gid(f"slot:{row}:{j}:{kind}")
            ax.text(
                x + cell / 2, y, str(j), fontsize=FONT, ha="center", va="center", color=GREY if kind == "empty" else INK
            )
    legend = (
        (ORANGE_FILL, INK, "computed this step"),
        (BLUE_FILL, INK, "reused from the cache"),
        ("white", PALE, "empty (preallocated)"),
    )
    for i, (face, edge, text) in enumerate(legend):
        y = -0.55 - 0.6 * i
        box(ax, 0.3, y - 0.22, 0.5, 0.44, face, edge, linestyle="--" if face == "white" else "-")
        ax.text(1.05, y, text, fontsize=SMALL, va="center")
    return fig


def training_vs_generation():
    """Return the causal mask read two ways: all rows in one training pass, one row per generation step.

    In generation, the input of row t + 1 is the token that row t chose: the arrows are the dependency.
    """
    rows = 4
    allowed = attention_pattern(rows, rows)
    fig, ax = new_figure(5.6, 4.1, (0, 11.2), (-0.3, 7.9))
    cell = 0.7
    panels = (
        (1.0, 5.9, 0.0, "training:\none pass", "training"),
        (6.6, 5.9, 0.55, "generation:\none step per token", "generation"),
    )
    for left, top, gap, title, name in panels:
        ax.text(left + rows * cell / 2 + 0.3, 7.05, title, fontsize=FONT, ha="center", va="center", weight="bold")
        for i in range(rows):
            y = top - i * (cell + gap)
            for j in range(rows):
                kind = "read" if allowed[i, j] else "masked"
                face, edge = (BLUE_FILL, INK) if allowed[i, j] else ("white", PALE)
                patch = box(ax, left + j * cell + 0.04, y - cell + 0.04, cell - 0.08, cell - 0.08, face, edge)
                patch.set_gid(f"cell:{name}:{i + 1}:{j + 1}:{kind}")
            ax.text(left - 0.15, y - cell / 2, f"x{i + 1}", fontsize=SMALL, ha="right", va="center")
            ax.text(left + rows * cell + 0.1, y - cell / 2, f"→ x{i + 2}", fontsize=SMALL, va="center")
            if name == "generation" and i + 1 < rows:
                # The chosen token goes down through the gap between rows to the next row's input.
                out_x, in_x, gap_y = left + rows * cell + 0.75, left - 0.45, y - cell - gap / 2
                ax.plot([out_x, out_x, in_x], [y - cell + 0.05, gap_y, gap_y], color=ORANGE, linewidth=1.8)
                arrow(ax, (in_x, gap_y), (in_x, gap_y - gap / 2 + 0.02), color=ORANGE, width=1.8)
    box(ax, 0.3, 0.68, 0.44, 0.44, BLUE_FILL, INK)
    ax.text(1.0, 0.9, "a key the position reads (causal mask)", fontsize=SMALL, va="center")
    arrow(ax, (0.25, 0.2), (0.8, 0.2), color=ORANGE, width=1.8)
    ax.text(1.0, 0.2, "the chosen token is the next step's input", fontsize=SMALL, va="center")
    return fig


DIAGRAMS = {
    "kv_cache_growth": kv_cache_growth,
    "causal_vs_bidirectional": causal_vs_bidirectional,
    "training_vs_generation": training_vs_generation,
}


# ------------------------------------------------------------------ worked example: one model's cache by hand

WORKED_MODEL, WORKED_TOKENS, WORKED_BATCH, WORKED_DTYPE = "Qwen2.5-1.5B", 2048, 8, "bf16"
KIB, MIB = 2**10, 2**20


def cache_size_by_hand(
    model: str = WORKED_MODEL, tokens: int = WORKED_TOKENS, batch: int = WORKED_BATCH, dtype: str = WORKED_DTYPE
) -> dict:
    """Return the KV-cache size of one preset model worked step by step: per layer, per token, per sequence, per batch."""
    calculator_bytes = kv_cache_bytes(model, tokens, batch, dtype=dtype)  # refuses a bad argument before any work
    if not isinstance(model, str):
        raise TypeError(f"model must be a preset name in {sorted(PRESETS)}, got {type(model).__name__}")
    config = PRESETS[model]
    layers, kv_heads, head_dim = config["num_hidden_layers"], config["num_key_value_heads"], config["head_dim"]
    size = bytes_per_element(dtype)
    per_layer = 2 * kv_heads * head_dim  # one key and one value vector per key/value head
    per_token = per_layer * layers
    bytes_per_token = per_token * size
    return {
        "model": model,
        "source": config["source"],
        "layers": layers,
        "heads": config["num_attention_heads"],
        "kv_heads": kv_heads,
        "head_dim": head_dim,
        "dtype": dtype,
        "bytes_per_number": size,
        "numbers_per_token_per_layer": per_layer,
        "numbers_per_token": per_token,
        "bytes_per_token": bytes_per_token,
        "KiB_per_token": bytes_per_token / KIB,
        "tokens": tokens,
        "MiB_per_sequence": bytes_per_token * tokens / MIB,
        "batch": batch,
        "MiB_per_batch": bytes_per_token * tokens * batch / MIB,
        "calculator_bytes": calculator_bytes,  # the package's own answer, to compare with the steps
    }


WORKED = {"kvcache_worked_size": cache_size_by_hand}


# ------------------------------------------------------------------ prefill against decode: how often a weight is used

REUSE_WIDTH = 8  # a small linear layer, REUSE_WIDTH x REUSE_WIDTH weights
REUSE_PROMPT = 6  # prefill feeds the prompt's 6 tokens at once; decode feeds 1
REUSE_DTYPE = torch.float32


def weight_reuse(tokens: int, width: int = REUSE_WIDTH, dtype: torch.dtype = REUSE_DTYPE) -> dict:
    """Return one linear layer applied to ``tokens`` tokens at once: weight bytes read, FLOPs, FLOPs per byte.

    The FLOPs are counted by PyTorch's own FLOP counter on the real matrix product, not typed in.
    """
    from torch.utils.flop_counter import FlopCounterMode

    weight = torch.zeros(width, width, dtype=dtype)
    x = torch.zeros(tokens, width, dtype=dtype)
    with FlopCounterMode(display=False) as counter:
        torch.nn.functional.linear(x, weight)
    weight_bytes = weight.numel() * weight.element_size()  # each weight read from memory once per call
    flops = counter.get_total_flops()
    return {"tokens": tokens, "weight_bytes": weight_bytes, "flops": flops, "flops_per_byte": flops / weight_bytes}


def prefill_vs_decode():
    """Return one weight matrix used by a whole prompt in one call (prefill) and by one token (decode)."""
    fig, ax = new_figure(5.4, 5.0, (0, 10.8), (-0.4, 9.6))
    row, width = 0.32, 1.3  # one token's row; the matrices' width
    panels = (("prefill: the prompt in one call", REUSE_PROMPT, 8.9), ("decode: one token per call", 1, 3.9))
    for title, tokens, top in panels:
        values = weight_reuse(tokens)
        ax.text(0.2, top, title, fontsize=FONT, weight="bold", va="center")
        mid = top - 1.55  # the matrices' vertical centre
        first = mid + tokens * row / 2  # the top of the token rows
        name = "prefill" if tokens > 1 else "decode"
        for i in range(tokens):  # the input rows (one per token) and the output rows
            for left, face, side in ((0.2, ORANGE_FILL, "in"), (4.6, BLUE_FILL, "out")):
                patch = box(ax, left, first - (i + 1) * row + 0.03, width, row - 0.06, face)
                patch.set_gid(f"{side}:{name}:{i + 1}")
        side = 1.7  # the weight matrix, the same in both panels
        box(ax, 2.1, mid - side / 2, side, side, "white").set_gid(f"weights:{name}")
        ax.text(2.1 + side / 2, mid, "$W$", fontsize=FONT + 2, ha="center", va="center")
        ax.text(1.8, mid, "×", fontsize=FONT, ha="center", va="center")
        ax.text(4.2, mid, "=", fontsize=FONT, ha="center", va="center")
        ax.text(0.2 + width / 2, mid - 1.2, f"{tokens} × {REUSE_WIDTH}", fontsize=SMALL, ha="center", va="center")
        ax.text(2.1 + side / 2, mid - 1.2, f"{REUSE_WIDTH} × {REUSE_WIDTH}", fontsize=SMALL, ha="center", va="center")
        lines = (
            (f"$W$: {values['weight_bytes']} bytes, read once", f"bytes:{name}"),
            (f"{values['flops']} FLOPs", f"flops:{name}"),
            (f"{values['flops_per_byte']:g} FLOPs per byte", f"intensity:{name}"),
        )
        for i, (text, gid) in enumerate(lines):
            ax.text(6.4, mid + 0.55 - 0.6 * i, text, fontsize=SMALL, va="center", gid=gid,
                    weight="bold" if i == 2 else "normal")  # fmt: skip
    ax.text(0.2, 0.0, f"fp32 weights ({bytes_per_element(REUSE_DTYPE)} bytes each); orange: tokens fed",
            fontsize=SMALL, color=GREY, va="center")  # fmt: skip
    return fig


DIAGRAMS["prefill_vs_decode"] = prefill_vs_decode
