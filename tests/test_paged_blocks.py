"""BlockManager: property tests against a shadow KV memory and an independent LRU clock.

The *shadow memory* plays the GPU: whenever a sequence receives a block that was not a cache hit,
the test writes that sequence's token ids into the block's slots (as a forward pass would write
keys and values). A cache hit is correct only if the shadow memory of the hit blocks holds exactly
the request's tokens. The *LRU clock* records, independently of the manager's queue, when each
block last became free; a newly handed-out block must be the one free the longest.
"""

from __future__ import annotations

import copy
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inferlab.paged import BlockManager, OutOfBlocksError, hash_chain

BLOCK = 4


class Harness:
    """Drives a BlockManager and checks every invariant after every operation."""

    def __init__(self, num_blocks: int, hash_fn=None):
        kwargs = {"hash_fn": hash_fn} if hash_fn else {}
        self.bm = BlockManager(num_blocks, BLOCK, **kwargs)
        self.shadow = {b: [None] * BLOCK for b in range(num_blocks)}  # what each slot "holds"
        self.tokens: dict[int, list[int]] = {}
        self.clock = 0
        self.freed_at = {b: b - num_blocks for b in range(num_blocks)}  # all start free, in id order
        self.next_id = 0

    def tick(self) -> int:
        self.clock += 1
        return self.clock

    def oldest_free(self, exclude=()) -> list[int]:
        referenced = {b for seq in self.tokens for b in self.bm.block_table(seq)}
        free = [b for b in self.freed_at if b not in referenced and b not in exclude]
        return sorted(free, key=self.freed_at.get)

    def snapshot(self):
        return copy.deepcopy(
            (
                self.bm.blocks,
                list(self.bm.free_queue),
                self.bm.cached,
                self.bm.sequences,
                self.bm.prefix_cache_queries,
                self.bm.prefix_cache_hits,
            )
        )

    def allocate(self, tokens: list[int]):
        before = self.snapshot()
        live_blocks = {b for seq in self.tokens for b in self.bm.block_table(seq)}
        seq = self.next_id
        try:
            table, cached = self.bm.allocate(seq, tokens)
        except OutOfBlocksError:
            assert self.snapshot() == before, "a failed allocate changed the manager's state"
            return
        self.next_id += 1
        assert cached % BLOCK == 0 and cached <= len(tokens) - 1
        n_hit = cached // BLOCK
        assert len(table) == -(-len(tokens) // BLOCK) and len(set(table)) == len(table)
        # Every hit block must already hold exactly our tokens (the shadow memory says so).
        for i, block in enumerate(table[:n_hit]):
            assert self.shadow[block] == tokens[i * BLOCK : (i + 1) * BLOCK], "a hit served another prefix's KV"
        # New blocks: never one that a live sequence still references; LRU order among free blocks.
        new_blocks = table[n_hit:]
        assert not set(new_blocks) & live_blocks, "handed out a block that is still referenced"
        assert new_blocks == self.oldest_free(exclude=set(table[:n_hit]))[: len(new_blocks)], "not LRU"
        for i, block in enumerate(new_blocks, start=n_hit):  # the forward pass writes these slots
            chunk = tokens[i * BLOCK : (i + 1) * BLOCK]
            self.shadow[block] = chunk + [None] * (BLOCK - len(chunk))
        self.tokens[seq] = list(tokens)

    def append(self, pick: int, token: int):
        if not self.tokens:
            return
        seq = sorted(self.tokens)[pick % len(self.tokens)]
        before = self.snapshot()
        old_table = self.bm.block_table(seq)
        expected_new = self.oldest_free()[:1]
        try:
            block, offset = self.bm.append(seq, token)
        except OutOfBlocksError:
            assert len(self.tokens[seq]) % BLOCK == 0, "ran out of blocks with room left in the tail block"
            assert self.snapshot() == before, "a failed append changed the manager's state"
            return
        position = len(self.tokens[seq])
        table = self.bm.block_table(seq)
        if position % BLOCK == 0:
            assert table[:-1] == old_table and [table[-1]] == expected_new, "new tail block is not the LRU one"
            self.shadow[block] = [None] * BLOCK
        else:
            assert table == old_table
        assert (block, offset) == (table[position // BLOCK], position % BLOCK)
        self.shadow[block][offset] = token
        self.tokens[seq].append(token)

    def free(self, pick: int):
        if not self.tokens:
            return
        seq = sorted(self.tokens)[pick % len(self.tokens)]
        table = self.bm.block_table(seq)
        self.bm.free(seq)
        del self.tokens[seq]
        still_used = {b for s in self.tokens for b in self.bm.block_table(s)}
        for block in reversed(table):  # tail first: the tail is the oldest-freed, evicted first
            if block not in still_used:
                self.freed_at[block] = self.tick()

    def check_invariants(self):
        tables = [self.bm.block_table(s) for s in self.tokens]
        for block in self.bm.blocks:
            users = sum(t.count(block.block_id) for t in tables)
            assert block.ref_count == users, f"block {block.block_id}: ref_count {block.ref_count}, used {users}x"
        free = list(self.bm.free_queue)
        assert len(free) == len(set(free)), "a block is in the free queue twice (double free)"
        assert set(free) == {b.block_id for b in self.bm.blocks if b.ref_count == 0}, "leaked block"
        for seq, tokens in self.tokens.items():  # each live sequence's slots hold its own tokens
            table = self.bm.block_table(seq)
            assert len(table) == -(-len(tokens) // BLOCK)
            for pos, tok in enumerate(tokens):
                assert self.shadow[table[pos // BLOCK]][pos % BLOCK] == tok


ops = st.lists(
    st.one_of(
        st.tuples(st.just("alloc"), st.lists(st.integers(0, 2), min_size=1, max_size=18)),
        st.tuples(st.just("append"), st.integers(0, 7), st.integers(0, 2)),
        st.tuples(st.just("free"), st.integers(0, 7)),
    ),
    max_size=40,
)


def run_ops(harness: Harness, operations):
    for op in operations:
        if op[0] == "alloc":
            harness.allocate(op[1])
        elif op[0] == "append":
            harness.append(op[1], op[2])
        else:
            harness.free(op[1])
        harness.check_invariants()
    for seq in list(harness.tokens):  # counts return to zero
        harness.free(seq)
    assert all(b.ref_count == 0 for b in harness.bm.blocks)
    assert harness.bm.num_free_blocks == harness.bm.num_blocks


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(num_blocks=st.integers(3, 12), operations=ops)
def test_random_interleavings_keep_every_invariant(num_blocks, operations):
    run_ops(Harness(num_blocks), operations)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(num_blocks=st.integers(3, 12), operations=ops)
def test_colliding_hashes_never_serve_wrong_kv(num_blocks, operations):
    """Every block gets the same hash: only the token check stands between a request and wrong KV."""
    run_ops(Harness(num_blocks, hash_fn=lambda parent, tokens, extra: 7), operations)


def test_identical_prompt_hits_every_full_block_but_recomputes_the_last_token():
    bm = BlockManager(16, 4)
    prompt = list(range(12))  # exactly 3 full blocks
    assert bm.allocate("a", prompt)[1] == 0
    # 12 tokens: the last must be recomputed for its logits, so only blocks 0 and 1 (8 tokens) hit.
    assert bm.allocate("b", prompt)[1] == 8
    assert bm.allocate("c", prompt + [99])[1] == 12
    assert (bm.prefix_cache_queries, bm.prefix_cache_hits) == (12 + 12 + 13, 0 + 8 + 12)
    assert bm.hit_rate == pytest.approx(20 / 37)


def test_a_change_stops_every_later_block_from_hitting():
    bm = BlockManager(16, 4)
    bm.allocate("a", [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13])
    # A change in block 1 keeps block 0 and loses blocks 1 and 2, although block 2 is unchanged.
    assert bm.allocate("b", [1, 2, 3, 4, 5, 0, 7, 8, 9, 10, 11, 12, 13])[1] == 4
    # A change in the very first token loses everything.
    assert bm.allocate("c", [0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13])[1] == 0


def test_freed_blocks_stay_cached_until_evicted_tail_first():
    bm = BlockManager(4, 2)
    bm.allocate("a", [1, 2, 3, 4, 5, 6])  # blocks 0, 1, 2 (all full, all cached)
    bm.free("a")  # queue: 3 (never used), then 2, 1, 0 (tail first)
    assert list(bm.free_queue) == [3, 2, 1, 0]
    assert bm.allocate("b", [1, 2, 3, 4, 9])[1] == 4  # blocks 0 and 1 come back out of the queue
    assert bm.block_table("b")[:2] == [0, 1] and list(bm.free_queue) == [2]
    # "b" took block 3 (the oldest free), so block 2, the tail of "a", is the one evicted next.
    bm.allocate("c", [7, 7])
    assert bm.block_table("c") == [2]
    bm.free("b"), bm.free("c")
    assert bm.allocate("d", [1, 2, 3, 4, 5, 6, 0])[1] == 4  # block 2 (tokens 5, 6) was evicted


def test_hash_chain_matches_a_hand_computed_chain():
    calls = []

    def fake_hash(parent, tokens, extra):
        calls.append((parent, tuple(tokens), extra))
        return len(calls) * 100

    assert hash_chain([5, 6, 7, 8, 9], 2, ("lora",), fake_hash) == [100, 200]
    assert calls == [(0, (5, 6), ("lora",)), (100, (7, 8), ("lora",))]


def test_extra_keys_separate_identical_tokens():
    bm = BlockManager(8, 2)
    bm.allocate("a", [1, 2, 3], extra_keys=("adapter-1",))
    assert bm.allocate("b", [1, 2, 3], extra_keys=("adapter-2",))[1] == 0
    assert bm.allocate("c", [1, 2, 3], extra_keys=("adapter-1",))[1] == 2


def test_running_out_of_blocks_is_a_clear_error_and_changes_nothing():
    bm = BlockManager(2, 2)
    bm.allocate("a", [1, 2, 3])
    state = copy.deepcopy((bm.blocks, list(bm.free_queue), bm.cached, bm.sequences))
    with pytest.raises(OutOfBlocksError, match="needs 2 new blocks .* only 0 are free"):
        bm.allocate("b", [4, 5, 6])
    assert copy.deepcopy((bm.blocks, list(bm.free_queue), bm.cached, bm.sequences)) == state
    bm.append("a", 4)
    with pytest.raises(OutOfBlocksError, match="needs one more block"):
        bm.append("a", 5)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_blocks": 0}, "num_blocks must be an integer >= 1"),
        ({"num_blocks": 4, "block_size": 0}, "block_size must be"),
    ],
)
def test_bad_constructor_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        BlockManager(**kwargs)


def test_bad_operation_arguments():
    bm = BlockManager(4, 2)
    with pytest.raises(ValueError, match="token_ids must hold at least one"):
        bm.allocate("a", [])
    with pytest.raises(ValueError, match="integers >= 0"):
        bm.allocate("a", [1, -2])
    with pytest.raises(TypeError, match="token_ids must be a sequence"):
        bm.allocate("a", "hello")
    bm.allocate("a", [1])
    with pytest.raises(ValueError, match="already allocated"):
        bm.allocate("a", [1])
    with pytest.raises(KeyError, match="not allocated"):
        bm.free("zzz")
    with pytest.raises(KeyError, match="not allocated"):
        bm.append("zzz", 1)


# ----------------------------------------------------------------------------------------------
# Issue 18: vLLM-sized collision guard, sizes refused before building anything.


@pytest.mark.parametrize("hash_fn", [None, lambda parent, tokens, extra: 7], ids=["sha256", "all-collide"])
def test_a_block_is_never_spliced_onto_another_prefix(hash_fn):
    """B's second block has the same tokens as A's, but follows other tokens: its KV differs.

    With every hash equal, a check of the block's own tokens and its parent's *hash* alone (what
    vLLM stores) would serve A's block to B. The hit must continue the very block matched before it.
    """
    bm = BlockManager(8, 4, **({"hash_fn": hash_fn} if hash_fn else {}))
    bm.allocate("a", [0, 0, 0, 0, 1, 1, 1, 1, 9])  # blocks: A0, A1, tail
    bm.allocate("c", [2, 2, 2, 2, 5])  # block C0 = [2, 2, 2, 2], cached
    table, cached = bm.allocate("b", [2, 2, 2, 2, 1, 1, 1, 1, 9])
    assert cached == 4, "only C0 holds B's prefix; A1 holds [1, 1, 1, 1] after [0, 0, 0, 0]"
    assert table[0] == bm.block_table("c")[0] and table[1] != bm.block_table("a")[1]


def test_cached_blocks_keep_their_own_tokens_not_their_whole_prefix():
    """16,384 tokens in blocks of 16: the guard holds each token once (it held 8.4 million ids before)."""
    bm = BlockManager(1100, 16)
    bm.allocate("long", list(range(16_384)))
    stored = sum(len(block.token_ids) for block in bm.blocks)
    assert stored == 16_384
    assert bm.allocate("again", list(range(16_384)))[1] == 16_384 - 16  # every full block but the last hits


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda: hash_chain([1, 2, 3], -1), ValueError, "block_size must be an integer >= 1, got -1"),
        (lambda: hash_chain([1, 2, 3], 0), ValueError, "block_size must be an integer >= 1, got 0"),
        (lambda: hash_chain([1, 2, 3], True), ValueError, "block_size must be an integer >= 1, got True"),
        (lambda: BlockManager(10**9), ValueError, "num_blocks would need 1,000,000,000 block records"),
        (lambda: BlockManager(4, enable_prefix_caching="yes"), TypeError, "enable_prefix_caching must be True"),
        (lambda: BlockManager(4).allocate(["unhashable"], [1]), TypeError, "seq_id must be hashable"),
        (lambda: BlockManager(4).free(["unhashable"]), TypeError, "seq_id must be hashable"),
    ],
)
def test_bad_sizes_and_ids_are_refused_before_anything_is_built(call, error, words):
    with pytest.raises(error, match=re.escape(words)):
        call()
