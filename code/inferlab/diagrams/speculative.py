"""Speculative-decoding diagrams: one draft-verify-accept round, a token tree and its mask, a round by hand.

The round is not staged: its drafts are drawn by the package's ``sample_token`` from the draft's
distributions below, and ``verify_drafts`` decides what is kept, under a fixed seed. The tree is
built by ``draft_tree`` from a small draft model over a few words, and its mask is
``tree_attention_mask``. Cells and boxes a test needs to find carry a ``gid`` (``accept:2:kept``,
``mask:3:4:ancestor``), so a test reads the drawing itself.
"""

from __future__ import annotations

from fractions import Fraction

import torch

from inferlab.diagrams.style import (
    BLUE_FILL,
    CODE,
    FONT,
    GREEN,
    GREEN_FILL,
    GREY,
    INK,
    ORANGE,
    ORANGE_FILL,
    PALE,
    SMALL,
    YELLOW,
    YELLOW_FILL,
    arrow,
    box,
    new_figure,
)
from inferlab.speculative.sampler import sample_token, verify_drafts
from inferlab.speculative.tree import TreeModel, draft_tree, tree_attention_mask

# ------------------------------------------------------------------ one round (draft-verify-accept)

ROUND_TOKENS = ["a", "b", "c", "d"]
ROUND_GAMMA = 3
# The draft's distribution q_i and the target's p_i at each drafted position, and the target's row
# after the last draft (p_4, for the bonus token). Row 1 is the worked example's p and q.
ROUND_Q = [[0.3, 0.2, 0.25, 0.25], [0.5, 0.2, 0.2, 0.1], [0.1, 0.6, 0.2, 0.1]]
ROUND_P = [[0.45, 0.3, 0.1, 0.15], [0.6, 0.2, 0.1, 0.1], [0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.25, 0.25]]
ROUND_SEED = 15  # a round that keeps two drafts and rejects the third: every case but the bonus shows


def round_values(seed: int = ROUND_SEED) -> dict:
    """Return one speculative round on ROUND_P/ROUND_Q: the drafts, min(1, p/q) for each, and what is kept."""
    p_rows = torch.tensor(ROUND_P, dtype=torch.float64)
    q_rows = torch.tensor(ROUND_Q, dtype=torch.float64)
    generator = torch.Generator().manual_seed(seed)
    drafts = [sample_token(q_rows[i], generator) for i in range(ROUND_GAMMA)]  # the draft proposes, one by one
    kept, accepted, _ = verify_drafts(p_rows, q_rows, drafts, generator)  # one target pass decides
    ratios = [min(1.0, float(p_rows[i, d] / q_rows[i, d])) for i, d in enumerate(drafts)]
    return {"drafts": drafts, "ratios": ratios, "kept": kept, "accepted": accepted}


def draft_verify_round():
    """Return one round, time running down: gamma draft steps, one target pass, accept/reject, the output."""
    values = round_values()
    drafts, ratios, kept, accepted = values["drafts"], values["ratios"], values["kept"], values["accepted"]
    fig, ax = new_figure(5.6, 5.5, (0, 11.2), (-0.9, 10.1))
    xs = [4.6 + 1.75 * i for i in range(ROUND_GAMMA + 1)]
    w, h = 1.5, 1.05
    lanes = (
        ("draft model:\none token per call", 8.9),
        ("target model:\none call", 6.6),
        ("keep with\nmin(1, p/q)", 4.3),
        ("output", 2.0),
    )
    for label, y in lanes:
        ax.text(0.15, y, label, fontsize=SMALL, va="center")
    for i, token in enumerate(drafts):  # 1. draft: gamma calls, one after another
        box(ax, xs[i] - w / 2, 8.9 - h / 2, w, h, BLUE_FILL).set_gid(f"draft:{i + 1}:{ROUND_TOKENS[token]}")
        ax.text(xs[i], 8.9, f"d{i + 1} = {ROUND_TOKENS[token]}", fontsize=FONT, ha="center", va="center")
        if i:
            arrow(ax, (xs[i - 1] + w / 2, 8.9), (xs[i] - w / 2, 8.9), color=GREY)
    # 2. verify: one call scores every draft and the position after them.
    box(ax, xs[0] - w / 2, 6.6 - h / 2, xs[-1] - xs[0] + w, h, "white")
    for i in range(ROUND_GAMMA + 1):
        ax.text(xs[i], 6.6, f"p{i + 1}", fontsize=FONT, ha="center", va="center")
        if i < ROUND_GAMMA:
            arrow(ax, (xs[i], 8.9 - h / 2), (xs[i], 6.6 + h / 2), color=GREY)
    # 3. accept or reject, in order, until the first rejection.
    for i, ratio in enumerate(ratios):
        if i > accepted:
            break
        keep = i < accepted
        face, edge, mark = (GREEN_FILL, GREEN, "✓") if keep else (ORANGE_FILL, ORANGE, "✗")
        box(ax, xs[i] - w / 2, 4.3 - h / 2, w, h, face, edge).set_gid(
            f"accept:{i + 1}:{'kept' if keep else 'rejected'}"
        )
        ax.text(xs[i], 4.3, f"{ratio:.2g} {mark}", fontsize=FONT, ha="center", va="center")
    # 4. the output: the kept drafts, then a residual draw (after a rejection) or the bonus token.
    for i, token in enumerate(kept):
        last = i == len(kept) - 1
        face, edge = (YELLOW_FILL, YELLOW) if last else (GREEN_FILL, GREEN)
        box(ax, xs[i] - w / 2, 2.0 - h / 2, w, h, face, edge).set_gid(f"output:{i + 1}:{ROUND_TOKENS[token]}")
        ax.text(
            xs[i], 2.0, ROUND_TOKENS[token], fontsize=FONT + 2, family=CODE, weight="bold", ha="center", va="center"
        )
    if accepted < ROUND_GAMMA:  # the bonus token's place: used only when every draft is kept
        bonus = xs[ROUND_GAMMA]
        box(ax, bonus - w / 2, 2.0 - h / 2, w, h, "white", GREY, linestyle="--")
        ax.text(bonus, 2.0, "bonus", fontsize=SMALL, color=GREY, ha="center", va="center")
    ax.annotate("", xy=(3.6, 1.3), xytext=(3.6, 9.5), arrowprops={"arrowstyle": "-|>", "color": GREY, "linewidth": 1.2})
    ax.text(3.6, 9.75, "time", fontsize=SMALL, color=GREY, ha="center")
    notes = (
        (YELLOW_FILL, YELLOW, "-", r"drawn from $\mathrm{norm}(\max(0, p - q))$"),
        ("white", GREY, "--", "bonus: drawn from p4 if all drafts are kept"),
    )
    for i, (face, edge, style, text) in enumerate(notes):
        y = 0.45 - 0.8 * i
        box(ax, 0.3, y - 0.25, 0.6, 0.5, face, edge, linestyle=style)
        ax.text(1.15, y, text, fontsize=SMALL, va="center")
    return fig


# ------------------------------------------------------------------ a token tree and its mask (token-trees)

TREE_WORDS = ["the", "cat", "sat", "ran", "on", "down", "away", "off"]
TREE_PREFIX = ["the", "cat"]
TREE_BRANCHING = (2, 2)
# The draft's next-word probabilities after each word (a first-order table: only the last word counts).
TREE_DRAFT = {
    "cat": {"sat": 0.5, "ran": 0.3},
    "sat": {"on": 0.5, "down": 0.3},
    "ran": {"away": 0.4, "off": 0.35},
}


def tree_draft_logits(ids: torch.Tensor) -> torch.Tensor:
    """Return the small draft's logits, (batch, length, words): log-probabilities of the next word after each word."""
    table = torch.full((len(TREE_WORDS), len(TREE_WORDS)), 0.02)
    for word, following in TREE_DRAFT.items():
        for nxt, p in following.items():
            table[TREE_WORDS.index(word), TREE_WORDS.index(nxt)] = p
    return table.log_softmax(-1)[ids]


def tree_values() -> dict:
    """Return the token tree the draft builds after TREE_PREFIX with TREE_BRANCHING, and its attention mask."""
    ids = torch.tensor([[TREE_WORDS.index(w) for w in TREE_PREFIX]])
    nodes = draft_tree(TreeModel(tree_draft_logits, "draft"), ids, TREE_BRANCHING)
    return {"nodes": nodes, "mask": tree_attention_mask(len(TREE_PREFIX), nodes)}


def token_tree_mask():
    """Return the token tree (top) and its attention mask (bottom): each node sees the prefix and its own branch."""
    values = tree_values()
    nodes, mask = values["nodes"], values["mask"]
    prefix = len(TREE_PREFIX)
    fig, ax = new_figure(5.4, 7.1, (0, 10.8), (-0.6, 13.6))
    # The tree: the prefix, then one column per depth; node i is labelled with its row number in the mask.
    w, h = 1.5, 0.8
    depth_x = {0: 2.6, 1: 5.4, 2: 8.4}
    leaves = [i for i, n in enumerate(nodes) if n.depth == max(n.depth for n in nodes)]
    y_of = {i: 12.0 - 1.05 * rank for rank, i in enumerate(leaves)}
    for depth in range(max(n.depth for n in nodes) - 1, 0, -1):
        for i, node in enumerate(nodes):
            if node.depth == depth:
                children = [y_of[c] for c, n in enumerate(nodes) if n.parent == i]
                y_of[i] = sum(children) / len(children)
    root_y = sum(y_of[i] for i, n in enumerate(nodes) if n.depth == 1) / TREE_BRANCHING[0]
    ax.text(1.55, 13.25, "prefix", fontsize=SMALL, color=GREY, ha="center")
    for d in sorted({n.depth for n in nodes}):
        ax.text(depth_x[d], 13.25, f"depth {d}", fontsize=SMALL, color=GREY, ha="center")
    for j, word in enumerate(TREE_PREFIX):
        x = 0.8 + 1.5 * j
        box(ax, x - 0.65, root_y - h / 2, 1.3, h, BLUE_FILL)
        ax.text(x, root_y, word, fontsize=FONT, family=CODE, ha="center", va="center")
    for i, node in enumerate(nodes):
        x, y = depth_x[node.depth], y_of[i]
        px, py = (
            (0.8 + 1.5 * (prefix - 1), root_y) if node.parent == -1 else (depth_x[node.depth - 1], y_of[node.parent])
        )
        ax.plot([px + 0.7, x - w / 2], [py, y], color=INK, linewidth=1.5, zorder=1)
        box(ax, x - w / 2, y - h / 2, w, h, "white", zorder=2).set_gid(
            f"node:{i + 1}:{TREE_WORDS[node.token]}:{node.parent + 1}"
        )
        ax.text(x - w / 2 - 0.1, y + h / 2, str(i + 1), fontsize=SMALL, color=GREY, ha="right", va="center")
        ax.text(x, y, TREE_WORDS[node.token], fontsize=FONT, family=CODE, ha="center", va="center", zorder=3)
    # The mask: one row per node (a query), one column per key: the prefix's, then the nodes'.
    cell, left, top = 0.85, 3.3, 6.9
    ax.text(left - 0.15, top + 0.4, "key →", fontsize=SMALL, color=GREY, ha="right", va="center")
    ax.text(0.2, top + 0.4, "query ↓", fontsize=SMALL, color=GREY, va="center")
    for j in range(mask.shape[1]):
        label, family = (TREE_PREFIX[j], CODE) if j < prefix else (str(j - prefix + 1), None)
        ax.text(left + (j + 0.5) * cell, top + 0.4, label, fontsize=SMALL, family=family, ha="center", va="center")
    for i in range(mask.shape[0]):
        y = top - (i + 0.5) * cell
        ax.text(left - 1.4, y, str(i + 1), fontsize=SMALL, color=GREY, ha="right", va="center")
        ax.text(left - 0.15, y, TREE_WORDS[nodes[i].token], fontsize=SMALL, family=CODE, ha="right", va="center")
        for j in range(mask.shape[1]):
            if not mask[i, j]:
                face, edge, kind = "white", PALE, "hidden"
            elif j < prefix:
                face, edge, kind = BLUE_FILL, INK, "prefix"
            else:
                face, edge, kind = GREEN_FILL, INK, "branch"
            patch = box(ax, left + j * cell + 0.04, top - (i + 1) * cell + 0.04, cell - 0.08, cell - 0.08, face, edge)
            patch.set_gid(f"mask:{i + 1}:{j + 1}:{kind}")
    legend = (
        (BLUE_FILL, INK, "the shared prefix"),
        (GREEN_FILL, INK, "the node and its ancestors"),
        ("white", PALE, "hidden: other branches"),
    )
    for i, (face, edge, text) in enumerate(legend):
        y = 1.25 - 0.62 * i
        box(ax, 0.3, y - 0.22, 0.44, 0.44, face, edge)
        ax.text(1.0, y, text, fontsize=SMALL, va="center")
    return fig


DIAGRAMS = {"draft_verify_round": draft_verify_round, "token_tree_mask": token_tree_mask}


# ------------------------------------------------------------------ worked example: one position by hand

# The site's own p and q over four tokens, chosen so that every step is pencil arithmetic.
WORKED_P = ["0.45", "0.3", "0.1", "0.15"]  # the target
WORKED_Q = ["0.3", "0.2", "0.25", "0.25"]  # the draft: proposes c and d too often, a and b too rarely


def vector(values: list[Fraction]) -> str:
    """Return exact fractions as the page writes a distribution: (0.6, 0.4, 0, 0)."""
    return "(" + ", ".join(f"{float(v):g}" for v in values) + ")"


def check_distribution(texts: list[str], name: str) -> list[Fraction]:
    """Return exact probabilities from decimal strings, or raise ValueError unless they are a distribution over a-d."""
    if not isinstance(texts, (list, tuple)) or len(texts) != len(ROUND_TOKENS):
        raise ValueError(
            f"{name} must list {len(ROUND_TOKENS)} probabilities as strings (one per token), got {texts!r}"
        )
    try:
        values = [Fraction(text) for text in texts]
    except (TypeError, ValueError, ZeroDivisionError):
        raise ValueError(f"{name} must hold decimal strings such as '0.25', got {texts!r}") from None
    if any(v < 0 for v in values) or sum(values) != 1:
        raise ValueError(f"{name} must be non-negative and sum to exactly 1, got {texts!r}")
    return values


def one_position_by_hand(p_text: list[str] = WORKED_P, q_text: list[str] = WORKED_Q) -> dict:
    """Return every number of one accept-or-resample step, in exact arithmetic: per token and in total.

    The draft proposes v with probability q(v) and the rule keeps it with probability min(1, p(v)/q(v));
    a rejection draws from the residual norm(max(0, p - q)). The last column adds the two ways each
    token can come out.
    """
    p, q = check_distribution(p_text, "p_text"), check_distribution(q_text, "q_text")
    if p == q:
        raise ValueError("p_text and q_text must differ: the example shows what happens after a rejection")
    kept = [min(pv, qv) for pv, qv in zip(p, q, strict=True)]  # q(v) * min(1, p(v)/q(v))
    accept = sum(kept)
    reject = 1 - accept
    missing = [pv - k for pv, k in zip(p, kept, strict=True)]  # max(0, p - q)
    residual = [m / reject for m in missing]
    output = [k + reject * r for k, r in zip(kept, residual, strict=True)]
    rows = []
    for v, name in enumerate(ROUND_TOKENS):
        rows.append(
            {
                "token": name,
                "target p(v)": float(p[v]),
                "draft q(v)": float(q[v]),
                "min(1, p/q)": float(min(1, p[v] / q[v])),
                "proposed and kept": float(kept[v]),
                "thrown away": float(q[v] - kept[v]),
                "still missing": float(missing[v]),
                "comes out": f"{float(kept[v]):g} + {float(reject):g} × {float(residual[v]):g} = {float(output[v]):g}",
            }
        )
    return {
        "p": vector(p),
        "q": vector(q),
        "rows": rows,
        "accept": float(accept),
        "reject": float(reject),
        "thrown_total": float(sum(qv - k for qv, k in zip(q, kept, strict=True))),
        "missing": vector(missing),
        "residual": vector(residual),
        "output": vector(output),
        "output_equals_p": output == p,
    }


def round_summary(seed: int = ROUND_SEED) -> dict:
    """Return the drawn round of ``draft_verify_round`` in the words a page uses: drafts, probabilities, outcome."""
    values = round_values(seed)
    accepted, names = values["accepted"], [ROUND_TOKENS[t] for t in values["kept"]]
    return {
        "gamma": ROUND_GAMMA,
        "drafts": " ".join(ROUND_TOKENS[t] for t in values["drafts"]),
        "keep_probabilities": ", ".join(f"{r:.2g}" for r in values["ratios"][: accepted + 1]),
        "accepted": accepted,
        "rejected_at": accepted + 1 if accepted < ROUND_GAMMA else 0,  # 0: every draft kept
        "last_token": names[-1],  # the residual draw, or the bonus token when every draft was kept
        "output": " ".join(names),
    }


def worked_values() -> dict:
    """Return the draft-verify-accept page's worked numbers: one position by hand, and the drawn round."""
    return one_position_by_hand() | {"round": round_summary()}


WORKED = {"speculative_worked_round": worked_values}
