"""Concept diagrams of the paged-serving pages, drawn from the state of a real ``BlockManager``.

Each diagram runs a short, scripted sequence of calls on ``inferlab.paged.BlockManager`` and draws
what the manager then holds, so the picture is what the code does:

- ``block_table_refcounts``: two sequences that share a prefix; their block tables, the physical
  blocks they point at, and each block's reference count.
- ``hash_chain``: a finished request's hash-chained blocks, and a second request that hits the
  cache for its first blocks and misses after one changed block, even where its tokens match again.

    python -m inferlab.diagrams paged
"""

from __future__ import annotations

from inferlab.diagrams import style
from inferlab.paged import BlockManager

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
