"""The guides' own worked example: a three-step model over two tokens where greedy misses MAP."""

from __future__ import annotations

from inferlab.decoding.tables import TableModel

# --8<-- [start:page_table]
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
# --8<-- [end:page_table]


def page_table_model() -> TableModel:
    """Return the guides' three-step, two-token table model (tokens named A and B)."""
    return TableModel([FIRST, SECOND, THIRD], names=["A", "B"])
