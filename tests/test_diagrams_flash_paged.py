"""The flash and paged concept diagrams and the two-tile worked example (issue 17).

Each diagram must draw and save in both languages with no untranslated text, and show what the
code does: checked here against independent references (PyTorch's softmax and attention, the
FlashAttention-2 loop order, brute-force counts over the block tables, the chain of hashes).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import torch

from inferlab import diagrams
from inferlab.bench import figures, labels
from inferlab.diagrams import flash as flash_diagrams
from inferlab.diagrams import paged as paged_diagrams
from inferlab.diagrams import style
from inferlab.flash import FlashAttention, flash_attention
from inferlab.paged import hash_chain

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
WORKED = "flash_online_softmax_by_hand"

# Which page shows which diagram (both languages), before the page's first measured result.
PAGES = {
    ("flash", "tiling"): "flash/tiling",
    ("flash", "online_softmax_by_hand"): "flash/tiling",
    ("flash", "backward_recompute"): "flash/backward",
    ("flash", "fa2_warp_split"): "flash/fa2-fa3",
    ("flash", "fa3_pingpong"): "flash/fa2-fa3",
    ("paged", "block_table_refcounts"): "paged/paged-attention",
    ("paged", "hash_chain"): "paged/prefix-caching",
    # every other guide page (issue 17); their content tests are in tests/test_diagrams_guide_pages.py
    ("flash", "standard_round_trips"): "flash/memory-bound",
    ("flash", "traffic_by_tensor"): "flash/hbm-traffic",
    ("flash", "triton_grid"): "flash/triton",
    ("paged", "one_space"): "paged/invalidation",
}


@pytest.fixture(autouse=True)
def close_figures():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    yield
    plt.close("all")


def texts_of(fig) -> list[str]:
    """Return every text a figure shows, code included."""
    from matplotlib.text import Text

    fig.canvas.draw()
    return [t.get_text() for t in fig.findobj(Text) if t.get_text().strip() and t.get_visible()]


def text_artists(fig):
    from matplotlib.text import Text

    fig.canvas.draw()
    return [t for t in fig.findobj(Text) if t.get_text().strip() and t.get_visible()]


# ---- every diagram: both languages, nothing left in English, readable on a phone ----------------


def test_the_registry_lists_exactly_these_diagrams():
    listed = {(topic, name) for topic in ("flash", "paged") for name in diagrams.diagrams(topic)}
    assert listed == set(PAGES)


@pytest.mark.parametrize(("topic", "name"), sorted(PAGES))
def test_a_diagram_draws_and_saves_both_languages(tmp_path, topic, name):
    fig = diagrams.diagrams(topic)[name]()
    sizes = [t.get_fontsize() for t in text_artists(fig)]
    assert min(sizes) >= style.SMALL, f"{name}: text smaller than {style.SMALL} pt is unreadable on a phone"
    assert fig.get_figwidth() <= 5.5, f"{name}: wider than a phone shows at a readable size"
    english = [t.get_text() for t in figures.figure_texts(fig)]
    assert figures.untranslated(english, "zh-TW") == []
    paths = figures.save_figure(fig, tmp_path / f"{name}.png", dpi=60)  # low dpi: the drawing is what counts
    assert [path.name for path in paths] == [f"{name}.png", f"{name}.zh-TW.png"]
    assert paths[0].read_bytes() != paths[1].read_bytes()
    chinese = [t.get_text() for t in figures.figure_texts(fig)]  # save_figure leaves the zh-TW text in place
    assert not [text for text in chinese if labels.english_words(text)]


@pytest.mark.parametrize(("topic", "name"), sorted(PAGES))
def test_each_diagram_is_on_its_page_before_the_first_measured_result(topic, name):
    for suffix in (".md", ".zh-TW.md"):
        page = DOCS / f"{PAGES[topic, name]}{suffix}"
        text = page.read_text(encoding="utf-8")
        image = text.find(f"../figures/{topic}/{name}.png")
        assert image >= 0, f"{page.name} does not show {name}.png"
        measured = [
            match.start()
            for match in re.finditer(r"\{\{(result|table|provenance)\s+(\S+)", text)
            if match.group(2) != WORKED
        ]
        assert not measured or image < min(measured), f"{page.name}: {name}.png comes after a measured result"


# ---- tiling: the order drawn is the order the code loads the tiles ------------------------------


def test_tile_visits_follow_flash_attention_2s_loop_order():
    # Dao (2023), Algorithm 1: query tiles outside, every key/value tile inside.
    tiles = 3
    assert flash_diagrams.tile_visits(n=6, block=2) == [(i, j) for i in range(tiles) for j in range(tiles)]
    assert flash_diagrams.tile_visits(n=5, block=2) == [(i, j) for i in range(3) for j in range(3)]  # a short last tile


def test_the_tiling_figure_numbers_each_tile_by_its_place_in_the_loop():
    fig = flash_diagrams.draw_tiling()
    artists = text_artists(fig)
    labels_by_tile = {}
    for artist in artists:
        match = re.fullmatch(r"\$S_\{(\d)(\d)\}\$", artist.get_text())
        if match:
            labels_by_tile[int(match.group(1)), int(match.group(2))] = artist.get_position()
    assert len(labels_by_tile) == 9
    numbers = {a.get_position(): int(a.get_text()) for a in artists if a.get_text().isdigit()}
    for (row, col), (x, y) in labels_by_tile.items():
        above = [n for (nx, ny), n in numbers.items() if math.isclose(nx, x) and 0 < ny - y < 0.5]
        assert above == [row * 3 + col + 1], f"tile S_{row}{col}"


# ---- the worked example: the code's numbers, on the page, equal to torch.softmax ---------------


def test_the_worked_example_equals_the_ordinary_softmax():
    example = flash_diagrams.online_softmax_by_hand()
    scores = [s for tile in flash_diagrams.BY_HAND_TILES for s in tile]
    expected = torch.softmax(torch.tensor(scores, dtype=torch.float64), dim=0)
    assert torch.allclose(torch.tensor(example["output"], dtype=torch.float64), expected, atol=1e-12)
    seen = []
    previous_max = None
    for step, detail, tile in zip(example["steps"], example["details"], flash_diagrams.BY_HAND_TILES, strict=True):
        seen += tile
        running_max = max(seen)  # the maximum of everything seen so far
        assert step["running_max"] == running_max
        assert step["running_sum"] == pytest.approx(sum(math.exp(s - running_max) for s in seen), abs=1e-12)
        assert step["tile_sum"] == pytest.approx(sum(math.exp(s - running_max) for s in tile), abs=1e-12)
        if previous_max is None:
            assert step["rescale"] is None
        else:
            assert step["rescale"] == pytest.approx(math.exp(previous_max - running_max), abs=1e-12)
        unnormalised = [math.exp(s - running_max) for s in seen] + [0.0] * (len(scores) - len(seen))
        assert detail["acc"] == pytest.approx(unnormalised, abs=1e-12)  # V = I: a is the exponentials
        previous_max = running_max


def test_the_worked_example_rescales_at_least_once():
    """The example exists to show a rescale: its second tile must raise the running max."""
    steps = flash_diagrams.online_softmax_by_hand()["steps"]
    assert steps[1]["running_max"] > steps[0]["running_max"]


def assert_same(stored, computed, where="values"):
    """Assert two JSON values are equal, floats within 1e-12 (another CPU may round exp differently)."""
    if isinstance(computed, float):
        assert stored == pytest.approx(computed, abs=1e-12), where
    elif isinstance(computed, dict):
        assert set(stored) == set(computed), where
        for key in computed:
            assert_same(stored[key], computed[key], f"{where}.{key}")
    elif isinstance(computed, (list, tuple)):
        assert len(stored) == len(computed), where
        for index, (a, b) in enumerate(zip(stored, computed, strict=True)):
            assert_same(a, b, f"{where}.{index}")
    else:
        assert stored == computed, where


def test_the_result_file_holds_what_the_code_computes_now():
    """The page shows the result file; rewrite it with python -m inferlab.diagrams flash when this fails."""
    stored = json.loads((DOCS / "results" / f"{WORKED}.json").read_text(encoding="utf-8"))
    assert_same(stored["values"], flash_diagrams.online_softmax_by_hand())
    assert stored["provenance"]["command"] == "python -m inferlab.diagrams flash"


def lookup(values, key: str):
    for part in key.split("."):
        values = values[int(part)] if isinstance(values, list) else values[part]
    return values


@pytest.mark.parametrize("suffix", [".md", ".zh-TW.md"])
def test_the_page_shows_the_worked_examples_numbers(suffix):
    """Every number of the worked example on the tiling page is a marker that the code's values fill."""
    text = (DOCS / f"flash/tiling{suffix}").read_text(encoding="utf-8")
    values = json.loads(json.dumps(flash_diagrams.online_softmax_by_hand()))
    markers = re.findall(r"\{\{result " + WORKED + r" (\S+)(?: (\S+))?\}\}", text)
    assert len(markers) >= 20
    keys = {key for key, _ in markers}
    assert {"steps.1.rescale", "steps.1.running_sum", "output.2"} <= keys
    for key, spec in markers:
        assert format(lookup(values, key), spec)  # every marker names a real value of the example
    assert "{{table " + WORKED + " steps}}" in text
    rows = values["steps"]
    assert not labels.table_problems(rows)  # every column has words in both languages


def test_the_worked_figure_shows_the_code_s_running_max_and_sum():
    example = flash_diagrams.online_softmax_by_hand()
    shown = " ".join(texts_of(flash_diagrams.draw_online_softmax_by_hand()))
    scores = [s for tile in flash_diagrams.BY_HAND_TILES for s in tile]
    for tile in (1, 2):
        seen = scores[: 2 * tile]
        assert f"m_{tile} = {max(seen):g}" in shown
        assert f"\\ell_{tile} = {sum(math.exp(s - max(seen)) for s in seen):.4g}" in shown
    assert f"{math.exp(max(scores[:2]) - max(scores)):.4g}" in shown  # the rescale factor
    for value in torch.softmax(torch.tensor(scores, dtype=torch.float64), dim=0).tolist():
        assert f"{value:.4g}" in shown
    assert example["steps"][1]["rescale"] is not None


# ---- the backward: the saved tensors drawn are the ones autograd keeps -------------------------


def test_the_backward_figure_draws_what_autograd_saves():
    n, d = 6, 4
    q, k, v = (torch.randn(n, d, dtype=torch.float64, requires_grad=True) for _ in range(3))
    shapes = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: shapes.append(tuple(t.shape)) or t, lambda t: t):
        FlashAttention.apply(q, k, v)
    assert sorted(shapes) == sorted(shape for _, shape in flash_diagrams.saved_by_forward(n, d))
    assert sum(math.prod(shape) for shape in shapes) == 4 * n * d + n  # Q, K, V, O and L: no N x N matrix
    assert [name for name, _ in flash_diagrams.saved_by_forward(n, d)] == ["Q", "K", "V", "O", "L"]
    shown = texts_of(flash_diagrams.draw_backward_recompute())
    for name in "QKVOL":
        assert f"${name}$" in shown
    assert shown.count("$N × d$") == 4 and "$N$" in shown


def test_p_is_rebuilt_from_the_saved_log_sum_exp_as_the_figure_says():
    q, k, v = (torch.randn(7, 4, dtype=torch.float64) for _ in range(3))
    _, lse = flash_attention(q, k, v, block_q=3, block_k=2, return_lse=True)
    scores = q @ k.T / 2.0
    assert torch.allclose(torch.exp(scores - lse[:, None]), torch.softmax(scores, dim=-1), atol=1e-12)


# ---- FlashAttention-2's warps: both splits compute attention; only split-K exchanges -------------


@pytest.mark.parametrize("split", flash_diagrams.SPLITS)
def test_both_warp_splits_compute_attention(split):
    q, k, v = (torch.randn(16, 8, dtype=torch.float64) for _ in range(3))
    out, exchanged = flash_diagrams.attention_by_warps(q, k, v, split)
    expected = torch.nn.functional.scaled_dot_product_attention(q[None], k[None], v[None])[0]
    assert torch.allclose(out, expected, atol=1e-12)
    # split-Q: every output row is finished inside one warp; split-K: all four warps hold a piece of each
    assert exchanged == (0 if split == "split-Q" else 16 * 4)
    pairs = [(r, c) for rows, keys in flash_diagrams.warp_split(split) for r in rows for c in keys]
    assert sorted(pairs) == [(r, c) for r in range(16) for c in range(16)]  # each score once, by one warp


def test_the_warp_figure_shows_each_warps_rows_and_keys():
    shown = texts_of(flash_diagrams.draw_fa2_warp_split())
    for split in flash_diagrams.SPLITS:
        for rows, keys in flash_diagrams.warp_split(split):
            assert f"Q {rows[0]}–{rows[-1]} × K {keys[0]}–{keys[-1]}" in shown
    assert shown.count("sync") == 1  # only the split-K panel synchronises


def test_a_bad_split_is_refused():
    with pytest.raises(ValueError, match="split must be one of"):
        flash_diagrams.warp_split("split-V")


# ---- FlashAttention-3's ping-pong: a valid schedule that keeps the Tensor Cores busy -------------


def covered(intervals, start, end) -> bool:
    """Return True when the union of intervals covers [start, end]."""
    point = start
    for a, b in sorted(intervals):
        if a <= point < b:
            point = b
    return point >= end


@pytest.mark.parametrize("warpgroups", [1, 2, 3])
def test_the_schedule_runs_one_gemm_at_a_time_and_keeps_each_warpgroups_order(warpgroups):
    ops = flash_diagrams.pingpong_schedule(warpgroups, iterations=3)
    gemms = sorted((op["start"], op["end"]) for op in ops if op["kind"] != "softmax")
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(gemms, gemms[1:], strict=False))
    for group in range(warpgroups):
        mine = sorted((op for op in ops if op["group"] == group), key=lambda op: op["start"])
        assert all(a["end"] <= b["start"] for a, b in zip(mine, mine[1:], strict=False))
        order = [(op["kind"], op["tile"]) for op in mine]
        for tile in (1, 2, 3):  # S = QK^T, then its softmax, then O += PV
            assert order.index(("QK", tile)) < order.index(("softmax", tile)) < order.index(("PV", tile))
        assert len(order) == 9


def test_ping_pong_hides_every_softmax_behind_the_other_warpgroups_gemms():
    alone = flash_diagrams.pingpong_schedule(1)
    pair = flash_diagrams.pingpong_schedule(2)
    for op in (op for op in pair if op["kind"] == "softmax"):
        others = [(o["start"], o["end"]) for o in pair if o["kind"] != "softmax" and o["group"] != op["group"]]
        assert covered(others, op["start"], op["end"]), op
    # alone, the Tensor Cores wait through every softmax: 2 GEMMs out of every 3 units of work
    assert flash_diagrams.tensor_core_busy(alone) == pytest.approx(6 / 9)
    assert flash_diagrams.tensor_core_busy(pair) == pytest.approx(1.0)
    shown = texts_of(flash_diagrams.draw_fa3_pingpong())
    assert "Tensor Cores busy 67% of the time" in shown and "Tensor Cores busy 100% of the time" in shown


# ---- paged: the block tables and counts drawn are the BlockManager's ---------------------------


def test_the_block_table_figure_is_the_managers_state():
    manager = paged_diagrams.shared_prefix_manager()
    tables = {name: manager.block_table(name) for name in ("A", "B")}
    size = paged_diagrams.BLOCK_SIZE
    a_tokens = paged_diagrams.SEQUENCE_A + paged_diagrams.APPENDED_TO_A
    assert len(tables["A"]) == -(-len(a_tokens) // size)
    assert len(tables["B"]) == -(-len(paged_diagrams.SEQUENCE_B) // size)
    shared = len(paged_diagrams.SEQUENCE_A[:8]) // size  # B repeats A's first 8 tokens: 2 full blocks
    assert tables["B"][:shared] == tables["A"][:shared]
    assert not set(tables["B"][shared:]) & set(tables["A"])
    # brute force: a block's reference count is the number of tables that name it
    counts = {block: sum(table.count(block) for table in tables.values()) for block in range(manager.num_blocks)}
    assert {b.block_id: b.ref_count for b in manager.blocks} == counts
    shown = texts_of(paged_diagrams.draw_block_table_refcounts())
    for table in tables.values():
        assert str(table) in shown
    expected_labels = [f"ref {counts[b]}" if counts[b] else "free" for b in range(manager.num_blocks)]
    assert [t for t in shown if t.startswith("ref ") or t == "free"] == expected_labels
    drawn_tokens = [int(t) for t in shown if t.isdigit() and int(t) > 10]
    assert drawn_tokens == a_tokens + paged_diagrams.SEQUENCE_B


def test_the_hash_chain_figure_is_the_managers_state():
    manager, state = paged_diagrams.hash_chain_manager()
    size = paged_diagrams.BLOCK_SIZE
    first, second = paged_diagrams.FIRST_REQUEST, paged_diagrams.SECOND_REQUEST
    assert state["first"]["hashes"] == hash_chain(first, size)
    assert state["second"]["hashes"] == hash_chain(second, size) + [None]  # the partial last block: no name
    # brute force: leading full blocks equal to the first request's, never the block with the last token
    same = 0
    while (
        same < len(first) // size and second[same * size : (same + 1) * size] == first[same * size : (same + 1) * size]
    ):
        same += 1
    assert state["second"]["hits"] == min(same, (len(second) - 1) // size) == 2
    assert state["second"]["table"][:2] == state["first"]["table"][:2]
    # the lesson: a later block with the first request's very tokens still misses
    assert second[12:16] == first[12:16] and state["second"]["hashes"][3] != state["first"]["hashes"][3]
    shown = texts_of(paged_diagrams.draw_hash_chain())
    for request in state.values():
        for block_hash in request["hashes"]:
            assert paged_diagrams.short_hash(block_hash) in shown
    table = state["second"]["table"]
    statuses = [
        f"hit: {table[0]}",
        f"hit: {table[1]}",
        f"miss: {table[2]}",
        f"miss: {table[3]}",
        f"partial: {table[4]}",
    ]
    assert [t for t in shown if re.fullmatch(r"(hit|miss|partial): \d+", t)] == statuses
    assert manager.prefix_cache_hits == 2 * size
