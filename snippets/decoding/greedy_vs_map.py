"""Greedy decoding vs the most probable sequence (MAP) on the guides' three-token model.

Run it: python greedy_vs_map.py. It prints every two-token sequence with its probability, the
sequence greedy decoding builds, and the MAP sequence, so you can see where greedy commits too early.
Edit START or NEXT (each row must sum to 1) and run it again.
"""

import itertools

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

# --8<-- [start:demo]
LENGTH = 2
VOCAB = range(len(TOKENS))


def joint(tokens):
    """p(x1, ..., xT) by the chain rule: p(x1) * p(x2 | x1) * ... (each token depends on the last)."""
    p = START[tokens[0]]
    for t in range(1, len(tokens)):
        p *= NEXT[tokens[t - 1]][tokens[t]]
    return p


def most_likely(distribution):
    """The token with the highest probability in a list of probabilities."""
    return max(VOCAB, key=lambda x: distribution[x])


def greedy(length):
    """Take the most probable next token at each step, never looking back."""
    tokens = [most_likely(START)]
    while len(tokens) < length:
        tokens.append(most_likely(NEXT[tokens[-1]]))
    return tuple(tokens)


def name(tokens):
    return " ".join(TOKENS[t] for t in tokens)


every = {tokens: joint(tokens) for tokens in itertools.product(VOCAB, repeat=LENGTH)}
for tokens, p in every.items():
    print(name(tokens), f"{p:.4f}")
print(f"sum of all {len(every)}:", round(sum(every.values()), 12))

chosen = greedy(LENGTH)
best = max(every, key=every.get)
print("greedy:", name(chosen), f"p = {every[chosen]:.4f}")
print("MAP:   ", name(best), f"p = {every[best]:.4f}")
# --8<-- [end:demo]
