"""The diagrams and the worked example of the remaining guide pages (issue 17), against independent references.

Each drawing is read back through the gids and texts of its artists and compared with something
computed another way: the model's tables by the chain rule, the closed forms of temperature, top-k
and top-p, the FLOPs of a matrix product (2 T n m), the expectation of a round summed over where it
ends, a brute-force n-gram search, a brute-force set of prefixes, Dao et al.'s Algorithm 0 counts,
a coverage count over the launch grid, equality of token prefixes, and the cost model by hand.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import matplotlib
import pytest
import torch

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from inferlab import diagrams  # noqa: E402
from inferlab.diagrams import decoding as decoding_diagrams  # noqa: E402
from inferlab.diagrams import flash as flash_diagrams  # noqa: E402
from inferlab.diagrams import kvcache as kvcache_diagrams  # noqa: E402
from inferlab.diagrams import paged as paged_diagrams  # noqa: E402
from inferlab.diagrams import speculative as speculative_diagrams  # noqa: E402
from inferlab.diagrams import style  # noqa: E402

DOCS = Path(__file__).resolve().parents[1] / "docs"
NEW = [
    ("decoding", "autoregressive_loop"),
    ("decoding", "sampling_filters"),
    ("kvcache", "prefill_vs_decode"),
    ("speculative", "tokens_per_round"),
    ("speculative", "prompt_lookup_match"),
    ("speculative", "merged_token_tree"),
    ("flash", "standard_round_trips"),
    ("flash", "traffic_by_tensor"),
    ("flash", "triton_grid"),
    ("paged", "one_space"),
]


@pytest.fixture(scope="module")
def drawn():
    """Draw each diagram once for the whole module (the text and the gids are what is checked)."""
    figures = {(topic, name): diagrams.diagrams(topic)[name]() for topic, name in NEW}
    yield figures
    for fig in figures.values():
        plt.close(fig)


def with_gid(fig, prefix: str) -> dict[str, object]:
    """Return {gid: artist} for the artists whose gid starts with ``prefix``."""
    return {a.get_gid(): a for a in fig.findobj() if a.get_gid() and a.get_gid().startswith(prefix)}


def texts(fig) -> list[str]:
    return [t.get_text() for t in fig.findobj(Text) if t.get_text().strip()]


@pytest.mark.parametrize("topic, name", NEW)
def test_readable_on_a_phone(drawn, topic, name):
    fig = drawn[topic, name]
    fig.canvas.draw()
    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_text().strip() and t.get_visible()]
    assert min(sizes) >= style.SMALL, f"{name}: text under {style.SMALL} pt is unreadable at 390 px"
    assert fig.get_figwidth() <= 5.5, f"{name}: wider than a phone shows at a readable size"
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    for text in fig.findobj(Text):  # nothing cut off at the edges
        if text.get_text().strip() and text.get_visible():
            extent = text.get_window_extent(renderer)
            assert extent.x0 >= box.x0 - 1 and extent.x1 <= box.x1 + 1, f"{name}: {text.get_text()!r} runs off"


# ---- decoding: the loop is the chain rule over the tables; the filters are their closed forms ------


def test_the_loop_shows_the_tables_and_the_chain_rules_product(drawn):
    from inferlab.decoding.examples import NEXT, START, TOKENS

    fig = drawn["decoding", "autoregressive_loop"]
    shown = {gid: float(t.get_text()) for gid, t in with_gid(fig, "p:").items() if gid != "p:sequence"}
    tokens = decoding_diagrams.LOOP_TOKENS
    rows = [START] + [NEXT[previous] for previous in tokens[:-1]]  # the first-order model, by hand
    for t, row in enumerate(rows, 1):
        for v, name in enumerate(TOKENS):
            assert shown[f"p:{t}:{name}"] == pytest.approx(row[v], rel=1e-3)
    chosen = sorted(gid.split(":")[1:3] for gid in with_gid(fig, "bar:") if gid.endswith(":chosen"))
    assert chosen == [[str(t), TOKENS[x]] for t, x in enumerate(tokens, 1)]
    product = math.prod(row[x] for row, x in zip(rows, tokens, strict=True))
    assert float(with_gid(fig, "p:sequence")["p:sequence"].get_text().lstrip("= ")) == pytest.approx(product)


def brute_force_filter(probs: list[float], name: str, value) -> list[float]:
    """Return the filtered, renormalised distribution computed from its definition."""
    if name == "none":
        return probs
    if name == "temperature":
        powered = [p ** (1 / value) for p in probs]  # softmax(log p / t) = p^(1/t) / sum
        return [p / sum(powered) for p in powered]
    ranked = sorted(range(len(probs)), key=probs.__getitem__, reverse=True)
    if name == "top_k":
        kept = set(ranked[:value])
    else:  # top_p: the fewest most probable tokens whose probabilities reach p
        kept = next(set(ranked[:n]) for n in range(1, len(probs) + 1) if sum(probs[i] for i in ranked[:n]) >= value)
    total = sum(probs[i] for i in kept)
    return [probs[i] / total if i in kept else 0.0 for i in range(len(probs))]


def test_each_filter_panel_is_its_definition(drawn):
    fig = drawn["decoding", "sampling_filters"]
    probs, tokens = decoding_diagrams.FILTER_PROBS, decoding_diagrams.FILTER_TOKENS
    kept_counts = {}
    for _, setting in decoding_diagrams.FILTER_SETTINGS:
        name, value = setting if setting else ("none", None)
        expected = brute_force_filter(probs, name, value)
        for v, token in enumerate(tokens):
            shown = float(with_gid(fig, f"p:{name}:{token}")[f"p:{name}:{token}"].get_text())
            assert shown == pytest.approx(expected[v], abs=0.005)
            kind = "bar" if expected[v] > 0 else "cut"
            assert f"{kind}:{name}:{token}" in with_gid(fig, f"{kind}:{name}:")
        kept_counts[name] = sum(p > 0 for p in expected)
    # What the sampling page says about the panels: every token stays under temperature, top-k keeps 2,
    # and top-p keeps a third token because the two most probable fall short of p.
    assert kept_counts == {"none": 5, "temperature": 5, "top_k": 2, "top_p": 3}


# ---- kvcache: one weight matrix, prefill against decode --------------------------------------------


def test_prefill_and_decode_show_2_t_n_m_flops_over_the_same_bytes(drawn):
    fig = drawn["kvcache", "prefill_vs_decode"]
    n = kvcache_diagrams.REUSE_WIDTH
    element = torch.empty((), dtype=kvcache_diagrams.REUSE_DTYPE).element_size()
    for name, tokens in (("prefill", kvcache_diagrams.REUSE_PROMPT), ("decode", 1)):
        shown = {
            gid.split(":")[0]: t.get_text()
            for gid, t in with_gid(fig, "").items()
            if gid.endswith(f":{name}") and isinstance(t, Text)
        }
        assert shown["bytes"].startswith(f"$W$: {n * n * element} bytes")
        assert shown["flops"] == f"{2 * tokens * n * n} FLOPs"  # a multiply and an add per weight per token
        assert float(shown["intensity"].split()[0]) == 2 * tokens / element  # the page's 2T/b
        assert len(with_gid(fig, f"in:{name}:")) == len(with_gid(fig, f"out:{name}:")) == tokens


# ---- speculative: a round's expectation, the n-gram match, the merged tree ------------------------


def expectation_by_cases(alpha: float, gamma: int) -> float:
    """Return E[tokens per round] summed over where the round ends: j drafts kept, then the target's token."""
    ends = sum(alpha**j * (1 - alpha) * (j + 1) for j in range(gamma))  # draft j + 1 is the first rejected
    return ends + alpha**gamma * (gamma + 1)  # every draft kept, plus the bonus token


def test_tokens_per_round_sums_to_the_expectation_over_where_a_round_ends(drawn):
    fig = drawn["speculative", "tokens_per_round"]
    alpha = speculative_diagrams.ROUNDS_ALPHA
    terms = with_gid(fig, "term:")
    totals = with_gid(fig, "total:")
    unit = terms["term:1:0"].get_height()  # the target's own token: one token
    for gamma in speculative_diagrams.ROUNDS_GAMMAS:
        heights = [terms[f"term:{gamma}:{j}"].get_height() / unit for j in range(gamma + 1)]
        assert f"term:{gamma}:{gamma + 1}" not in terms
        assert sum(heights) == pytest.approx(expectation_by_cases(alpha, gamma), rel=1e-9)
        assert heights == sorted(heights, reverse=True)  # each extra draft adds less
        assert float(totals[f"total:{gamma}"].get_text()) == pytest.approx(
            expectation_by_cases(alpha, gamma), abs=0.005
        )
    limit = with_gid(fig, "limit")["limit"].get_ydata()[0] / unit
    assert limit == pytest.approx(1 / (1 - alpha))
    assert all(expectation_by_cases(alpha, g) < limit for g in range(1, 60))


def brute_force_lookup(words: list[str], max_ngram: int, num_draft: int) -> tuple[list[int], list[int], list[str]]:
    """Return (tail, match, draft) positions by searching every n and every earlier start."""
    for n in range(max_ngram, 0, -1):
        tail = list(range(len(words) - n, len(words)))
        starts = [s for s in range(len(words) - n) if words[s : s + n] == words[-n:]]
        if starts:
            start = max(starts)  # the latest earlier occurrence
            return tail, list(range(start, start + n)), words[start + n : start + n + num_draft]
    return [], [], []


def test_the_lookup_figure_marks_the_tail_the_latest_match_and_the_copy(drawn):
    fig = drawn["speculative", "prompt_lookup_match"]
    words = speculative_diagrams.LOOKUP_TEXT
    tail, match, draft = brute_force_lookup(words, speculative_diagrams.LOOKUP_NGRAM, speculative_diagrams.LOOKUP_DRAFT)
    roles = {}
    for gid in with_gid(fig, "token:"):
        _, position, rest = gid.split(":", 2)
        word, role = rest.rsplit(":", 1)  # a token may be a colon itself
        assert words[int(position) - 1] == word
        roles[int(position) - 1] = role
    assert sorted(p for p, r in roles.items() if r == "tail") == tail
    assert sorted(p for p, r in roles.items() if r == "match") == match
    copied = sorted(p for p, r in roles.items() if r == "copied")
    assert [words[p] for p in copied] == draft == [gid.split(":", 2)[2] for gid in with_gid(fig, "draft:")]
    assert len(tail) == speculative_diagrams.LOOKUP_NGRAM  # the longest n-gram matched here


def test_lookup_values_refuses_a_sequence_with_nothing_to_copy():
    with pytest.raises(ValueError, match="repeat"):
        speculative_diagrams.lookup_values(["a", "b", "c"])


def test_the_merged_tree_holds_each_proposal_once_as_a_root_path(drawn):
    fig = drawn["speculative", "merged_token_tree"]
    proposals = speculative_diagrams.MERGE_PROPOSALS
    nodes = {}
    for gid in with_gid(fig, "node:"):
        _, index, word, parent, models = gid.split(":")
        nodes[int(index)] = (word, int(parent), [int(m) for m in models.split(",")])

    def path(index: int) -> tuple[str, ...]:
        return () if index == 0 else path(nodes[index][1]) + (nodes[index][0],)

    paths = {path(i) for i in nodes}
    prefixes = {tuple(p[:k]) for p in proposals for k in range(1, len(p) + 1)}  # brute force
    assert paths == prefixes and len(paths) == len(nodes)  # one node per distinct prefix, none twice
    for i, (_, _, models) in nodes.items():
        assert models == [m + 1 for m, p in enumerate(proposals) if tuple(p[: len(path(i))]) == path(i)]
    siblings = [(parent, word) for word, parent, _ in nodes.values()]
    assert len(siblings) == len(set(siblings))
    proposed = sum(map(len, proposals))
    assert f"merged: {len(nodes)} nodes for {proposed} proposed tokens" in texts(fig)


# ---- flash: Algorithm 0's counts, the tiled counts, the launch grid ---------------------------------


def test_the_three_passes_move_what_algorithm_0_says(drawn):
    fig = drawn["flash", "standard_round_trips"]
    n, d = flash_diagrams.ROUND_TRIP_N, flash_diagrams.ROUND_TRIP_D
    moved = {}
    for gid in with_gid(fig, "read:") | with_gid(fig, "write:"):
        kind, step, name, elements = gid.split(":")
        moved.setdefault((kind, int(step)), []).append((name, int(elements)))
    # Dao et al. (2022), Algorithm 0: S = QK^T, P = softmax(S), O = PV, each through HBM.
    assert moved == {
        ("read", 1): [("Q", n * d), ("K", n * d)],
        ("write", 1): [("S", n * n)],
        ("read", 2): [("S", n * n)],
        ("write", 2): [("P", n * n)],
        ("read", 3): [("P", n * n), ("V", n * d)],
        ("write", 3): [("O", n * d)],
    }
    total = with_gid(fig, "total")["total"].get_text()
    assert total == f"N = {n}, d = {d}: {n * (4 * d + 4 * n)} elements moved"  # the page's N(4d + 4N)


def test_traffic_by_tensor_is_algorithm_0_against_the_tiled_loop(drawn):
    fig = drawn["flash", "traffic_by_tensor"]
    n, d, b = flash_diagrams.TRAFFIC_N, flash_diagrams.TRAFFIC_D, flash_diagrams.TRAFFIC_BLOCK
    tiles = math.ceil(n / b)
    expected = {
        "standard": {"Q": n * d, "K": n * d, "V": n * d, "S": 2 * n * n, "P": 2 * n * n, "O": n * d},
        "tiled": {"Q": n * d, "K": tiles * n * d, "V": tiles * n * d, "O": n * d, "L": n},  # K, V once per Q tile
    }
    for method, counts in expected.items():
        bars = {gid.split(":")[1]: int(gid.split(":")[2]) for gid in with_gid(fig, f"{method}:")}
        assert bars == counts
        assert f"{sum(counts.values())} in all" in with_gid(fig, f"total:{method}")[f"total:{method}"].get_text()
    assert sum(expected["standard"].values()) == n * (4 * d + 4 * n)


def test_the_triton_grid_covers_every_row_of_every_head_once(drawn):
    fig = drawn["flash", "triton_grid"]
    n, heads, block = flash_diagrams.TRITON_N, flash_diagrams.TRITON_HEADS, flash_diagrams.TRITON_BLOCK
    stored, masked, ids = [], [], set()
    for gid in with_gid(fig, "program:"):
        _, tile, head, rows = gid.split(":")
        first, last = map(int, rows.split("-"))
        ids.add((int(tile), int(head)))
        stored += [(int(head), r) for r in range(first, last + 1)]
    for gid in with_gid(fig, "masked:"):
        _, tile, head, rows = gid.split(":")
        first, last = map(int, rows.split("-"))
        masked += [(int(head), r) for r in range(first, last + 1)]
    assert ids == set(itertools.product(range(math.ceil(n / block)), range(heads)))  # the launch grid
    assert sorted(stored) == [(h, r) for h in range(heads) for r in range(n)]  # every row once
    padding = math.ceil(n / block) * block - n
    assert sorted(masked) == [(h, r) for h in range(heads) for r in range(n, n + padding)]


# ---- paged: the names of one-space-apart texts; the offloading step by hand --------------------------


def test_a_block_keeps_its_name_exactly_when_every_token_up_to_it_is_the_same(drawn):
    fig = drawn["paged", "one_space"]
    values = paged_diagrams.one_space_values()
    before, after = values["before"]["ids"], values["after"]["ids"]
    size = paged_diagrams.BLOCK_SIZE
    statuses = {int(gid.split(":")[2]): gid.split(":")[3] for gid in with_gid(fig, "block:after:")}
    for block in range(len(after) // size):
        end = (block + 1) * size
        same_prefix = before[:end] == after[:end]  # what a prefix cache may reuse, by brute force
        assert statuses[block + 1] == ("same name" if same_prefix else "new name")
    assert "same name" in statuses.values() and "new name" in statuses.values()
    # The lesson of the page: a later block whose own tokens are unchanged still gets a new name.
    assert any(
        before[b * size : (b + 1) * size] == after[b * size : (b + 1) * size] and statuses[b + 1] == "new name"
        for b in range(len(after) // size)
    )
    changed = [gid for gid in with_gid(fig, "token:after:") if gid.endswith(":changed")]
    assert len(changed) == 1  # one space, one token
    for name, text in (("before", paged_diagrams.SPACE_TEXT), ("after", None)):
        shown = "".join(values[name]["tokens"]).replace("·", " ").replace("↵", "\n")
        at = paged_diagrams.SPACE_AT
        assert shown == (text or paged_diagrams.SPACE_TEXT[:at] + " " + paged_diagrams.SPACE_TEXT[at:])


def test_the_offloading_step_by_hand_is_the_cost_model_worked_out():
    values = paged_diagrams.offload_step_by_hand()
    gb = 1e9
    resident, streamed = values["rows"]
    weights, offloaded = values["weight_gb"] * gb, values["offloaded_gb"] * gb
    bandwidths = {"T4": (320e9, 15.75e9)}[values["gpu"]]  # the T4's data sheet and PCIe 3.0 x16, one way
    assert resident["read ms"] == pytest.approx(1e3 * (weights - offloaded) / bandwidths[0])
    assert streamed["read ms"] == pytest.approx(1e3 * offloaded / bandwidths[1])
    for row, part in ((resident, weights - offloaded), (streamed, offloaded)):
        flops = 2 * (part / 2) * values["batch"]  # fp16: 2 bytes per weight, 2 FLOPs per weight per token
        assert row["arithmetic ms"] == pytest.approx(1e3 * flops / (values["fp16_tflops"] * 1e12))
        assert row["time ms"] == pytest.approx(max(row["read ms"], row["arithmetic ms"]))
    assert values["step_ms"] == pytest.approx(resident["time ms"] + streamed["time ms"])
    assert values["no_offload_ms"] == pytest.approx(1e3 * weights / bandwidths[0])
    assert values["slowdown"] == pytest.approx(values["step_ms"] / values["no_offload_ms"])
    # What the page says about it: the link costs more than everything else, arithmetic does not matter.
    assert streamed["time ms"] > resident["time ms"] and max(r["arithmetic ms"] for r in values["rows"]) < 1
    assert values["offloaded_gb"] < values["weight_gb"] / 2  # "most of the weights never left the GPU"


@pytest.mark.parametrize("kwargs", [{"offloaded_gb": 2.0}, {"gpu": "nope"}, {"batch": 0}, {"weight_gb": float("nan")}])
def test_the_offloading_step_refuses_bad_input(kwargs):
    with pytest.raises(ValueError):
        paged_diagrams.offload_step_by_hand(**kwargs)


def test_the_offloading_page_shows_the_worked_numbers_before_the_curve():
    for suffix in (".md", ".zh-TW.md"):
        text = (DOCS / f"paged/offloading{suffix}").read_text(encoding="utf-8")
        assert text.index("{{table paged_worked_offload rows}}") < text.index("{{result paged_offload_model")
    stored = json.loads((DOCS / "results" / "paged_worked_offload.json").read_text(encoding="utf-8"))
    assert stored["values"]["rows"][0]["part"] == "resident on the GPU"
