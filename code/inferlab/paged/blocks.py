"""A paged KV-cache block manager with hash-chained automatic prefix caching.

The KV cache is cut into fixed-size *blocks* of ``block_size`` token slots. A sequence owns a
*block table*: the list of physical block ids that hold its tokens, in order, so its cache needs
no contiguous memory (Kwon et al., 2023, "Efficient Memory Management for Large Language Model
Serving with PagedAttention", Section 4).

Prefix caching follows vLLM's documented design (docs.vllm.ai, "Automatic Prefix Caching"):

- a *full* block is named by a hash of (its parent block's hash, its token ids, extra keys), so a
  block's name depends on every token before it: change one early token and every later block
  gets a new name;
- only full blocks are cached; a partially filled tail block is private to its sequence;
- blocks carry reference counts; a block whose count drops to zero keeps its cached KV and waits
  in a least-recently-used (LRU) *free queue*; it is evicted only when a new block is needed;
- a finished sequence frees its blocks tail first, so its last blocks (the least shareable ones)
  sit nearer the front of the queue and are evicted first;
- a hit takes the block back out of the free queue and bumps its reference count;
- ``prefix_cache_queries`` / ``prefix_cache_hits`` count *tokens*, as vLLM's metrics of the same
  names do, and a request always recomputes at least its last token (the model needs its logits).

Like vLLM, a cached block keeps its parent's hash and its own token ids, so its memory does not
grow with the length of the prefix. Unlike vLLM (which trusts SHA-256), a hit also checks that the
cached block holds exactly our tokens and continues the very block matched before it (by a serial
number, not a hash), so even a forced hash collision cannot serve wrong KV.
"""

from __future__ import annotations

import hashlib
import operator
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

# --8<-- [start:block_hash]
ROOT_HASH = 0  # the "parent hash" of a sequence's first block


def hash_block(parent_hash: int, token_ids: Sequence[int], extra_keys: tuple = ()) -> int:
    """Return the 64-bit name of a full block: a SHA-256 of (parent hash, token ids, extra keys)."""
    key = repr((parent_hash, tuple(token_ids), tuple(extra_keys))).encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "big")


def hash_chain(
    token_ids: Sequence[int],
    block_size: int,
    extra_keys: tuple = (),
    hash_fn: Callable[[int, Sequence[int], tuple], int] = hash_block,
) -> list[int]:
    """Return the hash of every *full* block of ``token_ids``; each one folds in its parent's."""
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"block_size must be an integer >= 1, got {block_size!r}")
    hashes, parent = [], ROOT_HASH
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        parent = hash_fn(parent, token_ids[start : start + block_size], extra_keys)
        hashes.append(parent)
    return hashes


# --8<-- [end:block_hash]

MAX_BLOCKS = 2**21  # 2 million blocks: 33 million tokens of 16-token blocks, far past any lab


@dataclass
class Block:
    """One physical KV-cache block: its id, how many sequences use it, and its cache identity."""

    block_id: int
    ref_count: int = 0
    block_hash: int | None = None  # set only while the block is full and findable in the cache
    token_ids: tuple[int, ...] = ()  # this block's own tokens (vLLM keeps them too)
    parent_hash: int | None = None  # the hash of the block before it (ROOT_HASH for the first)
    serial: int = 0  # which cached content this is: a new number each time the block is (re)named
    parent_serial: int = 0  # the serial of the block it continues (0: the sequence start)
    extra_keys: tuple = ()


@dataclass
class SeqState:
    """The manager's view of one sequence: its tokens and its block table."""

    token_ids: list[int]
    block_table: list[int] = field(default_factory=list)
    extra_keys: tuple = ()


class OutOfBlocksError(RuntimeError):
    """Raised when a request needs more free blocks than the cache has; nothing was changed."""


def _as_token_id(value: Any) -> Any:
    """Return value as a Python int if it is an integer, else unchanged (to be refused by the caller).

    operator.index, not int(): a float tensor has __index__ too, and int(torch.tensor(1.7)) is 1, but
    1.7 is not a token id. True is not one either, though Python lets it pass for 1.
    """
    if isinstance(value, bool):
        return value
    try:
        return operator.index(value)
    except TypeError:
        return value


class BlockManager:
    """Allocate KV-cache blocks to sequences, sharing full blocks through a hash-chained prefix cache."""

    def __init__(
        self,
        num_blocks: int,
        block_size: int = 16,
        enable_prefix_caching: bool = True,
        hash_fn: Callable[[int, Sequence[int], tuple], int] = hash_block,
    ) -> None:
        if not isinstance(num_blocks, int) or isinstance(num_blocks, bool) or num_blocks < 1:
            raise ValueError(f"num_blocks must be an integer >= 1, got {num_blocks!r}")
        if not isinstance(block_size, int) or isinstance(block_size, bool) or block_size < 1:
            raise ValueError(f"block_size must be an integer >= 1, got {block_size!r}")
        if num_blocks > MAX_BLOCKS:  # one Python record per block, made up front: refuse before making any
            raise ValueError(
                f"num_blocks would need {num_blocks:,} block records (about {num_blocks * 200 / 2**30:.1f} GiB of "
                f"Python objects), over the limit of {MAX_BLOCKS:,}; use fewer, larger blocks"
            )
        if not isinstance(enable_prefix_caching, bool):
            raise TypeError(f"enable_prefix_caching must be True or False, got {enable_prefix_caching!r}")
        if not callable(hash_fn):
            raise TypeError(f"hash_fn must be callable (parent_hash, token_ids, extra_keys) -> int, got {hash_fn!r}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.hash_fn = hash_fn
        self.blocks = [Block(i) for i in range(num_blocks)]
        self.next_serial = 1  # 0 means "the start of a sequence"
        # Front of the queue = least recently used = evicted first. An OrderedDict gives O(1)
        # pop-from-front, append-at-back, and removal from the middle (a cache hit).
        self.free_queue: OrderedDict[int, None] = OrderedDict((i, None) for i in range(num_blocks))
        # hash -> {block_id: block}: more than one entry only for duplicates or hash collisions.
        self.cached: dict[int, dict[int, Block]] = {}
        self.sequences: dict[Hashable, SeqState] = {}
        self.prefix_cache_queries = 0
        self.prefix_cache_hits = 0

    # ----- what a reader asks about the cache -------------------------------------------------

    @property
    def num_free_blocks(self) -> int:
        """Return how many blocks no sequence references (cached or empty): all can be handed out."""
        return len(self.free_queue)

    @property
    def hit_rate(self) -> float:
        """Return prefix_cache_hits / prefix_cache_queries (0.0 before any query)."""
        return self.prefix_cache_hits / self.prefix_cache_queries if self.prefix_cache_queries else 0.0

    def block_table(self, seq_id: Hashable) -> list[int]:
        """Return a copy of a sequence's block table (physical block ids, in token order)."""
        return list(self._sequence(seq_id).block_table)

    def num_tokens(self, seq_id: Hashable) -> int:
        """Return how many tokens a sequence holds."""
        return len(self._sequence(seq_id).token_ids)

    # --8<-- [start:lookup]
    def cached_blocks_for(self, token_ids: Sequence[int], extra_keys: tuple = ()) -> list[Block]:
        """Return the cached blocks that hold a prefix of ``token_ids`` (stops at the first miss)."""
        if not self.enable_prefix_caching:
            return []
        extra_keys = tuple(extra_keys)
        # The model needs logits for the last prompt token, so at least one token is recomputed.
        max_blocks = (len(token_ids) - 1) // self.block_size
        found, parent_serial = [], 0
        for index, block_hash in enumerate(hash_chain(token_ids, self.block_size, extra_keys, self.hash_fn)):
            if index == max_blocks:
                break
            tokens = tuple(token_ids[index * self.block_size : (index + 1) * self.block_size])
            # A hash is only a name: the hit must hold our tokens and continue the block matched
            # just before it, so by induction it holds our whole prefix, all the way back.
            match = next(
                (
                    b
                    for b in self.cached.get(block_hash, {}).values()
                    if b.token_ids == tokens and b.parent_serial == parent_serial and b.extra_keys == extra_keys
                ),
                None,
            )
            if match is None:
                break  # every later block's hash folds in this one, so nothing later can hit
            found.append(match)
            parent_serial = match.serial
        return found

    # --8<-- [end:lookup]

    # ----- the three operations an engine calls ----------------------------------------------

    # --8<-- [start:allocate]
    def allocate(self, seq_id: Hashable, token_ids: Sequence[int], extra_keys: tuple = ()) -> tuple[list[int], int]:
        """Return (block table, number of cached tokens) for a new sequence holding ``token_ids``."""
        if not isinstance(seq_id, Hashable):
            raise TypeError(f"seq_id must be hashable (an int or a str), got {type(seq_id).__name__}")
        if seq_id in self.sequences:
            raise ValueError(f"seq_id {seq_id!r} is already allocated; free it first or use a new id")
        token_ids = self._checked_tokens(token_ids)
        if not isinstance(extra_keys, (tuple, list)):
            raise TypeError(
                f"extra_keys must be a tuple (e.g. a LoRA name, an image hash), got {type(extra_keys).__name__}"
            )
        extra_keys = tuple(extra_keys)
        hits = self.cached_blocks_for(token_ids, extra_keys)
        blocks_needed = -(-len(token_ids) // self.block_size) - len(hits)
        # Hit blocks that sit in the free queue stop being free, so they cannot be counted twice.
        reusable_free = self.num_free_blocks - sum(1 for b in hits if b.ref_count == 0)
        if blocks_needed > reusable_free:
            raise OutOfBlocksError(
                f"sequence {seq_id!r} needs {blocks_needed} new blocks of {self.block_size} tokens "
                f"but only {reusable_free} are free; free a sequence or add blocks"
            )
        for block in hits:  # a hit: take the block back out of the free queue
            if block.ref_count == 0:
                del self.free_queue[block.block_id]
            block.ref_count += 1
        table = [b.block_id for b in hits] + [self._take_free_block() for _ in range(blocks_needed)]
        self.sequences[seq_id] = SeqState(list(token_ids), table, extra_keys)
        for index in range(len(hits), len(token_ids) // self.block_size):
            self._cache_full_block(self.sequences[seq_id], index)
        cached_tokens = len(hits) * self.block_size
        self.prefix_cache_queries += len(token_ids)  # vLLM counts both in tokens
        self.prefix_cache_hits += cached_tokens
        return list(table), cached_tokens

    # --8<-- [end:allocate]

    # --8<-- [start:append]
    def append(self, seq_id: Hashable, token_id: int) -> tuple[int, int]:
        """Return (block id, offset): the slot where the appended token's key and value go."""
        sequence = self._sequence(seq_id)
        (token_id,) = self._checked_tokens([token_id])
        position = len(sequence.token_ids)
        if position % self.block_size == 0:  # the last block is full: the new token opens a block
            if not self.free_queue:
                raise OutOfBlocksError(f"sequence {seq_id!r} needs one more block but none is free")
            sequence.block_table.append(self._take_free_block())
        sequence.token_ids.append(token_id)
        if len(sequence.token_ids) % self.block_size == 0:  # the block just became full: share it
            self._cache_full_block(sequence, len(sequence.token_ids) // self.block_size - 1)
        return sequence.block_table[position // self.block_size], position % self.block_size

    # --8<-- [end:append]

    # --8<-- [start:free]
    def free(self, seq_id: Hashable) -> None:
        """Release a sequence: blocks nobody else uses join the free queue, tail block first."""
        sequence = self.sequences.pop(self._sequence_id(seq_id))
        for block_id in reversed(sequence.block_table):  # tail first: evicted first
            block = self.blocks[block_id]
            block.ref_count -= 1
            if block.ref_count == 0:
                self.free_queue[block_id] = None  # back of the queue: most recently used

    # --8<-- [end:free]

    # ----- helpers -----------------------------------------------------------------------------

    def _take_free_block(self) -> int:
        """Pop the least recently used free block, evicting its cached identity if it has one."""
        block_id, _ = self.free_queue.popitem(last=False)
        block = self.blocks[block_id]
        if block.block_hash is not None:
            del self.cached[block.block_hash][block_id]
            if not self.cached[block.block_hash]:
                del self.cached[block.block_hash]
            block.block_hash, block.token_ids, block.extra_keys = None, (), ()
            block.parent_hash, block.serial, block.parent_serial = None, 0, 0
        block.ref_count = 1
        return block_id

    def _cache_full_block(self, sequence: SeqState, index: int) -> None:
        """Give a sequence's full block ``index`` its chained hash so later requests can find it."""
        if not self.enable_prefix_caching:
            return
        end = (index + 1) * self.block_size
        # The parent is this sequence's previous block: full, so it already has its hash.
        parent = None if index == 0 else self.blocks[sequence.block_table[index - 1]]
        block = self.blocks[sequence.block_table[index]]
        block.token_ids = tuple(sequence.token_ids[end - self.block_size : end])
        block.parent_hash = ROOT_HASH if parent is None else parent.block_hash
        block.parent_serial = 0 if parent is None else parent.serial
        block.block_hash = self.hash_fn(
            block.parent_hash, sequence.token_ids[end - self.block_size : end], sequence.extra_keys
        )
        block.serial, self.next_serial = self.next_serial, self.next_serial + 1
        block.extra_keys = sequence.extra_keys
        self.cached.setdefault(block.block_hash, {})[block.block_id] = block

    def _sequence_id(self, seq_id: Hashable) -> Hashable:
        if not isinstance(seq_id, Hashable):
            raise TypeError(f"seq_id must be hashable (an int or a str), got {type(seq_id).__name__}")
        if seq_id not in self.sequences:
            raise KeyError(f"seq_id {seq_id!r} is not allocated; known ids: {sorted(map(repr, self.sequences))[:10]}")
        return seq_id

    def _sequence(self, seq_id: Hashable) -> SeqState:
        return self.sequences[self._sequence_id(seq_id)]

    @staticmethod
    def _checked_tokens(token_ids: Sequence[int]) -> list[int]:
        if isinstance(token_ids, (str, bytes)) or not hasattr(token_ids, "__len__"):
            raise TypeError(f"token_ids must be a sequence of ints, got {type(token_ids).__name__}")
        tokens = [_as_token_id(t) for t in token_ids]
        if not tokens:
            raise ValueError("token_ids must hold at least one token id, got an empty sequence")
        bad = [t for t in tokens if not isinstance(t, int) or isinstance(t, bool) or t < 0]
        if bad:
            raise ValueError(f"token_ids must be integers >= 0, got {bad[:5]!r}")
        return tokens
