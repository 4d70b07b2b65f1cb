"""Viterbi (the dynamic program for a first-order model) on the guides' model, checked by brute force.

Run it: python viterbi.py. It prints the trellis: for each step t and each token x, the
probability of the best prefix of t tokens that ends in x, and which token it came from.
Change LENGTH, START or NEXT and run it again.
"""

import itertools
from collections.abc import Sequence

# >>> generated from inferlab/decoding/examples.py:page_model (python -m inferlab.snippetsync)
# Three tokens, "X" = 0, "Y" = 1, "Z" = 2. The numbers are this site's own.
TOKENS = ["X", "Y", "Z"]
START = [0.5, 0.3, 0.2]  # p(x1): X is the most likely first token
NEXT = [  # p(x_t+1 | x_t), one row per previous token; the same table at every step
    [0.36, 0.34, 0.30],  # after X: three weak, nearly equal continuations
    [0.05, 0.85, 0.10],  # after Y: one strong continuation, Y again
    [0.25, 0.15, 0.60],  # after Z
]
# <<< generated


# >>> generated from inferlab/decoding/search.py:viterbi (python -m inferlab.snippetsync)
def viterbi(
    start: Sequence[float], transition: Sequence[Sequence[float]], length: int
) -> tuple[list[int], float, list[list[float]], list[list[int]]]:
    """Return (best tokens, their probability, trellis, back-pointers) of a first-order model by Viterbi.

    ``start[x]`` is p(x_1 = x) and ``transition[a][b]`` is p(x_t+1 = b | x_t = a). ``trellis[t][x]``
    is the probability of the most probable prefix of t + 1 tokens that ends in x. (Long sequences
    need log-probabilities, as ``map_decode_dp`` uses; four steps of a small table do not.)
    """
    if isinstance(length, bool) or not isinstance(length, int) or length < 1:
        raise ValueError(f"length must be an integer >= 1, got {length!r}")
    table = [list(start), *map(list, transition)]  # V start probabilities, then V rows of V
    if not start or any(len(row) != len(start) for row in table) or len(table) != len(start) + 1:
        raise ValueError(f"start must hold V >= 1 probabilities and transition V rows of V, got {table}")
    if not all(isinstance(p, (int, float)) and 0 <= p <= 1 for row in table for p in row):
        raise ValueError(f"start and transition must hold probabilities in [0, 1], got {table}")
    vocab = range(len(start))
    best = list(start)  # prefixes of one token: each token is its own best prefix
    trellis, back_pointers = [best], []
    for _ in range(length - 1):
        came_from, extended = [], []
        for nxt in vocab:
            # All prefixes that end in `prev` face the same future, so only the best of them can
            # lead the best sequence: extend that one, and keep the best over `prev`.
            scores = [best[prev] * transition[prev][nxt] for prev in vocab]
            winner = max(vocab, key=scores.__getitem__)
            came_from.append(winner)
            extended.append(scores[winner])
        best = extended
        trellis.append(best)
        back_pointers.append(came_from)
    # The best last token, then walk the back-pointers from the end to the start.
    tokens = [max(vocab, key=best.__getitem__)]
    for came_from in reversed(back_pointers):
        tokens.insert(0, came_from[tokens[0]])
    return tokens, best[tokens[-1]], trellis, back_pointers


# <<< generated

# --8<-- [start:demo]
LENGTH = 4

tokens, probability, trellis, back_pointers = viterbi(START, NEXT, LENGTH)
print("t  " + "".join(f"{name:>14}" for name in TOKENS))
for step, best in enumerate(trellis):
    cells = []
    for token, p in enumerate(best):
        came_from = f" <- {TOKENS[back_pointers[step - 1][token]]}" if step else ""
        cells.append(f"{p:.4f}{came_from}")
    print(f"{step + 1}  " + "".join(f"{cell:>14}" for cell in cells))
print("Viterbi:", " ".join(TOKENS[t] for t in tokens), f"p = {probability:.6f}")


def joint(sequence):
    """p(x1, ..., xT) by the chain rule of the first-order model."""
    p = START[sequence[0]]
    for t in range(1, len(sequence)):
        p *= NEXT[sequence[t - 1]][sequence[t]]
    return p


# Brute force: score all V^T sequences and keep the best. Viterbi must find the same probability.
every = {sequence: joint(sequence) for sequence in itertools.product(range(len(TOKENS)), repeat=LENGTH)}
best = max(every, key=every.get)
assert abs(every[best] - probability) < 1e-12, (every[best], probability)
print("brute force over", len(every), "sequences:", " ".join(TOKENS[t] for t in best), f"p = {every[best]:.6f}")
# --8<-- [end:demo]
