"""The guides' own worked example: a first-order model over three tokens where greedy misses MAP.

X is the tempting first token, but nothing follows it with confidence; Y is less likely to start
a sequence, and then almost always continues with Y. The greedy-vs-MAP page decodes two tokens
and lists all nine sequences; the dynamic-programming page runs Viterbi on the same model for
four tokens.
"""

from __future__ import annotations

from inferlab.decoding.tables import MarkovModel

# --8<-- [start:page_model]
# Three tokens, "X" = 0, "Y" = 1, "Z" = 2. The numbers are this site's own.
TOKENS = ["X", "Y", "Z"]
START = [0.5, 0.3, 0.2]  # p(x1): X is the most likely first token
NEXT = [  # p(x_t+1 | x_t), one row per previous token; the same table at every step
    [0.36, 0.34, 0.30],  # after X: three weak, nearly equal continuations
    [0.05, 0.85, 0.10],  # after Y: one strong continuation, Y again
    [0.25, 0.15, 0.60],  # after Z
]
# --8<-- [end:page_model]

GREEDY_PAGE_LENGTH = 2  # greedy vs MAP: 3^2 = 9 sequences, few enough to list
VITERBI_PAGE_LENGTH = 4  # the Viterbi trellis: four steps of three states


def page_model() -> MarkovModel:
    """Return the guides' first-order model over the tokens X, Y and Z."""
    return MarkovModel(1, [START, NEXT], names=TOKENS)
