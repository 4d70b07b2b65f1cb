"""Concept diagrams and worked examples (inferlab.diagrams): drawn in both languages, true to the code, on their pages.

Every diagram of every topic must draw and save in English and zh-TW with no untranslated text, be
committed, and be shown on a page and its translation. Every worked example's result file must be
what the code computes now. The content checks read the drawing itself (each artist a test needs
carries a gid) and compare it with an independent reference: brute force over all sequences,
torch.tril, an ancestor walk, an exact sum over the sampler's random numbers.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import sys
from fractions import Fraction
from pathlib import Path

import matplotlib
import pytest
import torch

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from inferlab import diagrams  # noqa: E402
from inferlab.bench import labels  # noqa: E402
from inferlab.bench.figures import figure_texts, language_path, save_figure  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
RESULTS = DOCS / "results"
sys.path.insert(0, str(ROOT / "tools"))
import sitecheck  # noqa: E402

ALL_DIAGRAMS = [(topic, name) for topic in diagrams.TOPICS for name in diagrams.diagrams(topic)]
ALL_WORKED = [(topic, name) for topic in diagrams.TOPICS for name in diagrams.worked_examples(topic)]
MARKER = re.compile(r"\{\{(?:result|table|provenance)\s+(\w+)")


def gids(fig, prefix: str) -> list[str]:
    """Return the gids of a figure's artists that start with ``prefix``, in drawing order."""
    return [artist.get_gid() for artist in fig.findobj() if (artist.get_gid() or "").startswith(prefix)]


def text_by_gid(fig) -> dict[str, str]:
    """Return {gid: text} for every Text artist of a figure that carries a gid."""
    from matplotlib.text import Text

    return {t.get_gid(): t.get_text() for t in fig.findobj(Text) if t.get_gid()}


@pytest.fixture
def drawn():
    """Draw a diagram by (topic, name) and close it afterwards."""
    figures = []

    def draw(topic: str, name: str):
        figures.append(diagrams.diagrams(topic)[name]())
        return figures[-1]

    yield draw
    for fig in figures:
        plt.close(fig)


def page_pairs() -> list[tuple[Path, Path]]:
    return sitecheck.page_pairs(DOCS)[0]


def shown_images(page: Path) -> list[str]:
    """Return the figures a page shows, as paths under docs/ (figures/topic/name.png)."""
    return [image.split("../")[-1] for image in sitecheck.structure(page.read_text(encoding="utf-8"))["images"]]


# ---- every diagram of every topic: both languages, committed, on its page pair ---------------


@pytest.mark.parametrize("topic, name", ALL_DIAGRAMS)
def test_diagram_saves_in_both_languages_with_nothing_left_in_english(topic, name, tmp_path):
    fig = diagrams.diagrams(topic)[name]()
    try:
        english = [t.get_text() for t in figure_texts(fig)]
        paths = save_figure(fig, tmp_path / f"{name}.png", dpi=60)
        chinese = [t.get_text() for t in figure_texts(fig)]  # save_figure leaves the zh-TW text in place
    finally:
        plt.close(fig)
    assert [p.name for p in paths] == [f"{name}.png", f"{name}.zh-TW.png"]
    assert all(p.stat().st_size > 1000 for p in paths)
    left_in_english = [text for text in chinese if labels.english_words(text)]
    assert not left_in_english, f"{topic}/{name}: zh-TW figure still shows {left_in_english}"
    assert chinese != english, f"{topic}/{name}: the zh-TW figure shows the same text as the English one"


def test_draw_refuses_an_unknown_topic_or_diagram():
    with pytest.raises(ValueError, match="topic must be one of"):
        diagrams.draw("nope", "x")
    with pytest.raises(ValueError, match="no diagram 'x' in topic 'decoding'"):
        diagrams.draw("decoding", "x")
    with pytest.raises(ValueError, match="no worked example 'x'"):
        diagrams.write_worked("decoding", "x")


@pytest.mark.parametrize("topic, name", ALL_DIAGRAMS)
def test_diagram_is_committed_and_shown_on_a_page_and_its_translation(topic, name):
    figure = DOCS / "figures" / topic / f"{name}.png"
    assert figure.is_file() and language_path(figure, "zh-TW").is_file(), f"run python -m inferlab.diagrams {topic}"
    target = f"figures/{topic}/{name}.png"
    showing = [(en, zh) for en, zh in page_pairs() if target in shown_images(en)]
    assert showing, f"no page shows {target}"
    for en, zh in showing:
        assert target in shown_images(zh), f"{zh.name} does not show {target}, which {en.name} shows"


# Guide pages are the topic pages, docs/<topic>/*.md (DESIGN.md: "the guides"; each ends with a
# Self-check). Not guides: labs/ (notebooks), about/, courses/ (course maps), models/, the glossary and
# the home page. One page under a topic is a lab page, not a guide: vllm-colab gives the script that
# runs the real vLLM labs in Colab and what to look for in its output; the ideas it needs are drawn
# on the three pages before it, and it shows no result of ours.
LAB_PAGES = {"paged/vllm-colab"}


def guide_pairs() -> list[tuple[Path, Path]]:
    """Return the (en, zh-TW) pairs of every guide page of every topic."""
    return [
        (en, zh)
        for en, zh in page_pairs()
        if en.parent.parent == DOCS
        and en.parent.name in diagrams.TOPICS
        and f"{en.parent.name}/{en.stem}" not in LAB_PAGES
    ]


def idea_and_first_measurement(text: str) -> tuple[int | None, int | None]:
    """Return where a page first shows an idea (a concept diagram or a worked example) and a measured result.

    An idea is a figure that a topic's DIAGRAMS draws, or a {{result}}/{{table}} marker of a worked
    example. A measured result is any other result marker, or any other figure (a benchmark plot).
    """
    ideas = {f"figures/{topic}/{name}.png" for topic, name in ALL_DIAGRAMS}
    worked = {name for _, name in ALL_WORKED}
    found = []  # (position, is an idea)
    for match in sitecheck.IMAGE.finditer(text):
        found.append((match.start(), match.group(1).split("../")[-1] in ideas))
    for match in MARKER.finditer(text):
        found.append((match.start(), match.group(1) in worked))
    idea = min((at for at, is_idea in found if is_idea), default=None)
    measured = min((at for at, is_idea in found if not is_idea), default=None)
    return idea, measured


def test_every_topic_has_guide_pages_to_check():
    pairs = guide_pairs()
    assert {en.parent.name for en, _ in pairs} == set(diagrams.TOPICS)
    assert len(pairs) == sum(len(list((DOCS / t).glob("*.md"))) // 2 for t in diagrams.TOPICS) - len(LAB_PAGES)


@pytest.mark.parametrize("en, zh", guide_pairs(), ids=lambda page: f"{page.parent.name}/{page.name}")
def test_every_guide_page_shows_an_idea_before_its_first_measured_result(en, zh):
    """Every guide page, in both languages, draws or works an idea by hand before any measured number."""
    for page in (en, zh):
        idea, measured = idea_and_first_measurement(page.read_text(encoding="utf-8"))
        where = page.relative_to(DOCS)
        assert idea is not None, f"{where}: no concept diagram or worked example (python -m inferlab.diagrams)"
        assert measured is None or idea < measured, f"{where}: a measured result comes before the first idea"


def test_the_ordering_check_fails_on_a_page_without_an_idea_or_with_a_result_first():
    figure = "![d](../figures/decoding/greedy_vs_map_tree.png)"
    plot = "![m](../figures/decoding/temperature.png)"
    result = "{{result decoding_perplexity perplexity}}"
    worked = "{{result decoding_worked_viterbi p}}"
    assert idea_and_first_measurement(f"text {result}")[0] is None
    idea, measured = idea_and_first_measurement(f"{plot}\n\n{figure}")
    assert measured < idea
    idea, measured = idea_and_first_measurement(f"{result} then {worked}")
    assert measured < idea
    idea, measured = idea_and_first_measurement(f"{worked}\n\n{plot}\n\n{result}")
    assert idea < measured


# ---- worked examples: the committed numbers are the code's, and each is on its page pair ------


def same_values(stored, fresh, where: str = "values") -> None:
    """Assert two result values are equal, floats to 12 significant digits (JSON round trip)."""
    if isinstance(fresh, float) and isinstance(stored, (int, float)):
        assert math.isclose(stored, fresh, rel_tol=1e-12, abs_tol=1e-15), f"{where}: {stored} != {fresh}"
    elif isinstance(fresh, dict):
        assert isinstance(stored, dict) and stored.keys() == fresh.keys(), f"{where}: keys differ"
        for key in fresh:
            same_values(stored[key], fresh[key], f"{where}.{key}")
    elif isinstance(fresh, (list, tuple)):
        assert isinstance(stored, list) and len(stored) == len(fresh), f"{where}: lengths differ"
        for i, (a, b) in enumerate(zip(stored, fresh, strict=True)):
            same_values(a, b, f"{where}.{i}")
    else:
        assert stored == fresh, f"{where}: {stored!r} != {fresh!r}"


@pytest.mark.parametrize("topic, name", ALL_WORKED)
def test_worked_example_file_is_what_the_code_computes(topic, name):
    stored = json.loads((RESULTS / f"{name}.json").read_text(encoding="utf-8"))
    assert stored["provenance"]["command"] == f"python -m inferlab.diagrams {topic}"
    fresh = json.loads(json.dumps(diagrams.worked_examples(topic)[name]()))  # as JSON stores it
    same_values(stored["values"], fresh, name)  # stale: rerun python -m inferlab.diagrams <topic>


@pytest.mark.parametrize("topic, name", ALL_WORKED)
def test_worked_example_is_on_a_page_and_its_translation(topic, name):
    def markers(page: Path) -> list[str]:
        return sorted(m.group(0) for m in re.finditer(r"\{\{(?:result|table) " + name + r"[^}]*\}\}", page.read_text()))

    pairs = [(en, zh) for en, zh in page_pairs() if markers(en)]
    assert pairs, f"no page shows the worked example {name}"
    for en, zh in pairs:
        assert markers(zh) == markers(en), f"{zh.name} shows other numbers of {name} than {en.name}"


def test_the_parity_check_counts_figures_per_page_pair(tmp_path):
    """A translation with the same figures but one shown fewer times is caught, not only a missing file."""
    en = tmp_path / "page.md"
    zh = tmp_path / "page.zh-TW.md"
    figure = "![x](../figures/decoding/greedy_vs_map_tree.png)\n\n"
    en.write_text("# T\n\n" + figure + "text\n\n" + figure, encoding="utf-8")
    zh.write_text("# T\n\n" + figure + "文字\n", encoding="utf-8")
    problems = sitecheck.parity_problems(en, zh)
    assert len(problems) == 1 and "images" in problems[0]
    zh.write_text("# T\n\n" + figure + "文字\n\n" + figure, encoding="utf-8")
    assert sitecheck.parity_problems(en, zh) == []


# ---- decoding: the tree and the trellis show what the decoders compute ------------------------


def brute_force(length: int) -> dict[tuple[int, ...], float]:
    """Return p(sequence) of every sequence of the site's model, by the chain rule over its tables."""
    from inferlab.decoding.examples import NEXT, START

    table = {}
    for seq in itertools.product(range(len(START)), repeat=length):
        p = START[seq[0]]
        for a, b in itertools.pairwise(seq):
            p *= NEXT[a][b]
        table[seq] = p
    return table


def names(tokens) -> str:
    from inferlab.decoding.examples import TOKENS

    return " ".join(TOKENS[t] for t in tokens)


def test_tree_marks_greedys_path_and_the_most_probable_sequence(drawn):
    from inferlab.decoding.examples import NEXT, START, page_model
    from inferlab.decoding.search import greedy_decode

    fig = drawn("decoding", "greedy_vs_map_tree")
    # Greedy by hand: the largest entry of START, then the largest entry of that token's NEXT row.
    first = max(range(3), key=START.__getitem__)
    greedy = names([first, max(range(3), key=NEXT[first].__getitem__)])
    assert greedy == names(greedy_decode(page_model(), 2).tokens)
    best = names(max(brute_force(2).items(), key=lambda item: item[1])[0])
    assert greedy != best  # the page's point: the two differ on this model
    assert {g.split(":", 1)[1] for g in gids(fig, "greedy:")} == {greedy.split()[0], greedy}
    assert {g.split(":", 1)[1] for g in gids(fig, "map:")} == {best.split()[0], best}
    texts = text_by_gid(fig)
    for seq, p in brute_force(2).items():
        assert float(texts[f"p:{names(seq)}"]) == pytest.approx(p, rel=1e-3)
        assert float(texts[f"branch:{names(seq)}"]) == pytest.approx(NEXT[seq[0]][seq[1]], rel=1e-3)
    for token in range(3):
        assert float(texts[f"branch:{names([token])}"]) == pytest.approx(START[token], rel=1e-3)


def test_trellis_shows_every_best_prefix_and_the_best_path(drawn):
    from inferlab.decoding.examples import VITERBI_PAGE_LENGTH

    fig = drawn("decoding", "viterbi_trellis")
    texts = text_by_gid(fig)
    length = VITERBI_PAGE_LENGTH
    for t in range(1, length + 1):
        prefixes = brute_force(t)
        for x, name in enumerate("XYZ"):
            best = max(p for seq, p in prefixes.items() if seq[-1] == x)
            assert float(texts[f"s:{t}:{name}"]) == pytest.approx(best, rel=1e-3)
            if t > 1:  # the kept edge into (t, x) comes from the last-but-one token of that best prefix
                winner = max((seq for seq in prefixes if seq[-1] == x), key=prefixes.__getitem__)
                kept = [g for g in gids(fig, f"kept:{t}:{name}") + gids(fig, f"best:{t}:{name}")]
                assert len(kept) == 1
                dropped = {g.rsplit(":", 1)[1] for g in gids(fig, f"dropped:{t}:{name}:")}
                assert dropped == set("XYZ") - {"XYZ"[winner[-2]]}
    best_path = max(brute_force(length).items(), key=lambda item: item[1])[0]
    marked = [g.split(":")[2] for g in gids(fig, "best:")]
    assert marked == [names([token]) for token in best_path[1:]]


def test_viterbi_by_hand_matches_brute_force_and_the_dp():
    from inferlab.decoding.examples import page_model
    from inferlab.decoding.search import map_decode_dp
    from inferlab.diagrams.decoding import viterbi_by_hand

    values = viterbi_by_hand(3)
    assert values["sequences"] == 3**3
    for row in values["rows"]:
        t, x = row["t"], "XYZ".index(row["x"])
        prefixes = brute_force(t)
        winner = max((seq for seq in prefixes if seq[-1] == x), key=prefixes.__getitem__)
        best, came_from = row["s_t(x)"].split(" ← ")
        assert float(best) == pytest.approx(prefixes[winner], rel=1e-9)
        assert came_from == "XYZ"[winner[-2]]
        bold = [column for column in ("from X", "from Y", "from Z") if row[column].startswith("**")]
        assert bold == [f"from {came_from}"]
        for column in ("from X", "from Y", "from Z"):
            left, product = row[column].strip("*").split(" = ")
            a, b = (float(v) for v in left.split(" × "))
            assert float(product) == pytest.approx(a * b, rel=1e-9)  # the arithmetic a reader redoes
    top = max(brute_force(3).items(), key=lambda item: item[1])
    assert values["sequence"] == values["brute_force_sequence"] == names(top[0])
    assert values["p"] == pytest.approx(top[1], rel=1e-9)
    assert values["sequence"] == names(map_decode_dp(page_model(), 3).tokens)


# ---- KV cache: the grids are the attention's, the slots the cached loop's ---------------------


def cells(fig, prefix: str) -> dict[tuple[int, int], str]:
    """Return {(row, column): kind} from gids like cell:causal:3:2:read (rows and columns from 1)."""
    found = {}
    for gid in gids(fig, prefix):
        *_, row, column, kind = gid.split(":")
        found[int(row), int(column)] = kind
    return found


def test_causal_and_bidirectional_grids_are_the_masks(drawn):
    from inferlab.diagrams.kvcache import MASK_TOKENS

    n = MASK_TOKENS
    fig = drawn("kvcache", "causal_vs_bidirectional")
    causal, bidirectional = cells(fig, "cell:causal:"), cells(fig, "cell:bidirectional:")
    reference = torch.ones(n, n, dtype=torch.bool).tril()
    assert causal == {(i + 1, j + 1): "read" if reference[i, j] else "masked" for i in range(n) for j in range(n)}
    # Without the mask every query reads every key; the new reads of earlier rows are the new token's column.
    expected = {(i + 1, j + 1): "changed" if (j == n - 1 and i < n - 1) else "read" for i in range(n) for j in range(n)}
    assert bidirectional == expected


def test_training_and_generation_grids_are_the_causal_mask(drawn):
    fig = drawn("kvcache", "training_vs_generation")
    reference = torch.ones(4, 4, dtype=torch.bool).tril()
    for panel in ("training", "generation"):
        grid = cells(fig, f"cell:{panel}:")
        assert grid == {(i + 1, j + 1): "read" if reference[i, j] else "masked" for i in range(4) for j in range(4)}


def test_cache_growth_is_what_the_cached_loop_computes(drawn, tiny_pair):
    """Each row's orange slots are the keys one layer of the real cached loop computes in that call."""
    from inferlab.diagrams.kvcache import DECODE_STEPS, PROMPT_TOKENS
    from inferlab.kvcache import LlamaDecoder
    from inferlab.kvcache.generate import KVCache, forward_with_cache

    fig = drawn("kvcache", "kv_cache_growth")
    slots = {}
    for gid in gids(fig, "slot:"):
        _, row, position, kind = gid.split(":")
        slots.setdefault(int(row), {})[int(position)] = kind
    decoder = LlamaDecoder.from_pretrained(tiny_pair[0])
    total = PROMPT_TOKENS + DECODE_STEPS
    cache = KVCache(decoder, 1, total)
    feeds = [torch.tensor([[5, 6, 7]])] + [torch.tensor([[8 + i]]) for i in range(DECODE_STEPS)]
    assert feeds[0].shape[1] == PROMPT_TOKENS
    for row, ids in enumerate(feeds):
        before = cache.length
        decoder.reset_counts()
        forward_with_cache(decoder, cache, ids)
        computed = decoder.layers[0].keys_computed
        new = [p for p, kind in slots[row].items() if kind == "new"]
        assert new == list(range(before + 1, before + computed + 1))  # positions counted from 1
        assert [p for p, kind in slots[row].items() if kind == "cached"] == list(range(1, before + 1))
        assert all(kind == "empty" for p, kind in slots[row].items() if p > cache.length)


def test_cache_size_by_hand_agrees_with_the_calculator():
    from inferlab.diagrams.kvcache import cache_size_by_hand
    from inferlab.kvcache.size import PRESETS, kv_bytes_per_token, kv_cache_bytes

    values = cache_size_by_hand()
    model, tokens, batch, dtype = values["model"], values["tokens"], values["batch"], values["dtype"]
    config = PRESETS[model]
    assert (values["layers"], values["kv_heads"], values["head_dim"]) == (
        config["num_hidden_layers"],
        config["num_key_value_heads"],
        config["head_dim"],
    )
    assert values["numbers_per_token_per_layer"] * values["layers"] == values["numbers_per_token"]
    assert values["numbers_per_token"] * values["bytes_per_number"] == values["bytes_per_token"]
    assert values["bytes_per_token"] == kv_bytes_per_token(model, dtype=dtype) == values["KiB_per_token"] * 1024
    assert values["MiB_per_sequence"] * 2**20 == kv_cache_bytes(model, tokens, 1, dtype=dtype)
    assert (
        values["MiB_per_batch"] * 2**20
        == kv_cache_bytes(model, tokens, batch, dtype=dtype)
        == values["calculator_bytes"]
    )


@pytest.mark.parametrize(
    "args", [("nope",), ("Qwen2.5-1.5B", -1), ("Qwen2.5-1.5B", 8, 0.5), ("Qwen2.5-1.5B", 8, 1, "int3")]
)
def test_cache_size_by_hand_refuses_bad_input(args):
    from inferlab.diagrams.kvcache import cache_size_by_hand

    with pytest.raises(ValueError):
        cache_size_by_hand(*args)


# ---- speculative: the round is the sampler's, the mask the tree code's, the example exact ------


def test_round_shows_the_drafts_and_decisions_the_sampler_makes(drawn):
    from inferlab.diagrams.speculative import ROUND_GAMMA, ROUND_P, ROUND_Q, ROUND_SEED, ROUND_TOKENS
    from inferlab.speculative.sampler import sample_token, verify_drafts

    fig = drawn("speculative", "draft_verify_round")
    generator = torch.Generator().manual_seed(ROUND_SEED)
    p_rows, q_rows = torch.tensor(ROUND_P, dtype=torch.float64), torch.tensor(ROUND_Q, dtype=torch.float64)
    drafts = [sample_token(q_rows[i], generator) for i in range(ROUND_GAMMA)]
    kept, accepted, _ = verify_drafts(p_rows, q_rows, drafts, generator)
    assert 0 < accepted < ROUND_GAMMA  # the page describes a round with a kept draft and a rejection
    assert gids(fig, "draft:") == [f"draft:{i + 1}:{ROUND_TOKENS[d]}" for i, d in enumerate(drafts)]
    decisions = [f"accept:{i + 1}:{'kept' if i < accepted else 'rejected'}" for i in range(accepted + 1)]
    assert gids(fig, "accept:") == decisions
    assert gids(fig, "output:") == [f"output:{i + 1}:{ROUND_TOKENS[t]}" for i, t in enumerate(kept)]
    residual = [max(0.0, p - q) for p, q in zip(ROUND_P[accepted], ROUND_Q[accepted], strict=True)]
    assert residual[kept[-1]] > 0  # the last token came from the residual, where p > q
    from matplotlib.text import Text

    shown = [t.get_text() for t in fig.findobj(Text) if t.get_text().endswith(("✓", "✗"))]
    ratios = [min(1.0, ROUND_P[i][d] / ROUND_Q[i][d]) for i, d in enumerate(drafts[: accepted + 1])]
    assert [float(text.split()[0]) for text in shown] == pytest.approx(ratios, abs=0.005)


def test_token_tree_and_mask_are_the_tree_code(drawn):
    from inferlab.diagrams.speculative import TREE_DRAFT, TREE_PREFIX

    fig = drawn("speculative", "token_tree_mask")
    nodes = {}
    for gid in gids(fig, "node:"):
        _, index, word, parent = gid.split(":")
        nodes[int(index)] = (word, int(parent))
    # Built by hand from the draft's table: its two best words after "cat", then after each of those.
    best_two = {w: sorted(following, key=following.get, reverse=True)[:2] for w, following in TREE_DRAFT.items()}
    expected, level = {}, [(0, TREE_PREFIX[-1])]
    for _ in range(2):
        nxt = []
        for parent, word in level:
            for child in best_two[word]:
                expected[len(expected) + 1] = (child, parent)
                nxt.append((len(expected), child))
        level = nxt
    assert nodes == expected
    # The page's sentence: node 3 is "on" under node 1 "sat"; node 2 is "ran", node 4 "down".
    assert (nodes[1][0], nodes[2][0], nodes[3], nodes[4][0]) == ("sat", "ran", ("on", 1), "down")
    prefix = len(TREE_PREFIX)
    for gid in gids(fig, "mask:"):
        _, row, column, kind = gid.split(":")
        row, column = int(row), int(column)
        ancestors, node = set(), row
        while node:  # the node itself, its parent, ... up to depth 1
            ancestors.add(node)
            node = nodes[node][1]
        want = "prefix" if column <= prefix else "branch" if column - prefix in ancestors else "hidden"
        assert kind == want, gid
    assert len(gids(fig, "mask:")) == len(nodes) * (prefix + len(nodes))


def test_one_position_by_hand_is_what_verify_drafts_does(monkeypatch):
    """Sum over the sampler's uniforms on a grid: the acceptance, residual and output columns are exact."""
    from inferlab.diagrams.speculative import WORKED_P, WORKED_Q, one_position_by_hand
    from inferlab.speculative.sampler import verify_drafts

    values = one_position_by_hand()
    p = torch.tensor([float(x) for x in WORKED_P], dtype=torch.float64)
    q = torch.tensor([float(x) for x in WORKED_Q], dtype=torch.float64)
    grid = 2000  # every threshold of this p and q is a multiple of 1/2000, so midpoints give exact sums
    uniforms = [(i + 0.5) / grid for i in range(grid)]
    queue: list[float] = []

    def fake_rand(*size, **kwargs):
        shape = size[0] if size and isinstance(size[0], tuple) else size
        count = math.prod(shape) if shape else 1
        drawn_values = [queue.pop(0) for _ in range(count)]
        return torch.tensor(drawn_values if shape else drawn_values[0], dtype=torch.float64).reshape(shape)

    monkeypatch.setattr(torch, "rand", fake_rand)
    p_rows, q_rows = torch.stack([p, p]), q[None]
    output, residual = torch.zeros(4, dtype=torch.float64), torch.zeros(4, dtype=torch.float64)
    for x, row in enumerate(values["rows"]):
        accepts = 0
        for u in uniforms:
            queue[:] = [u, 0.5]
            accepts += verify_drafts(p_rows, q_rows, [x], None)[1] == 1
        assert accepts / grid == row["min(1, p/q)"]
        assert q[x] * accepts / grid == pytest.approx(row["proposed and kept"], abs=1e-12)
        output[x] += q[x] * accepts / grid
        if accepts < grid:
            resampled = torch.zeros(4, dtype=torch.float64)
            for u in uniforms:
                queue[:] = [1 - 1e-12, u]  # a rejection, then the residual draw
                resampled[verify_drafts(p_rows, q_rows, [x], None)[0][0]] += 1 / grid
            residual = resampled  # the same residual whichever draft was rejected
            output += q[x] * (1 - accepts / grid) * resampled
    stated = [float(v) for v in values["residual"].strip("()").split(", ")]
    torch.testing.assert_close(residual, torch.tensor(stated, dtype=torch.float64), atol=1e-12, rtol=0)
    torch.testing.assert_close(output, p, atol=1e-12, rtol=0)
    assert values["output"] == values["p"] and values["output_equals_p"]
    assert values["accept"] == pytest.approx(float(sum(min(a, b) for a, b in zip(p, q, strict=True))), abs=1e-12)
    sums = [Fraction(row["comes out"].split(" = ")[1]) for row in values["rows"]]
    assert sums == [Fraction(x) for x in WORKED_P]


@pytest.mark.parametrize(
    "p_text, message",
    [
        (["0.5", "0.5"], "must list 4"),
        (["0.45", "0.3", "0.1", "x"], "decimal strings"),
        (["0.5", "0.6", "0.1", "-0.2"], "non-negative"),
        (["0.3", "0.2", "0.25", "0.25"], "must differ"),
    ],
)
def test_one_position_by_hand_refuses_what_is_not_an_example(p_text, message):
    from inferlab.diagrams.speculative import one_position_by_hand

    with pytest.raises(ValueError, match=message):
        one_position_by_hand(p_text)
