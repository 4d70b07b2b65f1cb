"""Why one space breaks the prefix cache: the hash chain of five prompts, block by block.

Needs only a tokenizer. Each full block of 16 tokens is named by a hash that folds in the name of
the block before it, so a "server" that remembers every name it has seen can serve a prompt's
leading blocks until the first block whose name is new. The functions and prompts are generated
from inferlab/paged/blocks.py and inferlab/paged/labs.py.
"""

import hashlib
import os
import random
from collections.abc import Callable, Sequence

from transformers import AutoTokenizer

TARGET = os.environ.get("INFERLAB_TARGET", "Qwen/Qwen2.5-1.5B-Instruct")
BLOCK_SIZE = 16

# >>> generated from inferlab/paged/blocks.py:block_hash (python -m inferlab.snippetsync)
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


# <<< generated

# >>> generated from inferlab/paged/labs.py:document (python -m inferlab.snippetsync)
INSTRUCTION = "# Read the harbour log below, then answer each question with one line of Python.\n"
QUESTIONS = [
    "# Question 1: which boat came home first on day 3?\n",
    "# Question 2: what was the highest tide in the log?\n",
    "# Question 3: on which days did the wind blow from the west?\n",
    "# Question 4: write a function that counts the storms.\n",
]


def harbour_log(entries: int = 34, seed: int = 2026) -> str:
    """Return the shared document: a made-up harbour log, as a Python module, fixed by ``seed``."""
    rng = random.Random(seed)
    boats = ["Heron", "Lantern", "Pebble", "Marlin", "Juniper", "Kestrel", "Otter", "Saffron"]
    winds = ["north", "south", "east", "west", "calm"]
    skies = ["clear", "fog", "rain", "storm", "cloud"]
    lines = [
        '"""Harbour log kept by the lighthouse keeper.',
        "",
        "Each entry records the day, the morning high tide in metres, the wind, the sky,",
        "and the boats that came home, in the order they tied up at the pier.",
        '"""',
        "",
        "LOG = [",
    ]
    for day in range(1, entries + 1):
        home = rng.sample(boats, rng.randint(1, 3))
        lines.append(
            f"    dict(day={day}, tide_m={rng.uniform(0.4, 2.6):.2f}, wind={rng.choice(winds)!r}, "
            f"sky={rng.choice(skies)!r}, boats={home!r}),"
        )
    lines.append("]")
    return "\n".join(lines)


# <<< generated

# >>> generated from inferlab/paged/labs.py:variants (python -m inferlab.snippetsync)
def invalidation_prompts(document: str, question: str = QUESTIONS[0]) -> dict[str, str]:
    """Return the five prompts of the invalidation lab, in the order they are sent."""
    base = INSTRUCTION + "\n" + document + "\n\n" + question
    return {
        "first": base,  # cold cache: nothing to hit
        "identical": base,  # every full block was seen before
        "space before document": INSTRUCTION + "\n " + document + "\n\n" + question,
        "space after document": INSTRUCTION + "\n" + document + " \n\n" + question,
        "change at the very start": " " + base,
    }


# <<< generated


# --8<-- [start:demo]
def cached_blocks(chain: list[int], seen: set[int], num_tokens: int) -> int:
    """Count leading blocks whose names were seen; the last prompt token is always recomputed."""
    limit = (num_tokens - 1) // BLOCK_SIZE
    count = 0
    while count < min(len(chain), limit) and chain[count] in seen:
        count += 1
    return count


tokenizer = AutoTokenizer.from_pretrained(TARGET)
seen: set[int] = set()  # every block name the server has cached so far
for name, text in invalidation_prompts(harbour_log()).items():
    ids = tokenizer(text)["input_ids"]
    chain = hash_chain(ids, BLOCK_SIZE)
    hit = cached_blocks(chain, seen, len(ids))
    seen.update(chain)
    picture = "".join("#" if i < hit else "." for i in range(len(chain)))  # '#': served from cache
    print(f"{name:25s} {len(ids):5d} tokens {hit * BLOCK_SIZE:5d} cached  {picture[:60]}{'...' if len(picture) > 60 else ''}")
# --8<-- [end:demo]
