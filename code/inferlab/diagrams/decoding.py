"""Decoding diagrams: greedy against MAP on a probability tree, and the Viterbi trellis.

Both are drawn on the site's own first-order model (``inferlab.decoding.examples``), and every
number and every marked path comes from the package's decoders: ``token_logprobs`` for the
branches, ``greedy_decode`` and ``map_decode_bruteforce`` for the two paths of the tree, and
``viterbi`` for the trellis. Each line and number a test needs to find carries a ``gid``
(``greedy:X X``, ``best:3:Y``, ``s:2:Y``), so a test reads the drawing itself.

The trellis is drawn for k = 1 only: the state is a window of one token. The general-k state and
its count are left to the reader (docs/decoding/map-dp.md and its checker).

Two more set up the chapter: ``autoregressive_loop`` (three calls of the generation loop, each
distribution read from calling the model on what is written so far) and ``sampling_filters`` (one
small distribution reshaped by the package's temperature, top-k and top-p filters).
"""

from __future__ import annotations

import math

import torch

from inferlab.decoding.examples import GREEDY_PAGE_LENGTH, NEXT, START, TOKENS, VITERBI_PAGE_LENGTH, page_model
from inferlab.decoding.search import (
    greedy_decode,
    map_decode_bruteforce,
    next_token_logprobs,
    token_logprobs,
    viterbi,
)
from inferlab.diagrams.style import BLUE, BLUE_FILL, CODE, FONT, GREY, INK, ORANGE, PALE, SMALL, arrow, box, new_figure

WORKED_VITERBI_LENGTH = 3  # the page works steps 1 to 3 by hand; row 4 is the reader's to check


def number(value: float, digits: int = 4) -> str:
    """Return a probability as the pages print it: up to 4 significant digits (0.255, 0.2167)."""
    return f"{value:.{digits}g}"


def exact(value: float) -> str:
    """Return a product of the model's two-decimal entries as a pencil gives it (0.21675), float noise removed."""
    return number(value, 8)


def sequence_name(tokens: list[int]) -> str:
    """Return tokens as the pages write them: 'X Y'."""
    return " ".join(TOKENS[t] for t in tokens)


# ------------------------------------------------------------------ the probability tree (greedy-vs-map)


def tree_values() -> dict:
    """Return the two-token tree of the site's model: branch and sequence probabilities, greedy and MAP paths."""
    model = page_model()
    branches = {}  # sequence name -> p(last token | the tokens before it)
    leaves = {}  # two-token sequence name -> p(sequence)
    for first in range(len(TOKENS)):
        for second in range(len(TOKENS)):
            logprobs = token_logprobs(model, [first, second])  # the chain rule's two factors
            branches[sequence_name([first])] = math.exp(logprobs[0])
            branches[sequence_name([first, second])] = math.exp(logprobs[1])
            leaves[sequence_name([first, second])] = math.exp(sum(logprobs))
    return {
        "branches": branches,
        "leaves": leaves,
        "greedy": greedy_decode(model, GREEDY_PAGE_LENGTH).tokens,
        "map": map_decode_bruteforce(model, GREEDY_PAGE_LENGTH).tokens,
    }


def greedy_vs_map_tree():
    """Return the tree of all two-token sequences with greedy's path and the most probable sequence marked."""
    from matplotlib.patches import Circle

    values = tree_values()
    fig, ax = new_figure(5.2, 6.6, (0, 10), (-1.6, 10.2))
    vocab = len(TOKENS)
    leaf_y = [8.7 - 1.0 * i for i in range(vocab * vocab)]
    first_y = [sum(leaf_y[vocab * a : vocab * a + vocab]) / vocab for a in range(vocab)]
    root, first_x, second_x = (0.9, sum(first_y) / vocab), 3.4, 6.2
    paths = {"greedy": sequence_name(values["greedy"]), "map": sequence_name(values["map"])}

    def on_path(role: str, name: str) -> bool:
        return paths[role] == name or paths[role].startswith(name + " ")

    def branch(start, end, name: str, label_at: float) -> None:
        drawn = False
        for role, color, style in (("map", BLUE, "-"), ("greedy", ORANGE, "--")):
            if on_path(role, name):
                ax.plot(
                    *zip(start, end, strict=True), color=color, linewidth=4.5, linestyle=style, gid=f"{role}:{name}"
                )
                drawn = True
        if not drawn:
            ax.plot(*zip(start, end, strict=True), color=GREY, linewidth=1.5, gid=f"other:{name}")
        x = start[0] + label_at * (end[0] - start[0])
        y = start[1] + label_at * (end[1] - start[1])
        ax.text(
            x, y, number(values["branches"][name]), fontsize=SMALL, ha="center", va="center",
            bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none"}, gid=f"branch:{name}",
        )  # fmt: skip

    def node(x: float, y: float, token: str) -> None:
        ax.add_patch(Circle((x, y), 0.36, facecolor="white", edgecolor=INK, linewidth=1.5, zorder=3))
        ax.text(x, y, token, fontsize=FONT, family=CODE, ha="center", va="center", zorder=4, weight="bold")

    box(ax, root[0] - 0.8, root[1] - 0.4, 1.6, 0.8, "white")
    ax.text(*root, "start", fontsize=FONT, ha="center", va="center")
    for a in range(vocab):
        branch((root[0] + 0.8, root[1]), (first_x - 0.36, first_y[a]), TOKENS[a], 0.55)
        for b in range(vocab):
            name = sequence_name([a, b])
            y = leaf_y[vocab * a + b]
            branch((first_x + 0.36, first_y[a]), (second_x - 0.36, y), name, 0.62)
            node(second_x, y, TOKENS[b])
            ax.text(7.0, y, name, fontsize=FONT, family=CODE, va="center")
            marked = name in paths.values()
            ax.text(
                9.9, y, number(values["leaves"][name]), fontsize=FONT, ha="right", va="center",
                weight="bold" if marked else "normal", color=BLUE if name == paths["map"] else ORANGE if name == paths["greedy"] else INK,
                gid=f"p:{name}",
            )  # fmt: skip
        node(first_x, first_y[a], TOKENS[a])
    for x, text, align in (
        (first_x, "first token", "center"),
        (second_x, "second token", "center"),
        (9.9, "p(sequence)", "right"),
    ):
        ax.text(x, 9.7, text, fontsize=SMALL, ha=align, va="center", color=GREY)
    for y, color, style, text in ((-0.55, ORANGE, "--", "greedy path"), (-1.25, BLUE, "-", "most probable sequence")):
        ax.plot([0.3, 1.5], [y, y], color=color, linewidth=4.5, linestyle=style)
        ax.text(1.8, y, text, fontsize=FONT, va="center")
    return fig


# ------------------------------------------------------------------ the trellis (map-dp)


def trellis_values(length: int = VITERBI_PAGE_LENGTH) -> dict:
    """Return the Viterbi trellis of the site's model: s_t(x), back-pointers and the best sequence."""
    tokens, probability, trellis, back_pointers = viterbi(START, NEXT, length)
    return {"tokens": tokens, "p": probability, "trellis": trellis, "back_pointers": back_pointers}


def viterbi_trellis():
    """Return the trellis for k = 1: one state per last token, the surviving edges and the best path marked."""
    values = trellis_values()
    trellis, back_pointers, best = values["trellis"], values["back_pointers"], values["tokens"]
    length, vocab = len(trellis), len(TOKENS)
    fig, ax = new_figure(5.4, 4.4, (0, 10.4), (-1.9, 6.1))
    xs = [1.0 + 2.8 * t for t in range(length)]
    ys = [4.2 - 1.55 * v for v in range(vocab)]
    w, h = 1.6, 1.1
    ax.text(0.1, 5.75, "state = the last token (a window of k = 1)", fontsize=SMALL, color=GREY, va="center")
    for t in range(length):
        ax.text(xs[t], 5.1, f"t = {t + 1}", fontsize=FONT, ha="center", va="center")
    for t in range(1, length):
        for nxt in range(vocab):
            for prev in range(vocab):
                start, end = (xs[t - 1] + w / 2, ys[prev]), (xs[t] - w / 2, ys[nxt])
                on_best = best[t - 1] == prev and best[t] == nxt
                if on_best:
                    role, color, width = f"best:{t + 1}:{TOKENS[nxt]}", BLUE, 5.0
                elif back_pointers[t - 1][nxt] == prev:
                    role, color, width = f"kept:{t + 1}:{TOKENS[nxt]}", GREY, 2.2
                else:
                    role, color, width = f"dropped:{t + 1}:{TOKENS[nxt]}:{TOKENS[prev]}", PALE, 1.0
                ax.plot(
                    *zip(start, end, strict=True), color=color, linewidth=width, gid=role, zorder=3 if on_best else 2
                )
    for t in range(length):
        for v in range(vocab):
            on_best = best[t] == v
            box(
                ax,
                xs[t] - w / 2,
                ys[v] - h / 2,
                w,
                h,
                BLUE_FILL if on_best else "white",
                BLUE if on_best else INK,
                zorder=4,
            )
            ax.text(
                xs[t],
                ys[v] + 0.22,
                TOKENS[v],
                fontsize=FONT,
                family=CODE,
                weight="bold",
                ha="center",
                va="center",
                zorder=5,
            )
            ax.text(
                xs[t],
                ys[v] - 0.22,
                number(trellis[t][v]),
                fontsize=SMALL,
                ha="center",
                va="center",
                zorder=5,
                gid=f"s:{t + 1}:{TOKENS[v]}",
            )
    legend = (
        (PALE, 1.0, "a candidate, beaten"),
        (GREY, 2.2, "the best way into a state"),
        (BLUE, 5.0, "the most probable sequence"),
    )
    for i, (color, width, text) in enumerate(legend):
        y = -0.45 - 0.6 * i
        ax.plot([0.3, 1.5], [y, y], color=color, linewidth=width)
        ax.text(1.8, y, text, fontsize=SMALL, va="center")
    return fig


DIAGRAMS = {"greedy_vs_map_tree": greedy_vs_map_tree, "viterbi_trellis": viterbi_trellis}


# ------------------------------------------------------------------ worked example: three Viterbi steps


def viterbi_by_hand(length: int = WORKED_VITERBI_LENGTH) -> dict:
    """Return every product of a short Viterbi pass on the site's model, the winner of each step marked.

    One row per (step t >= 2, token x): the candidates s_{t-1}(x') * p(x | x') for every x', the
    winner in bold, and s_t(x) with its back-pointer. Then the best last token, the path the
    back-pointers give, and what brute force over all V^T sequences finds, for comparison.
    """
    tokens, probability, trellis, back_pointers = viterbi(START, NEXT, length)
    rows = []
    for t in range(1, length):
        for nxt, name in enumerate(TOKENS):
            row = {"t": t + 1, "x": name}
            for prev, prev_name in enumerate(TOKENS):
                product = trellis[t - 1][prev] * NEXT[prev][nxt]
                text = f"{exact(trellis[t - 1][prev])} × {exact(NEXT[prev][nxt])} = {exact(product)}"
                row[f"from {prev_name}"] = f"**{text}**" if back_pointers[t - 1][nxt] == prev else text
            row["s_t(x)"] = f"{exact(trellis[t][nxt])} ← {TOKENS[back_pointers[t - 1][nxt]]}"
            rows.append(row)
    model = page_model()
    brute = map_decode_bruteforce(model, length)
    greedy = greedy_decode(model, length)
    last = trellis[-1]
    return {
        "length": length,
        "sequences": len(TOKENS) ** length,
        "start": {name: exact(START[v]) for v, name in enumerate(TOKENS)},
        "rows": rows,
        "last_row": ", ".join(f"{name} {exact(last[v])}" for v, name in enumerate(TOKENS)),
        "best_last": TOKENS[tokens[-1]],
        "sequence": sequence_name(tokens),
        "p": float(exact(probability)),
        "brute_force_sequence": sequence_name(brute.tokens),
        "brute_force_p": float(exact(math.exp(brute.logprob))),
        "greedy_sequence": sequence_name(greedy.tokens),
        "greedy_p": float(exact(math.exp(greedy.logprob))),
    }


WORKED = {"decoding_worked_viterbi": viterbi_by_hand}


# ------------------------------------------------------------------ more guide pages (issue 17): the loop, the filters

LOOP_TOKENS = [1, 1, 2]  # Y Y Z: three calls of the model, three factors of the chain rule


def loop_values(tokens: list[int] = LOOP_TOKENS) -> dict:
    """Return each call of the generation loop over ``tokens``: its input, p(next | input) and the token appended.

    The distributions come from calling the site's model the way a generation loop does, one call
    per token on everything written so far (``next_token_logprobs``), not from its tables directly.
    """
    model = page_model()
    steps, product = [], 1.0
    for t in range(len(tokens)):
        ids = torch.tensor([[model.bos_id, *tokens[:t]]])  # the start symbol, then what is written so far
        probs = next_token_logprobs(model, ids)[0].exp().tolist()
        product *= probs[tokens[t]]
        steps.append({"input": ["start"] + [TOKENS[x] for x in tokens[:t]], "probs": probs, "chosen": tokens[t]})
    return {"steps": steps, "sequence": sequence_name(tokens), "p": product}


def autoregressive_loop():
    """Return three calls of the loop: the input so far, the next-token distribution, the token appended."""
    values = loop_values()
    steps = values["steps"]
    fig, ax = new_figure(5.2, 5.9, (0, 10.4), (-1.5, 10.3))
    bar_left, bar_width, bar_gap, bar_height = 5.5, 1.0, 0.45, 1.6  # three bars; height 1.6 is probability 1
    ax.text(0.2, 9.95, "the input so far", fontsize=SMALL, color=GREY, va="center")
    ax.text(bar_left, 9.95, "p(next token | input)", fontsize=SMALL, color=GREY, va="center")
    factors = []
    for t, step in enumerate(steps):
        base = 7.0 - 3.0 * t  # the bars' baseline of this call
        middle = base + 0.8
        ax.text(0.2, base + 2.05, f"call {t + 1}", fontsize=FONT, weight="bold", va="center")
        for j, token in enumerate(step["input"]):  # the start symbol, then the tokens appended so far
            x, width = (0.2, 1.5) if j == 0 else (1.85 + 1.0 * (j - 1), 0.85)
            box(ax, x, middle - 0.4, width, 0.8, "white" if j == 0 else BLUE_FILL)
            ax.text(x + width / 2, middle, token, fontsize=FONT, family=None if j == 0 else CODE,
                    ha="center", va="center")  # fmt: skip
        arrow(ax, (4.8, middle), (bar_left - 0.2, middle), color=GREY, width=2.0)
        for v, p in enumerate(step["probs"]):
            x = bar_left + v * (bar_width + bar_gap)
            chosen = v == step["chosen"]
            patch = box(ax, x, base, bar_width, max(p * bar_height, 0.02), ORANGE if chosen else PALE,
                        ORANGE if chosen else GREY)  # fmt: skip
            patch.set_gid(f"bar:{t + 1}:{TOKENS[v]}:{'chosen' if chosen else 'other'}")
            ax.text(x + bar_width / 2, base + p * bar_height + 0.22, number(p), fontsize=SMALL,
                    ha="center", va="center", gid=f"p:{t + 1}:{TOKENS[v]}")  # fmt: skip
            ax.text(x + bar_width / 2, base - 0.3, TOKENS[v], fontsize=FONT, family=CODE, ha="center", va="center",
                    weight="bold" if chosen else "normal")  # fmt: skip
        factors.append(number(step["probs"][step["chosen"]]))
    product = " × ".join(factors)
    ax.text(0.2, -0.45, f"p({values['sequence']}) = {product}", fontsize=FONT, va="center", gid="product")
    ax.text(0.2, -1.15, f"= {number(values['p'])}", fontsize=FONT, va="center", gid="p:sequence")
    ax.text(10.2, -1.15, "orange: the token appended", fontsize=SMALL, ha="right", va="center")
    return fig


FILTER_TOKENS = ["a", "b", "c", "d", "e"]
FILTER_PROBS = [0.42, 0.25, 0.15, 0.1, 0.08]  # this diagram's own next-token distribution
FILTER_SETTINGS = (  # (panel title, filter): each panel reshapes the same logits with the package's filter
    ("as the model gives it", None),
    ("temperature τ = 0.5", ("temperature", 0.5)),
    ("top-k, k = 2", ("top_k", 2)),
    ("top-p, p = 0.7", ("top_p", 0.7)),
)


def filtered(setting: tuple[str, float] | None, probs: list[float] = FILTER_PROBS) -> list[float]:
    """Return the distribution after one of the package's filters (None: unfiltered), as the softmax of its logits."""
    from inferlab.decoding.sampling import apply_temperature, top_k_filter, top_p_filter

    logits = torch.tensor(probs, dtype=torch.float64).log()
    if setting is not None:
        name, value = setting
        apply = {"temperature": apply_temperature, "top_k": top_k_filter, "top_p": top_p_filter}[name]
        logits = apply(logits, value)
    return logits.softmax(-1).tolist()


def sampling_filters():
    """Return one small distribution four ways: unfiltered, sharpened by temperature, cut by top-k and by top-p."""
    fig, ax = new_figure(5.2, 5.4, (0, 10.4), (-0.6, 10.2))
    bar_width, bar_gap, bar_height = 0.62, 0.22, 3.0  # bar height 3.0 is probability 1
    for panel, (title, setting) in enumerate(FILTER_SETTINGS):
        left = 0.2 + 5.1 * (panel % 2)
        base = 6.2 - 5.0 * (panel // 2)
        name = setting[0] if setting else "none"
        ax.text(left, base + 3.35, title, fontsize=FONT, weight="bold", va="center")
        for v, p in enumerate(filtered(setting)):
            x = left + v * (bar_width + bar_gap)
            kept = p > 0
            if kept:
                box(ax, x, base, bar_width, p * bar_height, BLUE_FILL, BLUE).set_gid(f"bar:{name}:{FILTER_TOKENS[v]}")
            else:  # ruled out: the filter set its logit to -inf, so the softmax gives it exactly 0
                box(ax, x, base, bar_width, 0.12, "white", PALE).set_gid(f"cut:{name}:{FILTER_TOKENS[v]}")
            ax.text(x + bar_width / 2, base + p * bar_height + 0.28, f"{p:.2f}", fontsize=SMALL, rotation=90,
                    ha="center", va="bottom", color=INK if kept else GREY, gid=f"p:{name}:{FILTER_TOKENS[v]}")  # fmt: skip
            ax.text(x + bar_width / 2, base - 0.35, FILTER_TOKENS[v], fontsize=FONT, family=CODE,
                    ha="center", va="center")  # fmt: skip
    ax.text(0.3, -0.35, "pale: ruled out (probability 0)", fontsize=SMALL, va="center", color=GREY)
    return fig


DIAGRAMS.update({"autoregressive_loop": autoregressive_loop, "sampling_filters": sampling_filters})
