"""Concept diagrams of the FlashAttention pages, each drawn from the code it explains.

- ``tiling``: the grid of score tiles, numbered in the order ``flash_attention`` loads them (read
  from its own tile loads), query tiles outside, key/value tiles inside.
- ``online_softmax_by_hand``: the two-tile worked example, with the running max and sum that
  ``online_softmax_step`` returns; its numbers are also the result file
  ``flash_online_softmax_by_hand`` that the tiling page shows.
- ``backward_recompute``: what the forward saves (the tensors autograd really keeps for
  ``FlashAttention``) and what the backward recomputes from them.
- ``fa2_warp_split``: FlashAttention-1's split of K and V across four warps against
  FlashAttention-2's split of Q (Dao, 2023, Section 3.3 and Figure 3), from a small model of the
  two splits that computes attention both ways.
- ``fa3_pingpong``: FlashAttention-3's ping-pong schedule of two warpgroups (Shah et al., 2024,
  Section 3.1 and Figure 1), from a small scheduler in which the Tensor Cores run one GEMM at a time.
- ``standard_round_trips`` and ``traffic_by_tensor``: what standard attention and the tiled forward
  move between HBM and the chip, tensor by tensor, from a counter that names every tensor moved.
- ``triton_grid``: the Triton kernel's launch grid, one program per (query tile, head), and its rows.

    python -m inferlab.diagrams flash
"""

from __future__ import annotations

import math

import torch

from inferlab.diagrams import style
from inferlab.flash import FlashAttention, TrafficCounter, flash_attention, online_softmax_step

NEG_INF = float("-inf")

# ---- 1. tiling: the order in which the tiled forward visits the tiles --------------------------


class TileLoads(TrafficCounter):
    """A traffic counter that also notes which tensor, and which rows of it, every load took."""

    def __init__(self, names: dict[int, str]) -> None:
        super().__init__()
        self.names = names  # storage address -> "Q", "K" or "V"
        self.loads: list[tuple[str, int]] = []

    def read(self, tensor: torch.Tensor) -> torch.Tensor:
        name = self.names[tensor.untyped_storage().data_ptr()]
        self.loads.append((name, tensor.storage_offset() // tensor.stride(-2)))  # (tensor, first row)
        return super().read(tensor)


def tile_visits(n: int = 6, block: int = 2) -> list[tuple[int, int]]:
    """Return the (query tile, key tile) pairs in the order ``flash_attention`` computes them."""
    q, k, v = torch.zeros(n, 4), torch.zeros(n, 4), torch.zeros(n, 4)
    loads = TileLoads(
        {tensor.untyped_storage().data_ptr(): name for name, tensor in zip("QKV", (q, k, v), strict=True)}
    )
    flash_attention(q, k, v, block_q=block, block_k=block, counter=loads)
    visits, query_tile = [], None
    for name, row in loads.loads:
        if name == "Q":
            query_tile = row // block  # this tile stays on chip until the next Q load
        elif name == "K":
            visits.append((query_tile, row // block))
    return visits


def draw_tiling():
    """Return the tile grid of S = QK^T numbered in the order the tiled forward computes it."""
    visits = tile_visits()
    tiles = 1 + max(max(pair) for pair in visits)
    cell, left, bottom = 0.8, 1.25, 0.75
    top = bottom + tiles * cell
    fig, ax = style.new_figure(5.0, 4.3, (0, 5.0), (0, 4.3))
    held = 1  # the query tile drawn as the one on chip
    for step, (row, col) in enumerate(visits, 1):
        x, y = left + col * cell, top - (row + 1) * cell
        style.box(ax, x + 0.04, y + 0.04, cell - 0.08, cell - 0.08, style.BLUE_FILL if row == held else "white")
        ax.text(x + cell / 2, y + cell * 0.58, str(step), ha="center", va="center", fontsize=16, weight="bold")
        ax.text(x + cell / 2, y + cell * 0.22, f"$S_{{{row}{col}}}$", ha="center", va="center", fontsize=style.SMALL)
    for index in range(tiles):
        ax.text(left - 0.2, top - (index + 0.5) * cell, f"$Q_{index}$", ha="right", va="center", fontsize=style.FONT)
        ax.text(left + (index + 0.5) * cell, top + 0.2, f"$K_{index}, V_{index}$", ha="center", fontsize=style.SMALL)
        ax.text(
            left + tiles * cell + 0.15, top - (index + 0.5) * cell, f"→ $O_{index}$", va="center", fontsize=style.FONT
        )
    # the two loops, as arrows along the grid
    style.arrow(ax, (left, top + 0.65), (left + tiles * cell, top + 0.65), color=style.BLUE)
    ax.text(left + tiles * cell / 2, top + 0.75, "inner loop: K, V tiles", ha="center", fontsize=style.FONT)
    style.arrow(ax, (0.35, top), (0.35, bottom), color=style.ORANGE)
    ax.text(0.15, (top + bottom) / 2, "outer loop: Q tiles", rotation=90, ha="center", va="center", fontsize=style.FONT)
    right = left + tiles * cell + 0.15
    ax.text(right + 0.35, top + 0.2, "written once", ha="center", fontsize=style.SMALL)
    ax.text(
        left + tiles * cell / 2,
        bottom - 0.3,
        "blue: the Q tile on chip, with its m, ℓ",
        ha="center",
        va="center",
        fontsize=style.SMALL,
    )
    ax.text(left + tiles * cell / 2, bottom - 0.62, "1–9: order of computation", ha="center", fontsize=style.SMALL)
    return fig


# ---- 2. the online softmax over two tiles, by hand ---------------------------------------------

# --8<-- [start:by_hand]
BY_HAND_TILES = ((1, 2), (3, 1))  # one query row's scores, in two tiles of two keys


def online_softmax_by_hand(tiles=BY_HAND_TILES) -> dict:
    """Return every number of the online softmax over ``tiles``, one ``online_softmax_step`` per tile.

    V is the identity matrix, so the unnormalised output a is the row of exponentials and the
    final output o = a / l is the softmax row itself.
    """
    scores = torch.tensor([s for tile in tiles for s in tile], dtype=torch.float64)[None]
    identity = torch.eye(scores.shape[-1], dtype=torch.float64)
    row_max, row_sum = torch.full((1,), NEG_INF, dtype=torch.float64), torch.zeros(1, dtype=torch.float64)
    acc = torch.zeros(1, scores.shape[-1], dtype=torch.float64)
    steps, details, start = [], [], 0
    for number, tile in enumerate(tiles, 1):
        stop = start + len(tile)
        old_max = row_max
        row_max, row_sum, acc = online_softmax_step(row_max, row_sum, acc, scores[:, start:stop], identity[start:stop])
        terms = torch.exp(scores[0, start:stop] - row_max).tolist()  # this tile's e^(s - m), new max
        rescale = None if number == 1 else math.exp(old_max.item() - row_max.item())  # nothing to rescale at first
        steps.append(
            {
                "tile": number,
                "tile_scores": ", ".join(str(s) for s in tile),
                "running_max": row_max.item(),
                "rescale": rescale,
                "tile_sum": sum(terms),
                "running_sum": row_sum.item(),
            }
        )
        details.append({"terms": terms, "acc": acc[0].tolist()})
        start = stop
    output = (acc / row_sum[:, None])[0]
    return {
        "scores": [s for tile in tiles for s in tile],
        "steps": steps,
        "details": details,
        "output": output.tolist(),
    }


# --8<-- [end:by_hand]


def draw_online_softmax_by_hand():
    """Return the two-tile worked example: scores, the (m, l) after each tile, the rescale, the output."""
    example = online_softmax_by_hand()
    scores, steps, output = example["scores"], example["steps"], example["output"]
    fig, ax = style.new_figure(5.0, 4.4, (0, 5.0), (0, 4.4))
    cell, left = 0.8, 0.9
    tile_width = 2 * cell
    gap = 0.5
    for index, score in enumerate(scores):  # the four scores, in two tiles
        x = left + index * cell + (gap if index >= 2 else 0)
        style.box(ax, x + 0.04, 3.3, cell - 0.08, 0.6, "white")
        ax.text(x + cell / 2, 3.6, str(score), ha="center", va="center", fontsize=style.FONT)
    ax.text(left - 0.2, 3.6, "$s$", ha="right", va="center", fontsize=style.FONT)
    for number, step in enumerate(steps):
        x = left + number * (tile_width + gap)
        ax.text(x + tile_width / 2, 4.05, f"tile {step['tile']}", ha="center", fontsize=style.FONT)
        style.arrow(ax, (x + tile_width / 2, 3.25), (x + tile_width / 2, 2.85))
        style.box(ax, x, 1.95, tile_width, 0.85, style.BLUE_FILL)
        card = f"$m_{step['tile']} = {step['running_max']:g}$\n$\\ell_{step['tile']} = {step['running_sum']:.4g}$"
        ax.text(x + tile_width / 2, 2.375, card, ha="center", va="center", fontsize=style.FONT, linespacing=1.5)
    rescale = steps[1]["rescale"]
    second = left + tile_width + gap
    style.arrow(ax, (left + tile_width, 2.2), (second, 2.2), color=style.ORANGE, width=2.5)
    ax.text(left + tile_width + gap / 2, 1.7, "rescale", ha="center", fontsize=style.SMALL, color=style.ORANGE)
    ax.text(
        left + tile_width + gap / 2,
        1.35,
        f"$\\ell_1 \\times e^{{m_1 - m_2}} = \\ell_1 \\times {rescale:.4g}$",
        ha="center",
        fontsize=style.SMALL,
    )
    for index, value in enumerate(output):  # the result row
        x = left + index * cell + (gap if index >= 2 else 0)
        style.box(ax, x + 0.04, 0.45, cell - 0.08, 0.6, style.GREEN_FILL)
        ax.text(x + cell / 2, 0.75, f"{value:.4g}", ha="center", va="center", fontsize=style.SMALL)
    ax.text(left - 0.2, 0.75, "$o$", ha="right", va="center", fontsize=style.FONT)
    ax.text(2.5, 0.15, "$o = a_2 / \\ell_2$ = softmax($s$)", ha="center", fontsize=style.FONT)
    return fig


# ---- 3. the backward: what is saved, what is recomputed -----------------------------------------


def saved_by_forward(n: int = 6, d: int = 4) -> list[tuple[str, tuple[int, ...]]]:
    """Return (name, shape) of every tensor autograd saves for ``FlashAttention`` on an n x d input."""
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(n, d, generator=generator, dtype=torch.float64, requires_grad=True) for _ in range(3))
    saved: list[torch.Tensor] = []

    def keep(tensor):
        saved.append(tensor)
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(keep, lambda tensor: tensor):
        out = FlashAttention.apply(q, k, v)
    known = {"Q": q, "K": k, "V": v, "O": out}
    named = []
    for tensor in saved:
        name = next((key for key, ref in known.items() if tensor.shape == ref.shape and torch.equal(tensor, ref)), "L")
        named.append((name, tuple(tensor.shape)))
    return named


def shape_label(shape: tuple[int, ...], n: int, d: int) -> str:
    """Return a shape in symbols: (6, 4) -> 'N × d' for n = 6, d = 4."""
    symbols = {n: "N", d: "d"}
    return " × ".join(symbols[size] for size in shape)


def draw_backward_recompute():
    """Return what the forward saves for the backward (from autograd) and what the backward rebuilds."""
    n, d = 6, 4
    saved = saved_by_forward(n, d)
    fig, ax = style.new_figure(5.0, 5.35, (0, 5.0), (-0.15, 5.2))
    ax.text(0.1, 4.9, "saved by the forward pass", fontsize=style.FONT, weight="bold")
    x = 0.15
    for name, shape in saved:  # each saved tensor drawn to scale: N rows tall, d (or 1) wide
        width = 0.45 if len(shape) == 2 else 0.15
        style.box(ax, x, 3.3, width, 1.3, style.BLUE_FILL)
        ax.text(x + width / 2, 3.95, f"${name}$", ha="center", va="center", fontsize=style.FONT)
        ax.text(x + width / 2, 3.05, f"${shape_label(shape, n, d)}$", ha="center", va="center", fontsize=style.SMALL)
        x += width + 0.2
    # S and P: N x N, never saved
    square = x + 0.25
    style.box(ax, square, 3.3, 1.3, 1.3, "white", edge=style.GREY, linestyle="--")
    ax.plot([square, square + 1.3], [3.3, 4.6], color=style.ORANGE, linewidth=2)
    ax.plot([square, square + 1.3], [4.6, 3.3], color=style.ORANGE, linewidth=2)
    ax.text(square + 0.65, 3.95, "$S, P$", ha="center", va="center", fontsize=style.FONT, backgroundcolor="white")
    ax.text(square + 0.65, 3.05, "$N \\times N$", ha="center", va="center", fontsize=style.SMALL)
    ax.text(square + 0.65, 2.75, "not saved", ha="center", va="center", fontsize=style.SMALL, color=style.ORANGE)
    ax.text(0.1, 2.35, "backward, for each tile pair (i, j):", fontsize=style.FONT, weight="bold")
    recomputed = ["$S_{ij} = Q_i K_j^{\\top} / \\sqrt{d}$", "$P_{ij} = \\exp(S_{ij} - L_i)$"]
    gradients = [
        "$dV_j$ += $P_{ij}^{\\top}\\, dO_i$",
        "$dP_{ij} = dO_i\\, V_j^{\\top}$",
        "$dS_{ij} = P_{ij} \\circ (dP_{ij} - D_i)$",
        "$dQ_i$ += $dS_{ij} K_j / \\sqrt{d}$",
        "$dK_j$ += $dS_{ij}^{\\top} Q_i / \\sqrt{d}$",
    ]
    style.box(ax, 0.1, 1.15, 2.15, 0.9, style.ORANGE_FILL)
    ax.text(0.2, 1.6, "\n".join(recomputed), va="center", fontsize=style.SMALL, linespacing=1.6)
    ax.text(0.15, 0.85, "recomputed from L", fontsize=style.SMALL, color=style.ORANGE)
    style.box(ax, 2.5, 0.1, 2.4, 1.95, style.GREEN_FILL)
    ax.text(2.6, 1.075, "\n".join(gradients), va="center", fontsize=style.SMALL, linespacing=1.6)
    style.arrow(ax, (2.25, 1.6), (2.5, 1.6))
    ax.text(0.1, 0.5, "once, before the loop:", fontsize=style.SMALL)
    ax.text(0.1, 0.1, "$D_i = \\sum_k dO_{ik} O_{ik}$", fontsize=style.SMALL)
    return fig


# ---- 4. FlashAttention-2: which warp computes what -----------------------------------------------

SPLITS = ("split-K", "split-Q")  # FlashAttention-1's and FlashAttention-2's work split (Dao 2023, 3.3)


def warp_split(split: str, rows: int = 16, keys: int = 16, warps: int = 4) -> list[tuple[range, range]]:
    """Return, for each warp of one thread block, the (query rows, key rows) it computes."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if split == "split-K":  # every warp sees all queries and a quarter of the keys and values
        size = keys // warps
        return [(range(rows), range(w * size, (w + 1) * size)) for w in range(warps)]
    size = rows // warps  # split-Q: every warp owns a quarter of the queries and sees all keys
    return [(range(w * size, (w + 1) * size), range(keys)) for w in range(warps)]


def attention_by_warps(q, k, v, split: str, warps: int = 4) -> tuple[torch.Tensor, int]:
    """Return (attention output, partial rows the warps exchange through shared memory) for one block."""
    out = torch.zeros(q.shape[0], v.shape[-1], dtype=q.dtype)
    partials: dict[int, list] = {}  # query row -> the (m, l, a) of each warp that touched it
    for rows, keys in warp_split(split, q.shape[0], k.shape[0], warps):
        rows, keys = list(rows), list(keys)
        scores = q[rows] @ k[keys].T / math.sqrt(q.shape[-1])
        start = (torch.full((len(rows),), NEG_INF, dtype=q.dtype), torch.zeros(len(rows), dtype=q.dtype))
        row_max, row_sum, acc = online_softmax_step(
            *start, torch.zeros(len(rows), v.shape[-1], dtype=q.dtype), scores, v[keys]
        )
        for index, row in enumerate(rows):
            partials.setdefault(row, []).append((row_max[index], row_sum[index], acc[index]))
    exchanged = 0
    for row, parts in partials.items():
        if len(parts) > 1:  # several warps hold pieces of this row: write, synchronise, add
            exchanged += len(parts)
        row_max = max(part[0] for part in parts)  # the same rescaling as the online softmax
        row_sum = sum(part[1] * torch.exp(part[0] - row_max) for part in parts)
        out[row] = sum(part[2] * torch.exp(part[0] - row_max) for part in parts) / row_sum
    return out, exchanged


def draw_fa2_warp_split():
    """Return the timeline of four warps under FlashAttention-1's split-K and FlashAttention-2's split-Q."""
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(16, 8, generator=generator) for _ in range(3))
    fig, ax = style.new_figure(5.0, 5.8, (0, 5.0), (0, 5.8))
    left, unit, row = 1.15, 0.55, 0.45  # where the bars start; inches per time unit; row pitch
    titles = {"split-K": "FlashAttention-1: split K, V", "split-Q": "FlashAttention-2: split Q"}
    for panel, split in enumerate(SPLITS):
        top = 5.55 - panel * 2.85  # the panel's title line
        ax.text(0.1, top, titles[split], fontsize=style.FONT, weight="bold")
        _, exchanged = attention_by_warps(q, k, v, split)
        first = top - 0.85  # bottom of the first warp's bar
        for warp, (rows, keys) in enumerate(warp_split(split)):
            y = first - warp * row
            ax.text(left - 0.1, y + 0.18, f"warp {warp + 1}", ha="right", va="center", fontsize=style.SMALL)
            style.box(ax, left, y, 4 * unit, 0.36, style.BLUE_FILL)
            label = f"Q {rows[0]}–{rows[-1]} × K {keys[0]}–{keys[-1]}"
            ax.text(left + 2 * unit, y + 0.18, label, ha="center", va="center", fontsize=style.SMALL)
            if exchanged:  # pieces of every output row sit in four warps: write them out, sync, add
                style.box(ax, left + 4 * unit + 0.05, y, unit, 0.36, style.ORANGE_FILL, hatch="//")
                style.box(ax, left + 5.5 * unit, y, unit, 0.36, style.ORANGE_FILL)
        bottom = first - 3 * row
        if exchanged:
            barrier = left + 5.25 * unit
            ax.plot([barrier, barrier], [bottom - 0.05, first + 0.45], color=style.INK, linestyle="--", linewidth=1.5)
            ax.text(left + 4.5 * unit + 0.05, first + 0.5, "write", ha="center", fontsize=style.SMALL)
            ax.text(left + 6 * unit, first + 0.5, "add", ha="center", fontsize=style.SMALL)
            ax.text(barrier, bottom - 0.35, "sync", ha="center", fontsize=style.SMALL)
        else:
            note = "no exchange:\neach warp owns\nits rows of O"
            ax.text(left + 4 * unit + 0.12, (first + bottom) / 2 + 0.18, note, va="center", fontsize=style.SMALL)
    style.arrow(ax, (left, 0.15), (4.9, 0.15), color=style.GREY)
    ax.text(left, 0.25, "time", fontsize=style.SMALL, color=style.GREY)
    return fig


# ---- 5. FlashAttention-3: the ping-pong schedule of two warpgroups -------------------------------

# Shah et al. (2024) count that on an H100 SXM5 the exponentials run about 256 times slower than
# fp16 matmuls, and with head dim 128 there are 512 matmul FLOPs per exponential, so one softmax
# takes about half as long as the two GEMMs of its tile. Time unit: one GEMM.
GEMM_TIME, SOFTMAX_TIME = 1.0, 1.0


def pingpong_schedule(
    warpgroups: int = 2, iterations: int = 3, gemm: float = GEMM_TIME, softmax: float = SOFTMAX_TIME
) -> list[dict]:
    """Return the ops of ``warpgroups`` consumer warpgroups, each running ``iterations`` K/V tiles.

    Each warpgroup computes S = QK^T (GEMM0), its softmax, then O += PV (GEMM1); the GEMM1 of one
    tile and the GEMM0 of the next are issued together. The Tensor Cores run one warpgroup's GEMMs
    at a time, and the warpgroups take turns in a fixed order (FlashAttention-3 enforces it with
    barriers), so one warpgroup's softmax runs while another's GEMMs use the Tensor Cores.
    """
    ready = [0.0] * warpgroups  # when each warpgroup can issue its next op
    tensor_cores_free = 0.0
    ops = []
    for phase in range(iterations + 1):  # GEMM phase p: GEMM1 of tile p (if any), GEMM0 of tile p + 1 (if any)
        for group in range(warpgroups):  # the turns: warpgroup 1, then 2, ...
            kinds = (["PV"] if phase > 0 else []) + (["QK"] if phase < iterations else [])
            start = max(ready[group], tensor_cores_free)
            for kind in kinds:
                ops.append(
                    {"group": group, "kind": kind, "tile": phase + (kind == "QK"), "start": start, "end": start + gemm}
                )
                start += gemm
            tensor_cores_free = ready[group] = start
            if phase < iterations:  # the softmax of tile p + 1 needs its S, then frees the Tensor Cores
                ops.append(
                    {"group": group, "kind": "softmax", "tile": phase + 1, "start": start, "end": start + softmax}
                )
                ready[group] = start + softmax
    return ops


def tensor_core_busy(ops: list[dict]) -> float:
    """Return the fraction of a schedule's length during which the Tensor Cores run a GEMM."""
    length = max(op["end"] for op in ops)
    return sum(op["end"] - op["start"] for op in ops if op["kind"] != "softmax") / length


def draw_fa3_pingpong():
    """Return one warpgroup in order against two warpgroups in ping-pong, on the same time axis."""
    schedules = {"one warpgroup, in order": pingpong_schedule(1), "ping-pong: two warpgroups": pingpong_schedule(2)}
    horizon = max(op["end"] for ops in schedules.values() for op in ops)
    left, row, bar = 1.45, 0.42, 0.32
    unit = (4.9 - left) / horizon
    fig, ax = style.new_figure(5.0, 4.75, (0, 5.0), (0, 4.75))
    top = 4.45  # the panel's title line
    for title, ops in schedules.items():
        groups = 1 + max(op["group"] for op in ops)
        ax.text(0.1, top, title, fontsize=style.FONT, weight="bold")
        busy = f"Tensor Cores busy {round(100 * tensor_core_busy(ops))}% of the time"
        ax.text(0.1, top - 0.33, busy, fontsize=style.SMALL)
        first = top - 0.85  # bottom of the first row's bars
        names = [f"warpgroup {g + 1}" for g in range(groups)] + ["Tensor Cores"]
        for index, name in enumerate(names):
            y = first - index * row
            ax.text(left - 0.08, y + bar / 2, name, ha="right", va="center", fontsize=style.SMALL)
            ax.plot([left, left + horizon * unit], [y - 0.04, y - 0.04], color=style.PALE, linewidth=1)
        for op in ops:
            x, width = left + op["start"] * unit, (op["end"] - op["start"]) * unit
            gemm = op["kind"] != "softmax"
            y = first - op["group"] * row
            style.box(
                ax,
                x + 0.01,
                y,
                width - 0.02,
                bar,
                style.BLUE_FILL if gemm else style.ORANGE_FILL,
                hatch=None if gemm else "//",
            )
            face = style.BLUE_FILL if gemm else style.ORANGE_FILL  # a plate under the digit hides the hatch
            ax.text(
                x + width / 2,
                y + bar / 2,
                str(op["tile"]),
                ha="center",
                va="center",
                fontsize=style.SMALL,
                bbox={"facecolor": face, "edgecolor": "none", "pad": 0.5},
            )
            if gemm:  # the Tensor Cores row: busy whenever some warpgroup runs a GEMM
                style.box(ax, x + 0.01, first - groups * row, width - 0.02, bar, style.BLUE)
        top = first - groups * row - 0.55
    y = top + 0.05  # the legend
    style.box(ax, 0.1, y, 0.3, 0.26, style.BLUE_FILL)
    ax.text(0.5, y + 0.13, "GEMM ($QK^{\\top}$ or $PV$)", va="center", fontsize=style.SMALL)
    style.box(ax, 3.1, y, 0.3, 0.26, style.ORANGE_FILL, hatch="//")
    ax.text(3.5, y + 0.13, "softmax", va="center", fontsize=style.SMALL)
    ax.text(0.1, y - 0.35, "digits: the K, V tile; time unit: one GEMM", fontsize=style.SMALL)
    return fig


DIAGRAMS = {
    "tiling": draw_tiling,
    "online_softmax_by_hand": draw_online_softmax_by_hand,
    "backward_recompute": draw_backward_recompute,
    "fa2_warp_split": draw_fa2_warp_split,
    "fa3_pingpong": draw_fa3_pingpong,
}

# ---- 6. more guide pages (issue 17): standard attention's round trips, traffic by tensor, the Triton grid ----


class NamedTraffic(TrafficCounter):
    """A traffic counter that also notes which tensor every read and write moved, and how many elements."""

    def __init__(self, inputs: dict[str, torch.Tensor], name_written) -> None:
        super().__init__()
        self.inputs = {tensor.untyped_storage().data_ptr(): name for name, tensor in inputs.items()}
        self.name_written = name_written  # (tensor, writes so far) -> the name of a tensor the algorithm writes
        self.written: list[tuple[torch.Tensor, str]] = []  # kept alive, so "is" cannot match a new tensor
        self.moves: list[tuple[str, str, int]] = []  # ("read" or "write", tensor name, elements)

    def name_of(self, tensor: torch.Tensor) -> str:
        for kept, name in self.written:
            if kept is tensor:
                return name
        return self.inputs[tensor.untyped_storage().data_ptr()]

    def read(self, tensor: torch.Tensor) -> torch.Tensor:
        self.moves.append(("read", self.name_of(tensor), tensor.numel()))
        return super().read(tensor)

    def write(self, tensor: torch.Tensor) -> torch.Tensor:
        name = self.name_written(tensor, len(self.written))
        self.written.append((tensor, name))
        self.moves.append(("write", name, tensor.numel()))
        return super().write(tensor)


ROUND_TRIP_N, ROUND_TRIP_D = 12, 4  # small enough to draw every tensor to scale


def standard_moves(n: int = ROUND_TRIP_N, d: int = ROUND_TRIP_D) -> list[dict]:
    """Return the passes of ``standard_attention`` over memory: per pass, what it read and what it wrote."""
    from inferlab.flash import standard_attention

    q, k, v = (torch.zeros(n, d) for _ in range(3))
    counter = NamedTraffic({"Q": q, "K": k, "V": v}, lambda tensor, written: "SPO"[written])
    standard_attention(q, k, v, counter=counter)
    passes, reads = [], []
    for kind, name, elements in counter.moves:
        if kind == "read":
            reads.append((name, elements))
        else:  # a write ends a pass: what it read went in, this comes out
            passes.append({"reads": reads, "write": (name, elements)})
            reads = []
    return passes


def draw_standard_round_trips():
    """Return the three passes of standard attention, each tensor drawn to scale with the elements it moves."""
    n, d = ROUND_TRIP_N, ROUND_TRIP_D
    passes = standard_moves(n, d)
    unit = 0.11  # one row or column of a tensor
    fig, ax = style.new_figure(5.0, 5.2, (0, 10.0), (-0.9, 9.5))
    ax.text(0.2, 9.15, "read from HBM", fontsize=style.SMALL, color=style.GREY, va="center")
    ax.text(5.0, 9.15, "on chip", fontsize=style.SMALL, color=style.GREY, ha="center", va="center")
    ax.text(9.8, 9.15, "written to HBM", fontsize=style.SMALL, color=style.GREY, ha="right", va="center")
    formulas = [r"$S = QK^{\top}/\sqrt{d}$", r"$P = \mathrm{softmax}(S)$", r"$O = PV$"]

    def tensor(x: float, y: float, name: str, elements: int, role: str) -> float:
        """Draw one tensor with its lower-left corner at (x, y); return its width."""
        height = n * unit
        width = elements / n * unit  # N x d or N x N, to scale
        square = elements == n * n
        face = style.ORANGE_FILL if square else style.BLUE_FILL
        style.box(ax, x, y, width, height, face, hatch="//" if square else None).set_gid(f"{role}:{name}:{elements}")
        ax.text(x + width / 2, y + height / 2, f"${name}$", fontsize=style.FONT, ha="center", va="center",
                bbox={"facecolor": face, "edgecolor": "none", "pad": 1})  # fmt: skip
        ax.text(x + width / 2, y - 0.3, str(elements), fontsize=style.SMALL, ha="center", va="center")
        return width

    for index, (one_pass, formula) in enumerate(zip(passes, formulas, strict=True)):
        y = 6.6 - 3.0 * index  # the tensors' bottom edge
        middle = y + n * unit / 2
        x = 0.2
        for name, elements in one_pass["reads"]:
            x += tensor(x, y, name, elements, f"read:{index + 1}") + 0.25
        style.box(ax, 3.6, middle - 0.45, 2.8, 0.9, "white")
        ax.text(5.0, middle, formula, fontsize=style.SMALL, ha="center", va="center")
        style.arrow(ax, (x - 0.15, middle), (3.55, middle), color=style.GREY)
        name, elements = one_pass["write"]
        width = elements / n * unit
        style.arrow(ax, (6.45, middle), (9.8 - width - 0.1, middle), color=style.GREY)
        tensor(9.8 - width, y, name, elements, f"write:{index + 1}")
    total = sum(e for p in passes for _, e in p["reads"]) + sum(p["write"][1] for p in passes)
    ax.text(0.2, -0.55, f"N = {n}, d = {d}: {total} elements moved", fontsize=style.FONT, va="center", gid="total")
    return fig


TRAFFIC_N, TRAFFIC_D, TRAFFIC_BLOCK = 16, 4, 4
TENSORS = ("Q", "K", "V", "S", "P", "O", "L")


def traffic_by_tensor(n: int = TRAFFIC_N, d: int = TRAFFIC_D, block: int = TRAFFIC_BLOCK) -> dict[str, dict[str, int]]:
    """Return {method: {tensor: elements read + written}} for standard attention and the tiled forward."""
    from inferlab.flash import standard_attention

    q, k, v = (torch.zeros(n, d) for _ in range(3))
    inputs = {"Q": q, "K": k, "V": v}
    standard = NamedTraffic(inputs, lambda tensor, written: "SPO"[written])
    standard_attention(q, k, v, counter=standard)
    tiled = NamedTraffic(inputs, lambda tensor, written: "O" if tensor.dim() == q.dim() else "L")  # O tiles, or L
    flash_attention(q, k, v, block_q=block, block_k=block, counter=tiled)
    counts = {}
    for method, counter in (("standard", standard), ("tiled", tiled)):
        counts[method] = {name: 0 for name in TENSORS}
        for _, name, elements in counter.moves:
            counts[method][name] += elements
    return counts


def draw_traffic_by_tensor():
    """Return, tensor by tensor, the elements standard attention and the tiled forward move between HBM and chip."""
    counts = traffic_by_tensor()
    largest = max(max(c.values()) for c in counts.values())
    left, span, bar = 1.0, 6.6, 0.34  # where bars start; the longest bar's length; a bar's height
    fig, ax = style.new_figure(5.0, 4.9, (0, 10.0), (-0.6, 9.2))
    styles = {"standard": (style.ORANGE_FILL, None), "tiled": (style.BLUE_FILL, "//")}
    for row, name in enumerate(TENSORS):
        y = 8.0 - 1.05 * row  # the top of this tensor's pair of bars
        ax.text(left - 0.2, y - bar, f"${name}$", fontsize=style.FONT, ha="right", va="center")
        for offset, method in enumerate(("standard", "tiled")):
            value = counts[method][name]
            top = y - offset * (bar + 0.04)
            face, hatch = styles[method]
            if value:
                width = span * value / largest
                style.box(ax, left, top - bar, width, bar, face, hatch=hatch).set_gid(f"{method}:{name}:{value}")
            else:
                width = 0.0
            ax.text(left + width + 0.12, top - bar / 2, str(value), fontsize=style.SMALL, va="center")
    ax.text(left, 8.75, f"N = {TRAFFIC_N}, d = {TRAFFIC_D}, tiles of {TRAFFIC_BLOCK} rows", fontsize=style.FONT,
            va="center")  # fmt: skip
    for i, method in enumerate(("standard", "tiled")):
        face, hatch = styles[method]
        y = 0.4 - 0.6 * i
        style.box(ax, 0.2, y - 0.2, 0.5, 0.4, face, hatch=hatch)
        total = sum(counts[method].values())
        label = "standard attention" if method == "standard" else "tiled forward"
        ax.text(0.9, y, f"{label}: {total} in all", fontsize=style.SMALL, va="center", gid=f"total:{method}")
    return fig


TRITON_N, TRITON_HEADS, TRITON_BLOCK = 40, 2, 16


def program_tiles(n_q: int = TRITON_N, heads: int = TRITON_HEADS, block_q: int = TRITON_BLOCK) -> list[dict]:
    """Return every program the kernel's launch starts: its two ids, the query rows it stores and those it masks.

    The grid is ``attention_forward``'s, (cdiv(n_q, block_q), batch * heads); the rows are the kernel's
    ``tile * BLOCK_Q + tl.arange(0, BLOCK_Q)``, and rows at or past n_q are masked on load and store.
    """
    grid = (-(-n_q // block_q), heads)
    programs = []
    for head in range(grid[1]):
        for tile in range(grid[0]):
            rows = [tile * block_q + r for r in range(block_q)]
            programs.append(
                {
                    "ids": (tile, head),
                    "stored": [r for r in rows if r < n_q],
                    "masked": [r for r in rows if r >= n_q],
                }
            )
    return programs


def draw_triton_grid():
    """Return the launch grid: one program per (query tile, head), each with its rows; padding rows masked."""
    programs = program_tiles()
    unit = 0.16  # one query row
    top, width = 7.9, 3.3
    fig, ax = style.new_figure(5.0, 5.0, (0, 10.0), (-1.6, 8.4))
    for program in programs:
        tile, head = program["ids"]
        x = 2.4 + head * (width + 0.5)
        if tile == 0:
            ax.text(x + width / 2, top + 0.25, f"head {head}", fontsize=style.FONT, ha="center", va="center")
        stored, masked = program["stored"], program["masked"]
        y = top - (stored[0] + len(stored)) * unit
        style.box(ax, x, y, width, len(stored) * unit, style.BLUE_FILL).set_gid(
            f"program:{tile}:{head}:{stored[0]}-{stored[-1]}"
        )
        label = f"({tile}, {head})\nrows {stored[0]}–{stored[-1]}"
        ax.text(x + width / 2, y + len(stored) * unit / 2, label, fontsize=style.SMALL, ha="center", va="center")
        if masked:
            y_mask = top - (masked[-1] + 1) * unit
            style.box(ax, x, y_mask, width, len(masked) * unit, "white", edge=style.GREY, hatch="//").set_gid(
                f"masked:{tile}:{head}:{masked[0]}-{masked[-1]}"
            )
        if head == 0:
            ax.text(2.2, y + len(stored) * unit / 2, f"tile {tile}", fontsize=style.SMALL, ha="right", va="center")
    bottom = top - programs[-1]["masked"][-1] * unit - unit if programs[-1]["masked"] else 0
    ax.text(0.2, bottom - 0.55, f"N = {TRITON_N}, BLOCK_Q = {TRITON_BLOCK}: labels are", fontsize=style.SMALL,
            va="center")  # fmt: skip
    ax.text(0.2, bottom - 1.05, "(program_id(0), program_id(1))", fontsize=style.SMALL, family=style.CODE,
            va="center")  # fmt: skip
    ax.text(0.2, bottom - 1.55, "hatched: rows past N, masked", fontsize=style.SMALL, va="center")
    return fig


DIAGRAMS.update(
    {
        "standard_round_trips": draw_standard_round_trips,
        "traffic_by_tensor": draw_traffic_by_tensor,
        "triton_grid": draw_triton_grid,
    }
)


WORKED = {"flash_online_softmax_by_hand": online_softmax_by_hand}
