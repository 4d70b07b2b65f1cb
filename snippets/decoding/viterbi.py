"""The k-th order dynamic program (Viterbi at k = 1) against brute force on a random model.

Run it: python viterbi.py. Change ORDER, VOCAB and LENGTH and watch the operation counts:
the DP grows like T * V^(k+1), brute force like T * V^T.
"""

import itertools
import os

import torch


# >>> generated from inferlab/decoding/search.py:map_dp (python -m inferlab.snippetsync)
def kth_order_dp(log_conditional, length: int, order: int) -> tuple[list[int], float, int]:
    """Return (best tokens, their log-probability, operations) for an order-k model; k = 1 is Viterbi.

    ``log_conditional(step)`` gives log p(x_{step+1} | last m tokens) as a tensor of shape
    (V,)*m + (V,) with m = min(step, order): axis i is the i-th context token, the last axis the
    next token.
    """
    # delta[w] = best log-probability of any prefix whose last min(t, k) tokens are w.
    delta = torch.zeros((), dtype=torch.float64)  # t = 0: the empty prefix has probability 1
    back_pointers = []  # for each step t >= k: the best dropped token, for every new state
    operations = 0
    for step in range(length):
        # scores[w, x] = delta[w] + log p(x | w): every (state, next token) pair, V^(m+1) of them.
        scores = delta.unsqueeze(-1) + log_conditional(step)
        operations += scores.numel()
        if order == 0:  # no context: each token is chosen on its own
            delta, best = scores.max(dim=0)
            back_pointers.append(int(best))
        elif step < order:  # the state still grows by one token: nothing to choose yet
            delta = scores
            back_pointers.append(None)
        else:  # new state (w_2..w_k, x): keep the best over the oldest token w_1 that falls out
            delta, best_oldest = scores.max(dim=0)
            back_pointers.append(best_oldest)
    if order == 0:
        return back_pointers, float(delta), operations

    # Read the best final state, then follow the back-pointers to recover the dropped tokens.
    final_state = torch.unravel_index(delta.argmax(), delta.shape)
    tokens = [int(t) for t in final_state]  # the last min(T, k) tokens
    for step in range(length - 1, order - 1, -1):
        state_after_step = tuple(tokens[:order])
        tokens.insert(0, int(back_pointers[step][state_after_step]))
    return tokens, float(delta.max()), operations


# <<< generated

# --8<-- [start:demo]
ORDER, VOCAB = 2, 3
LENGTH = 6 if os.environ.get("INFERLAB_FAST") else 8
generator = torch.Generator().manual_seed(0)

# One random conditional table per context length: tables[m] has shape (V,)*m + (V,).
tables = [torch.rand((VOCAB,) * (m + 1), generator=generator, dtype=torch.float64) for m in range(ORDER + 1)]
tables = [t / t.sum(-1, keepdim=True) for t in tables]


def log_conditional(step):
    """log p(x_{step+1} | the last min(step, ORDER) tokens)."""
    return tables[min(step, ORDER)].log()


def brute_force(length):
    """Score all V^T sequences; return the best and the number of table lookups."""
    best, best_logp = None, -float("inf")
    for seq in itertools.product(range(VOCAB), repeat=length):
        logp = sum(log_conditional(t)[seq[max(0, t - ORDER) : t] + (seq[t],)] for t in range(length))
        if logp > best_logp:
            best, best_logp = list(seq), float(logp)
    return best, best_logp, length * VOCAB**length


for length in range(1, LENGTH + 1):
    dp_tokens, dp_logp, dp_ops = kth_order_dp(log_conditional, length, ORDER)
    bf_tokens, bf_logp, bf_ops = brute_force(length)
    assert abs(dp_logp - bf_logp) < 1e-9, (dp_logp, bf_logp)
    print(f"T={length}: best log p = {dp_logp:.4f}  DP operations = {dp_ops:5d}  brute force = {bf_ops:6d}")
# --8<-- [end:demo]
