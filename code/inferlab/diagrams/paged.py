"""Concept diagrams of the paged-serving pages, drawn from the state of a real ``BlockManager``.

Each diagram runs a short, scripted sequence of calls on ``inferlab.paged.BlockManager`` and draws
what the manager then holds, so the picture is what the code does:

- ``block_table_refcounts``: two sequences that share a prefix; their block tables, the physical
  blocks they point at, and each block's reference count.
- ``hash_chain``: a finished request's hash-chained blocks, and a second request that hits the
  cache for its first blocks and misses after one changed block, even where its tokens match again.
- ``one_space``: three lines of Python cut into tokens by the bundled tokenizer, as written and with
  one space added, and each block's name from the real ``hash_chain``.

``WORKED`` holds one decoding step with part of the weights offloaded, worked out part by part from
the cost model of ``inferlab.paged.offload`` (the offloading page's ``paged_worked_offload``).

    python -m inferlab.diagrams paged
"""

from __future__ import annotations

from inferlab.diagrams import style
from inferlab.paged import BlockManager, hash_chain

BLOCK_SIZE = 4  # small blocks keep the pictures readable; vLLM's default is 16

# ---- 1. block tables and reference counts ------------------------------------------------------

SEQUENCE_A = [11, 12, 13, 14, 15, 16, 17, 18, 19, 20]  # ten tokens: two full blocks and a partial one
SEQUENCE_B = SEQUENCE_A[:8] + [31, 32, 33]  # the same first eight tokens, then its own
APPENDED_TO_A = [21, 22, 23]  # A decodes three tokens: it fills its third block and opens a fourth


def shared_prefix_manager(num_blocks: int = 8) -> BlockManager:
    """Return a BlockManager after A is allocated, B (sharing A's first 8 tokens) too, and A grows by 3."""
    manager = BlockManager(num_blocks, block_size=BLOCK_SIZE)
    manager.allocate("A", SEQUENCE_A)
    manager.allocate("B", SEQUENCE_B)  # finds A's two full blocks in the prefix cache
    for token in APPENDED_TO_A:
        manager.append("A", token)
    return manager


def draw_block_table_refcounts():
    """Return the block tables of A and B over the physical pool, with every block's reference count."""
    manager = shared_prefix_manager()
    slot, gap, left = 0.27, 0.12, 0.2  # inches per token slot; space between blocks; left margin
    block_width = BLOCK_SIZE * slot
    fig, ax = style.new_figure(5.0, 5.0, (0, 5.0), (0, 5.0))
    pool_y, pool_width, pool_height = 2.1, 0.55, 0.8
    pool_x = [left + block * (pool_width + 0.05) for block in range(manager.num_blocks)]
    # A above the pool (arrows go down), B below it (arrows go up, its title underneath)
    layout = {"A": (4.7, 4.0, style.BLUE_FILL, style.BLUE), "B": (0.45, 1.05, style.ORANGE_FILL, style.ORANGE)}
    for name, (title_y, y, face, color) in layout.items():
        sequence = manager.sequences[name]
        ax.text(left, title_y, f"{name} ({len(sequence.token_ids)} tokens)", fontsize=style.FONT, weight="bold")
        ax.text(2.45, title_y, "block table:", fontsize=style.SMALL)
        ax.text(3.7, title_y, str(manager.block_table(name)), fontsize=style.SMALL, family=style.CODE)
        for logical, physical in enumerate(sequence.block_table):
            x = left + logical * (block_width + gap)
            tokens = sequence.token_ids[logical * BLOCK_SIZE : (logical + 1) * BLOCK_SIZE]
            for offset in range(BLOCK_SIZE):  # a slot holds one token's key and value; the last ones may be empty
                filled = offset < len(tokens)
                style.box(
                    ax,
                    x + offset * slot,
                    y,
                    slot - 0.02,
                    0.4,
                    face if filled else "white",
                    edge=style.INK if filled else style.GREY,
                )
                if filled:
                    ax.text(
                        x + (offset + 0.5) * slot,
                        y + 0.2,
                        str(tokens[offset]),
                        ha="center",
                        va="center",
                        fontsize=style.SMALL,
                        family=style.CODE,
                    )
            shared = manager.blocks[physical].ref_count > 1
            start = (x + block_width / 2, y if name == "A" else y + 0.4)
            end = (pool_x[physical] + pool_width / 2, pool_y + pool_height if name == "A" else pool_y)
            style.arrow(ax, start, end, color=color, width=1.5, linestyle="--" if shared else "-")
    for block in manager.blocks:  # the pool: every block, its id and its reference count
        x = pool_x[block.block_id]
        style.box(ax, x, pool_y, pool_width, pool_height, style.GREEN_FILL if block.ref_count > 1 else "white")
        ax.text(x + pool_width / 2, pool_y + 0.55, str(block.block_id), ha="center", va="center", fontsize=style.FONT)
        label = f"ref {block.ref_count}" if block.ref_count else "free"
        ax.text(x + pool_width / 2, pool_y + 0.2, label, ha="center", va="center", fontsize=style.SMALL)
    right = pool_x[-1] + pool_width  # the label sits at the right, clear of the arrows
    ax.text(right, pool_y + pool_height + 0.12, "physical blocks", ha="right", fontsize=style.SMALL, color=style.GREY)
    return fig


# ---- 2. the hash chain: a hit, then misses ---------------------------------------------------------

FIRST_REQUEST = list(range(1, 17))  # 16 tokens: four full blocks
# The same first 8 tokens, a changed third block, then the first request's fourth block again and
# one more token (so the fourth block is not the one holding the last token, which is never served).
SECOND_REQUEST = FIRST_REQUEST[:8] + [90, 91, 92, 93] + FIRST_REQUEST[12:16] + [94]


def hash_chain_manager(num_blocks: int = 10) -> tuple[BlockManager, dict]:
    """Return a BlockManager after the first request ran and was freed and the second was allocated.

    Also return what each request's blocks were: physical ids, hashes and (for the second) which
    blocks the prefix cache served.
    """
    manager = BlockManager(num_blocks, block_size=BLOCK_SIZE)
    first_table, _ = manager.allocate("first", FIRST_REQUEST)
    first_hashes = [manager.blocks[block].block_hash for block in first_table]
    manager.free("first")  # its blocks keep their hashes and wait in the free queue
    second_table, cached_tokens = manager.allocate("second", SECOND_REQUEST)
    second_hashes = [manager.blocks[block].block_hash for block in second_table]
    state = {
        "first": {"table": first_table, "hashes": first_hashes, "tokens": FIRST_REQUEST},
        "second": {"table": second_table, "hashes": second_hashes, "tokens": SECOND_REQUEST, "hits": cached_tokens // BLOCK_SIZE},
    }  # fmt: skip
    return manager, state


def short_hash(value: int | None) -> str:
    """Return the first 4 hex digits of a block hash, as the figure shows it ('—' for no hash)."""
    return "—" if value is None else f"{value:016x}"[:4]


def draw_hash_chain():
    """Return both requests' blocks with their chained hashes, the second one's hits and misses."""
    _, state = hash_chain_manager()
    first, second = state["first"], state["second"]
    fig, ax = style.new_figure(5.0, 4.6, (0, 5.0), (0, 4.6))
    width, gap, left = 0.78, 0.2, 0.15
    for row, (name, request) in enumerate(state.items()):
        top = 4.35 - row * 1.95
        title = "first request (finished, freed)" if name == "first" else "second request"
        ax.text(left, top, title, fontsize=style.FONT, weight="bold")
        ax.text(left, top - 0.35, "tokens / hash (first 4 hex digits)", fontsize=style.SMALL, color=style.GREY)
        y = top - 1.25
        for index, block in enumerate(request["table"]):
            x = left + index * (width + gap)
            tokens = request["tokens"][index * BLOCK_SIZE : (index + 1) * BLOCK_SIZE]
            block_hash = request["hashes"][index]
            if name == "first":
                face, status = style.BLUE_FILL, f"block {block}"
            elif index < request["hits"]:
                face, status = style.GREEN_FILL, f"hit: {block}"
            elif block_hash is not None:
                face, status = style.ORANGE_FILL, f"miss: {block}"
            else:
                face, status = "white", f"partial: {block}"
            style.box(ax, x, y, width, 0.75, face)
            token_text = f"{tokens[0]}–{tokens[-1]}" if len(tokens) > 1 else str(tokens[0])
            ax.text(x + width / 2, y + 0.52, token_text, ha="center", va="center", fontsize=style.SMALL)
            ax.text(
                x + width / 2,
                y + 0.2,
                short_hash(block_hash),
                ha="center",
                va="center",
                fontsize=style.SMALL,
                family=style.CODE,
            )
            ax.text(x + width / 2, y - 0.22, status, ha="center", va="center", fontsize=style.SMALL)
            if index > 0 and block_hash is not None:  # the chain: this hash folds in the one before
                style.arrow(ax, (x - gap - 0.02, y + 0.2), (x + 0.02, y + 0.2), color=style.GREY, width=1.2)
    # the lesson of the chain: a block whose tokens match the first request's, yet misses
    again = next(
        index
        for index in range(second["hits"], len(first["table"]))
        if second["tokens"][index * BLOCK_SIZE : (index + 1) * BLOCK_SIZE]
        == first["tokens"][index * BLOCK_SIZE : (index + 1) * BLOCK_SIZE]
    )
    tokens = first["tokens"][again * BLOCK_SIZE : (again + 1) * BLOCK_SIZE]
    ax.text(left, 0.35, f"tokens {tokens[0]}–{tokens[-1]}: the same as before, but", fontsize=style.SMALL)
    ax.text(left, 0.05, "the hash they chain onto changed: miss", fontsize=style.SMALL)
    return fig


DIAGRAMS = {"block_table_refcounts": draw_block_table_refcounts, "hash_chain": draw_hash_chain}


# ---- 3. one space, tokenized (invalidation): the tokens change at one place, the names from there on ----

SPACE_TEXT = "total = 0\nfor x in xs:\n    total += x\n"
SPACE_AT = SPACE_TEXT.index("for")  # the space goes in front of "for"


def shown_token(text: str) -> str:
    """Return a token's text as the pages write it: a middle dot for a space, ↵ for a newline."""
    return text.replace(" ", "·").replace("\n", "↵")


def one_space_values(text: str = SPACE_TEXT, at: int = SPACE_AT, block_size: int = BLOCK_SIZE) -> dict:
    """Return the bundled tokenizer's tokens of ``text`` and of ``text`` with a space inserted at ``at``, and each one's hash chain."""
    from inferlab.models import load_tokenizer

    if not isinstance(at, int) or not 0 <= at <= len(text):
        raise ValueError(f"at must be a position in 0..{len(text)} of the text, got {at!r}")
    tokenizer = load_tokenizer()
    versions = {"before": text, "after": text[:at] + " " + text[at:]}
    values = {}
    for name, version in versions.items():
        ids = tokenizer(version)["input_ids"]
        values[name] = {
            "ids": ids,
            "tokens": [shown_token(tokenizer.decode([i])) for i in ids],
            "hashes": hash_chain(ids, block_size),
        }
    return values


def draw_one_space():
    """Return both versions' blocks of tokens with their chained names: equal up to the space, new from there on."""
    values = one_space_values()
    before = values["before"]
    fig, ax = style.new_figure(5.0, 4.8, (0, 10.0), (0.4, 10.0))
    width, line = 2.25, 0.42
    titles = {"before": "as written", "after": "one space added before line 2"}
    for row, name in enumerate(("before", "after")):
        version = values[name]
        top = 9.6 - row * 4.4
        ax.text(0.15, top, titles[name], fontsize=style.FONT, weight="bold", va="center")
        ids = version["ids"]
        for block in range(-(-len(ids) // BLOCK_SIZE)):
            x = 0.15 + block * (width + 0.2)
            start, stop = block * BLOCK_SIZE, min((block + 1) * BLOCK_SIZE, len(ids))
            full = block < len(version["hashes"])
            if name == "before" or not full:
                face, status = (style.BLUE_FILL, "") if full else ("white", "not full")
            elif version["hashes"][block] == before["hashes"][block]:
                face, status = style.GREEN_FILL, "same name"
            else:
                face, status = style.ORANGE_FILL, "new name"
            box_top = top - 0.4
            height = BLOCK_SIZE * line + 0.2
            style.box(ax, x, box_top - height, width, height, face).set_gid(
                f"block:{name}:{block + 1}:{status or 'full'}"
            )
            for offset, position in enumerate(range(start, stop)):
                changed = name == "after" and (
                    position >= len(before["ids"]) or ids[position] != before["ids"][position]
                )
                ax.text(x + 0.15, box_top - 0.1 - (offset + 0.5) * line, version["tokens"][position],
                        fontsize=style.SMALL, family=style.CODE, va="center",
                        color=style.ORANGE if changed else style.INK, weight="bold" if changed else "normal",
                        gid=f"token:{name}:{position + 1}:{'changed' if changed else 'same'}")  # fmt: skip
            below = box_top - height - 0.35
            name_text = short_hash(version["hashes"][block]) if full else "—"
            ax.text(x + width / 2, below, name_text, fontsize=style.SMALL, family=style.CODE, ha="center", va="center")
            if status and name == "after":
                ax.text(x + width / 2, below - 0.45, status, fontsize=style.SMALL, ha="center", va="center")
    ax.text(0.15, 1.35, f"blocks of {BLOCK_SIZE} tokens; · a space, ↵ a newline", fontsize=style.SMALL, va="center")
    ax.text(0.15, 0.85, "under each block: its name (hash)", fontsize=style.SMALL, va="center")
    return fig


DIAGRAMS["one_space"] = draw_one_space


# ---- worked example (offloading): one decoding step by hand, from the cost model ---------------

OFFLOAD_WEIGHT_GB, OFFLOAD_GB, OFFLOAD_GPU, OFFLOAD_BATCH = 1.0, 0.25, "T4", 1  # this page's own small model


def offload_step_by_hand(
    weight_gb: float = OFFLOAD_WEIGHT_GB,
    offloaded_gb: float = OFFLOAD_GB,
    gpu: str = OFFLOAD_GPU,
    batch: int = OFFLOAD_BATCH,
) -> dict:
    """Return one decoding step with part of the weights offloaded, part by part: bytes, read, arithmetic, time."""
    from inferlab.paged.offload import BYTES_PER_WEIGHT, GB, OFFLOAD_PRESETS, part_seconds, slowdown, step_seconds

    weight_bytes, offloaded_bytes = weight_gb * GB, offloaded_gb * GB
    step = step_seconds(weight_bytes, offloaded_bytes, gpu, batch)  # refuses bad input before anything is shown
    spec = OFFLOAD_PRESETS[gpu]
    rows = []
    for part, num_bytes, bandwidth in (
        ("resident on the GPU", weight_bytes - offloaded_bytes, spec.memory_gb_s),
        ("streamed over PCIe", offloaded_bytes, spec.link_gb_s),
    ):
        flops = 2 * num_bytes / BYTES_PER_WEIGHT * batch  # a multiply and an add per weight per sequence
        rows.append(
            {
                "part": part,
                "GB": num_bytes / GB,
                "bandwidth GB/s": bandwidth,
                "read ms": 1e3 * num_bytes / (bandwidth * GB),
                "arithmetic ms": 1e3 * flops / (spec.fp16_tflops * 1e12),
                "time ms": 1e3 * part_seconds(num_bytes, bandwidth, batch, spec),
            }
        )
    return {
        "gpu": gpu,
        "weight_gb": weight_gb,
        "offloaded_gb": offloaded_gb,
        "batch": batch,
        "fp16_tflops": spec.fp16_tflops,
        "rows": rows,
        "step_ms": 1e3 * step,
        "no_offload_ms": 1e3 * step_seconds(weight_bytes, 0, gpu, batch),
        "slowdown": slowdown(weight_bytes, offloaded_bytes, gpu, batch),
    }


WORKED = {"paged_worked_offload": offload_step_by_hand}
