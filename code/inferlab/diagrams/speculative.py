"""Speculative-decoding diagrams: one draft-verify-accept round, a token tree and its mask, a round by hand.

The round is not staged: its drafts are drawn by the package's ``sample_token`` from the draft's
distributions below, and ``verify_drafts`` decides what is kept, under a fixed seed. The tree is
built by ``draft_tree`` from a small draft model over a few words, and its mask is
``tree_attention_mask``. Cells and boxes a test needs to find carry a ``gid`` (``accept:2:kept``,
``mask:3:4:ancestor``), so a test reads the drawing itself.

Three more: ``tokens_per_round`` (Leviathan et al.'s Equation (1) term by term, from
``expected_tokens_per_step``), ``prompt_lookup_match`` (what ``find_draft`` compared and copied,
read from the slices it took) and ``merged_token_tree`` (SpecInfer's merge-based builder).
"""

from __future__ import annotations

from fractions import Fraction

import torch

from inferlab.diagrams.style import (
    BLUE,
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
from inferlab.speculative.tree import TreeModel, TreeNode, draft_tree, path_to, tree_attention_mask

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


# ------------------------------------------------------------------ more guide pages (issue 17)

# ---- how many tokens a round yields (speedup): Leviathan et al.'s Equation (1), term by term

ROUNDS_ALPHA = 0.75  # this diagram's own acceptance rate
ROUNDS_GAMMAS = range(1, 9)


def round_terms(alpha: float = ROUNDS_ALPHA, gamma: int = 1) -> list[float]:
    """Return the terms of 1 + alpha + ... + alpha^gamma: the target's own token, then each draft's chance to count."""
    return [alpha**j for j in range(gamma + 1)]  # draft j counts only if drafts 1..j are all accepted


def tokens_per_round():
    """Return stacked bars of the expected tokens per round for gamma = 1..8, one segment per term, and the limit."""
    from inferlab.speculative.formulas import expected_tokens_per_step

    alpha = ROUNDS_ALPHA
    limit = 1 / (1 - alpha)
    fig, ax = new_figure(5.2, 4.9, (0, 10.4), (-3.0, 6.8))
    unit, left, width, gap = 1.3, 1.25, 0.8, 0.3  # height of one token; bars
    for i, gamma in enumerate(ROUNDS_GAMMAS):
        x = left + i * (width + gap)
        bottom = 0.0
        for j, term in enumerate(round_terms(alpha, gamma)):
            face, edge = (YELLOW_FILL, YELLOW) if j == 0 else (GREEN_FILL, GREEN)
            box(ax, x, bottom, width, term * unit, face, edge).set_gid(f"term:{gamma}:{j}")
            bottom += term * unit
        total = expected_tokens_per_step(alpha, gamma)
        ax.text(x + width / 2, -0.4, str(gamma), fontsize=FONT, ha="center", va="center")
        ax.text(x + width / 2, -1.05, f"{total:.2f}", fontsize=SMALL, ha="center", va="center", gid=f"total:{gamma}")
    ax.text(left - 0.2, -0.4, "γ", fontsize=FONT, ha="right", va="center")
    ax.text(left - 0.2, -1.05, "sum", fontsize=SMALL, ha="right", va="center")
    ax.plot([left - 0.2, x + width + 0.2], [limit * unit] * 2, color=INK, linestyle="--", linewidth=1.5, gid="limit")
    ax.text(left, limit * unit + 0.4, f"limit 1/(1 − α) = {limit:g}", fontsize=SMALL, va="center")
    ax.text(0.1, 6.4, f"α = {alpha}", fontsize=FONT, weight="bold", va="center")
    legend = (
        (YELLOW_FILL, YELLOW, "the target's own token: 1"),
        (GREEN_FILL, GREEN, r"draft $j$: counts with chance $\alpha^j$"),
    )
    for i, (face, edge, text) in enumerate(legend):
        y = -1.85 - 0.65 * i
        box(ax, 0.3, y - 0.2, 0.4, 0.4, face, edge)
        ax.text(0.95, y, text, fontsize=SMALL, va="center")
    return fig


# ---- prompt lookup: where find_draft looked, read from the slices it took

LOOKUP_TEXT = "for x in xs : print ( x ) for y in xs :".split()
LOOKUP_NGRAM, LOOKUP_DRAFT = 3, 4


class SliceLog(list):
    """A list of token ids that notes every slice taken of it, so a drawing can show what was compared."""

    def __init__(self, items):
        super().__init__(items)
        self.slices: list[range] = []

    def __getitem__(self, index):
        if isinstance(index, slice):
            self.slices.append(range(*index.indices(len(self))))
        return super().__getitem__(index)


def lookup_values(words: list[str] = LOOKUP_TEXT, max_ngram: int = LOOKUP_NGRAM, num_draft: int = LOOKUP_DRAFT):
    """Return find_draft's draft for ``words`` and the positions of the tail, the earlier match and the copy."""
    from inferlab.speculative.prompt_lookup import find_draft

    vocab = sorted(set(words))
    tokens = SliceLog([vocab.index(w) for w in words])
    draft = find_draft(tokens, max_ngram, num_draft)
    if not draft:
        raise ValueError(f"words must repeat their last token somewhere earlier, got {words!r}")
    copied = tokens.slices[-1]  # the last slice taken is the copy: what followed the match
    match = tokens.slices[-2]  # the comparison that succeeded, just before it
    tail = range(len(words) - len(match), len(words))
    return {"draft": [vocab[t] for t in draft], "tail": list(tail), "match": list(match), "copied": list(copied)}


def prompt_lookup_match():
    """Return the token sequence with its last n-gram, the latest earlier match, and the tokens copied as a draft."""
    values = lookup_values()
    fig, ax = new_figure(5.4, 4.3, (0, 10.8), (-1.7, 6.9))
    per_line, w, h, step = 7, 1.3, 0.8, 1.45
    for i, word in enumerate(LOOKUP_TEXT):
        if i in values["tail"]:
            face, edge, role = ORANGE_FILL, ORANGE, "tail"
        elif i in values["match"]:
            face, edge, role = BLUE_FILL, BLUE, "match"
        elif i in values["copied"]:
            face, edge, role = GREEN_FILL, GREEN, "copied"
        else:
            face, edge, role = "white", GREY, "other"
        x, y = 0.3 + (i % per_line) * step, 5.6 - (i // per_line) * 1.4
        box(ax, x, y - h / 2, w, h, face, edge).set_gid(f"token:{i + 1}:{word}:{role}")
        ax.text(x + w / 2, y, word, fontsize=FONT, family=CODE, ha="center", va="center")
    ax.text(0.3, 2.75, "draft for the next tokens:", fontsize=FONT, va="center")
    for j, word in enumerate(values["draft"]):
        x = 0.3 + j * step
        box(ax, x, 1.6, w, h, GREEN_FILL, GREEN).set_gid(f"draft:{j + 1}:{word}")
        ax.text(x + w / 2, 2.0, word, fontsize=FONT, family=CODE, ha="center", va="center")
    legend = (
        (ORANGE_FILL, ORANGE, f"the last {len(values['tail'])} tokens"),
        (BLUE_FILL, BLUE, "their latest earlier occurrence"),
        (GREEN_FILL, GREEN, "what followed it: copied"),
    )
    for i, (face, edge, text) in enumerate(legend):
        y = 0.75 - 0.75 * i
        box(ax, 0.3, y - 0.22, 0.44, 0.44, face, edge)
        ax.text(1.0, y, text, fontsize=SMALL, va="center")
    return fig


# ---- SpecInfer's merge-based builder (papers): several proposals, one tree

MERGE_PREFIX = ["the", "cat"]
MERGE_PROPOSALS = [["sat", "on", "the"], ["sat", "on", "a"], ["ran", "away"]]  # three small models' guesses


def merge_proposals(proposals: list[list[int]]) -> list[TreeNode]:
    """Return one token tree holding every proposal as a root path; equal prefixes share their nodes."""
    nodes: list[TreeNode] = []
    child: dict[tuple[int, int], int] = {}  # (parent index, token) -> node index
    for sequence in proposals:
        parent = -1
        for depth, token in enumerate(sequence, 1):
            if (parent, token) not in child:  # this prefix was not proposed before: a new branch
                child[parent, token] = len(nodes)
                nodes.append(TreeNode(token, parent, depth))
            parent = child[parent, token]
    return nodes


def merged_values(proposals: list[list[str]] = MERGE_PROPOSALS) -> dict:
    """Return the merged tree of ``proposals`` (words) and, for each node, which proposals pass through it."""
    vocab = sorted({w for p in proposals for w in p})
    nodes = merge_proposals([[vocab.index(w) for w in p] for p in proposals])
    models = []
    for i in range(len(nodes)):
        path = [vocab[t] for t in path_to(nodes, i)]
        models.append([m + 1 for m, p in enumerate(proposals) if p[: len(path)] == path])
    return {"nodes": nodes, "words": [vocab[n.token] for n in nodes], "models": models}


def merged_token_tree():
    """Return three models' proposals (top) and the one tree SpecInfer's merge-based builder makes of them."""
    values = merged_values()
    nodes, words, models = values["nodes"], values["words"], values["models"]
    fig, ax = new_figure(5.4, 5.5, (0, 10.8), (1.8, 12.5))
    w, h = 1.5, 0.75
    for m, proposal in enumerate(MERGE_PROPOSALS):  # the proposals, one row per small model
        y = 11.9 - 1.0 * m
        ax.text(0.2, y, f"model {m + 1}", fontsize=FONT, va="center")
        for j, word in enumerate(proposal):
            box(ax, 2.6 + j * 1.7, y - h / 2, w, h, BLUE_FILL)
            ax.text(2.6 + j * 1.7 + w / 2, y, word, fontsize=FONT, family=CODE, ha="center", va="center")
    proposed = sum(len(p) for p in MERGE_PROPOSALS)
    ax.text(0.2, 8.4, f"merged: {len(nodes)} nodes for {proposed} proposed tokens", fontsize=FONT,
            weight="bold", va="center", gid="merged")  # fmt: skip
    depth_x = {1: 3.6, 2: 6.0, 3: 8.4}
    leaves = [i for i in range(len(nodes)) if not any(n.parent == i for n in nodes)]
    y_of = {}
    for rank, i in enumerate(leaves):  # nodes come in proposal order, so branches do not cross
        y_of[i] = 6.9 - 1.6 * rank
    for depth in sorted({n.depth for n in nodes}, reverse=True):
        for i, node in enumerate(nodes):
            if node.depth == depth and i not in y_of:
                kids = [y_of[c] for c, n in enumerate(nodes) if n.parent == i]
                y_of[i] = sum(kids) / len(kids)
    roots = [y_of[i] for i, n in enumerate(nodes) if n.parent == -1]
    root_y = sum(roots) / len(roots)
    box(ax, 0.2, root_y - h / 2, 2.1, h, "white")
    ax.text(1.25, root_y, " ".join(MERGE_PREFIX), fontsize=FONT, family=CODE, ha="center", va="center")
    for i, node in enumerate(nodes):
        x, y = depth_x[node.depth], y_of[i]
        px, py = (2.3, root_y) if node.parent == -1 else (depth_x[node.depth - 1] + w / 2, y_of[node.parent])
        ax.plot([px, x - w / 2], [py, y], color=INK, linewidth=1.5, zorder=1)
        shared = len(models[i]) > 1
        box(ax, x - w / 2, y - h / 2, w, h, GREEN_FILL if shared else "white", zorder=2).set_gid(
            f"node:{i + 1}:{words[i]}:{node.parent + 1}:{','.join(map(str, models[i]))}"
        )
        ax.text(x, y, words[i], fontsize=FONT, family=CODE, ha="center", va="center", zorder=3)
        ax.text(x, y - h / 2 - 0.3, "+".join(map(str, models[i])), fontsize=SMALL, color=GREY, ha="center",
                va="center")  # fmt: skip
    box(ax, 0.2, 2.0, 0.44, 0.44, GREEN_FILL)
    ax.text(0.85, 2.22, "shared by several models (numbers below)", fontsize=SMALL, va="center")
    return fig


DIAGRAMS.update(
    {
        "tokens_per_round": tokens_per_round,
        "prompt_lookup_match": prompt_lookup_match,
        "merged_token_tree": merged_token_tree,
    }
)
