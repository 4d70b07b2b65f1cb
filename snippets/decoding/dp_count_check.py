"""Check your own count of the work a k-th order MAP dynamic program does.

A model of order k predicts each token from the last k tokens, so the dynamic program's state is
the last k tokens of a prefix (fewer during the first steps). At every step it scores each
(state, next token) pair once. Fill in my_states and my_operations below with your formulas, then
run: python dp_count_check.py. The script counts the pairs by following the states (no formula
involved) over a grid of T, V and k, and tells you whether your formulas match: exactly, to
leading order as T grows, or not at all.
"""


def my_states(V, k):
    """Your formula: how many different states can the DP be in once T > k? (None = not filled in)"""
    return None


def my_operations(T, V, k):
    """Your formula: how many (state, next token) pairs does the DP score in all, over T steps?"""
    return None


# >>> generated from inferlab/decoding/search.py:count_pairs (python -m inferlab.snippetsync)
def dp_pairs_per_step(vocab: int, length: int, order: int) -> list[int]:
    """Return how many (state, next token) pairs an order-k DP scores at each step, found by following its states.

    The state is the last min(t, k) tokens of the prefix. Appending every token to every state the
    DP can be in, and keeping the last k tokens, gives the states of the next step. No formula is
    involved: this is what a reader's own formula is checked against.
    """
    for name, value, least in (("vocab", vocab, 1), ("length", length, 1), ("order", order, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
    if vocab ** min(order, length - 1) > 10**6:  # the states are kept in a set: refuse before building it
        raise ValueError(f"order must keep vocab^order states <= 10^6 to follow, got {vocab}^{order}")
    states = {()}  # before the first token: a single state, the empty prefix
    pairs_per_step = []
    for step in range(length):
        if step:  # the states after one more token: every state extended by every token, last k kept
            extended = ((*state, token) for state in states for token in range(vocab))
            states = {window[max(0, len(window) - order) :] for window in extended}
        pairs_per_step.append(len(states) * vocab)  # each state is scored once per next token
    return pairs_per_step


# <<< generated

# --8<-- [start:check]
SMALL_T = range(1, 13)  # every point of the grid must match for "exact"
LARGE_T = (100, 1000)  # how the ratio behaves as T grows, for "leading order"
VOCABS, ORDERS = (2, 3, 4), (0, 1, 2, 3)


def counted(V, k):
    """{T: pairs the DP scores in T steps} for T = 0 .. 1000, from one pass over the states."""
    per_step = dp_pairs_per_step(V, max(LARGE_T), k)
    totals, running = {0: 0}, 0
    for T, pairs in enumerate(per_step, start=1):
        running += pairs
        totals[T] = running
    return totals


def ratio(yours, count):
    """yours / count as a float; inf when your formula grows too fast for a float to hold the ratio."""
    try:
        return yours / count
    except OverflowError:
        return float("inf")


def verdict(counts):
    """Compare my_operations with the counts: exact, leading order, or the first place it fails."""
    if my_operations(2, 2, 1) is None:
        return "my_operations not filled in yet"
    mismatches = [(T, V, k) for (V, k), totals in counts.items() for T in SMALL_T if my_operations(T, V, k) != totals[T]]
    if not mismatches:
        return f"exact: your formula gives the DP's count at every T = 1..{max(SMALL_T)}, V in {VOCABS}, k in {ORDERS}"
    T, V, k = mismatches[0]
    first = f"at T={T}, V={V}, k={k} you say {my_operations(T, V, k)}, the DP scores {counts[V, k][T]}"
    for (V, k), totals in counts.items():
        near, far = (ratio(my_operations(T, V, k), totals[T]) for T in LARGE_T)
        if abs(far - 1) > 0.01 or abs(far - 1) > abs(near - 1):  # not close to 1, or not getting closer
            return f"no match: {first}; and at T={max(LARGE_T)}, V={V}, k={k} your formula / the count = {far:.4g}"
    return f"leading order: your formula / the count tends to 1 as T grows, for every V and k (not exact: {first})"


counts = {(V, k): counted(V, k) for V in VOCABS for k in ORDERS}
print(f"{'V':>2} {'k':>2}  pairs scored for T = 1, 2, ..., 6")
for (V, k), totals in counts.items():
    if V < 4:
        print(f"{V:>2} {k:>2}  " + " ".join(f"{totals[T]:>5}" for T in range(1, 7)))
if my_states(2, 1) is None:
    print("states: my_states not filled in yet")
else:
    # Once T > k the window is full: the pairs of one step are the states times V.
    wrong = [(V, k) for (V, k), totals in counts.items() if my_states(V, k) * V != totals[k + 1] - totals[k]]
    print("states: correct" if not wrong else f"states: not right at V={wrong[0][0]}, k={wrong[0][1]}")
print("operations:", verdict(counts))
# --8<-- [end:check]
