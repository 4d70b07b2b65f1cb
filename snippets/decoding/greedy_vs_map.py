"""Greedy decoding vs the most probable sequence (MAP) on a three-step, two-token table.

Run it: python greedy_vs_map.py. It prints every sequence with its probability, the sequence
greedy decoding builds, and the MAP sequence, so you can see where greedy commits too early.
"""

import itertools

# >>> generated from inferlab/decoding/examples.py:page_table (python -m inferlab.snippetsync)
# Two tokens, "A" = 0 and "B" = 1, three steps. The numbers are this site's own.
FIRST = [0.6, 0.4]  # p(x1)
SECOND = [  # p(x2 | x1), one row per x1
    [0.55, 0.45],  # x1 = A
    [0.95, 0.05],  # x1 = B
]
THIRD = [  # p(x3 | x1, x2), indexed [x1][x2]
    [[0.6, 0.4], [0.7, 0.3]],  # x1 = A: x2 = A, x2 = B
    [[0.9, 0.1], [0.5, 0.5]],  # x1 = B: x2 = A, x2 = B
]
# <<< generated

# --8<-- [start:demo]
NAMES = "AB"


def joint(x1, x2, x3):
    """p(x1, x2, x3) by the chain rule: p(x1) * p(x2 | x1) * p(x3 | x1, x2)."""
    return FIRST[x1] * SECOND[x1][x2] * THIRD[x1][x2][x3]


def greedy():
    """Take the most probable next token at each step, never looking back."""
    x1 = max((0, 1), key=lambda a: FIRST[a])
    x2 = max((0, 1), key=lambda b: SECOND[x1][b])
    x3 = max((0, 1), key=lambda c: THIRD[x1][x2][c])
    return x1, x2, x3


every = {seq: joint(*seq) for seq in itertools.product((0, 1), repeat=3)}
for seq, p in every.items():
    print("".join(NAMES[t] for t in seq), f"{p:.3f}")
print("sum of all eight:", round(sum(every.values()), 12))

g = greedy()
best = max(every, key=every.get)
print("greedy:", "".join(NAMES[t] for t in g), f"p = {every[g]:.3f}")
print("MAP:   ", "".join(NAMES[t] for t in best), f"p = {every[best]:.3f}")
# --8<-- [end:demo]
