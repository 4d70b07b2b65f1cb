"""Scoring and searching sequences: log-probability, perplexity, greedy, beam search and MAP.

MAP decoding asks for the single most probable sequence, argmax over x_1..x_T of p(x_1..x_T).
Greedy decoding takes the most probable *next* token at every step, which is not the same thing:
an early choice that looks best can lead into a branch whose later tokens are all unlikely. Brute
force finds the MAP sequence by scoring all V^T sequences; for a model of order k, dynamic
programming over the last k tokens (Viterbi at k = 1) finds it in time linear in T.

Every function takes a logits function (``inferlab.models.as_logits_fn``) or a Hugging Face model.
``prompt`` is a list of token ids to continue; a table model starts from its start symbol when
``prompt`` is None.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from inferlab.checks import require_size, require_token_ids
from inferlab.decoding.sampling import check_length, check_samplable, input_vocab_size, start_ids
from inferlab.models import as_logits_fn

DEFAULT_MAX_SEQUENCES = 200_000
MAX_DP_SCORES = 2**27  # 1 GiB of float64 scores in one DP step


@dataclass
class Decoded:
    """A decoded sequence: its new tokens, log p(tokens | prompt), and the operations spent finding it."""

    tokens: list[int]
    logprob: float
    operations: int


def check_model_length(model: Any, length: int) -> None:
    """Raise when a fixed-length table model has no table for the last requested step."""
    max_length = getattr(model, "max_length", None)
    if isinstance(max_length, int) and length > max_length:
        raise ValueError(f"length must be <= {max_length} for this {type(model).__name__}, got {length}")


def next_token_logprobs(logits_fn: Any, ids: torch.Tensor) -> torch.Tensor:
    """Return log p(next token | ids) for each row of a (batch, length) id tensor, as float64.

    Raises NonFiniteError when the model returns NaN or +inf logits: a NaN cannot be ranked, and
    argmax would pick it as if it were the best token.
    """
    logits = logits_fn(ids)[:, -1, :].double()
    check_samplable(logits, f"model's next-token logits after {ids.shape[1]} input ids")
    return torch.log_softmax(logits, dim=-1).cpu()


def output_vocab_size(model: Any) -> int | None:
    """Return how many tokens a model can predict, or None when it does not say."""
    known = getattr(model, "vocab_size", None)
    if isinstance(known, int) and not isinstance(known, bool):
        return known  # a table model: its start symbol is read, never predicted
    return input_vocab_size(model)


# --8<-- [start:sequence_logprob]
def token_logprobs(model: Any, tokens: Sequence[int], prompt: Sequence[int] | None = None) -> list[float]:
    """Return log p(x_t | prompt, x_<t) for each token: the chain rule's factors, one per token."""
    logits_fn = as_logits_fn(model)
    context = start_ids(model, prompt)
    targets = torch.tensor([require_token_ids(tokens, "tokens", output_vocab_size(model))], dtype=torch.long)
    ids = torch.cat([context, targets], dim=1)
    # One forward pass scores every token at once: position i's logits predict token i + 1.
    # This is how training works too (teacher forcing): the true tokens are the inputs.
    logits = logits_fn(ids).double().cpu()[0, context.shape[1] - 1 : -1]  # the positions that predict the targets
    check_samplable(logits, "model's logits")
    predicting = torch.log_softmax(logits, dim=-1)
    return predicting.gather(-1, targets.T.cpu()).squeeze(-1).tolist()


def sequence_logprob(model: Any, tokens: Sequence[int], prompt: Sequence[int] | None = None) -> float:
    """Return log p(tokens | prompt) = the sum of the per-token log-probabilities (chain rule)."""
    return math.fsum(token_logprobs(model, tokens, prompt))


def perplexity(model: Any, tokens: Sequence[int], prompt: Sequence[int] | None = None) -> float:
    """Return exp(mean negative log-likelihood per token): the model's average branching factor."""
    logprobs = token_logprobs(model, tokens, prompt)
    mean_nll = -math.fsum(logprobs) / len(logprobs)
    try:
        return math.exp(mean_nll)
    except OverflowError:  # past ~709.78 the perplexity is beyond float range, which is inf
        return math.inf


# --8<-- [end:sequence_logprob]


# --8<-- [start:greedy]
def greedy_decode(model: Any, length: int, prompt: Sequence[int] | None = None) -> Decoded:
    """Return the sequence built by taking the most probable next token at every step."""
    check_length(length)
    check_model_length(model, length)
    logits_fn = as_logits_fn(model)
    ids = start_ids(model, prompt)
    tokens, logprob, vocab = [], 0.0, 0
    for _ in range(length):
        logprobs = next_token_logprobs(logits_fn, ids)[0]
        vocab = logprobs.numel()
        token = int(logprobs.argmax())  # committed: greedy never revisits this choice
        tokens.append(token)
        logprob += float(logprobs[token])
        ids = torch.cat([ids, torch.tensor([[token]], device=ids.device)], dim=1)
    return Decoded(tokens, logprob, operations=length * vocab)


# --8<-- [end:greedy]


# --8<-- [start:beam]
def beam_search(model: Any, length: int, beam_width: int, prompt: Sequence[int] | None = None) -> Decoded:
    """Return the best of ``beam_width`` partial sequences kept at each step (1 = greedy)."""
    check_length(length)
    check_length(beam_width, "beam_width")
    check_model_length(model, length)
    logits_fn = as_logits_fn(model)
    beams = start_ids(model, prompt)  # (beams, length): every kept prefix
    scores = torch.zeros(1, dtype=torch.float64)  # log p(prefix) of each beam
    operations = 0
    for _ in range(length):
        logprobs = next_token_logprobs(logits_fn, beams)  # (beams, V)
        vocab = logprobs.shape[-1]
        candidates = (scores.unsqueeze(-1) + logprobs).flatten()  # every beam times every next token
        operations += candidates.numel()
        best = torch.topk(candidates, min(beam_width, candidates.numel()))
        parent, token = best.indices // vocab, best.indices % vocab
        beams = torch.cat([beams[parent], token.unsqueeze(-1).to(beams.device)], dim=1)
        scores = best.values
    prompt_length = beams.shape[1] - length
    return Decoded(beams[0, prompt_length:].tolist(), float(scores[0]), operations)


# --8<-- [end:beam]


def vocab_size(model: Any, prompt: Sequence[int] | None = None) -> int:
    """Return how many tokens the model can produce (asks the model once if it does not say)."""
    known = getattr(model, "vocab_size", None) or getattr(as_logits_fn(model), "vocab_size", None)
    if isinstance(known, int):
        return known
    return int(as_logits_fn(model)(start_ids(model, prompt)).shape[-1])


def enumerate_sequences(
    model: Any,
    length: int,
    prompt: Sequence[int] | None = None,
    max_sequences: int = DEFAULT_MAX_SEQUENCES,
) -> list[tuple[list[int], float]]:
    """Return every sequence of ``length`` tokens with its log-probability, in lexicographic order."""
    check_length(length)
    check_length(max_sequences, "max_sequences")
    check_model_length(model, length)
    vocab = vocab_size(model, prompt)
    count = vocab**length
    if count > max_sequences:
        raise ValueError(
            f"brute force would score V^T = {vocab}^{length} = {count} sequences, over "
            f"max_sequences={max_sequences}; lower length, or raise max_sequences if you mean it"
        )
    logits_fn = as_logits_fn(model)
    context = start_ids(model, prompt)
    every = torch.tensor(list(itertools.product(range(vocab), repeat=length)), dtype=torch.long)
    results = []
    for chunk in every.split(4096):
        ids = torch.cat([context.expand(len(chunk), -1), chunk], dim=1)
        logits = logits_fn(ids).double().cpu()[:, context.shape[1] - 1 : -1]
        check_samplable(logits, "model's logits")  # a NaN score would make max() pick at random
        predicting = torch.log_softmax(logits, dim=-1)
        scores = predicting.gather(-1, chunk.unsqueeze(-1)).squeeze(-1).sum(-1)
        results.extend(zip(chunk.tolist(), scores.tolist(), strict=True))
    return results


# --8<-- [start:brute_force]
def map_decode_bruteforce(
    model: Any,
    length: int,
    prompt: Sequence[int] | None = None,
    max_sequences: int = DEFAULT_MAX_SEQUENCES,
) -> Decoded:
    """Return the most probable sequence by scoring all V^T of them (exact, exponential cost)."""
    scored = enumerate_sequences(model, length, prompt, max_sequences)
    tokens, logprob = max(scored, key=lambda item: item[1])
    # Each of the V^T sequences costs T conditional-probability lookups and additions.
    return Decoded(tokens, logprob, operations=len(scored) * length)


# --8<-- [end:brute_force]


# --8<-- [start:viterbi]
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


# --8<-- [end:viterbi]


# Any order k, used by map_decode_dp. The guides teach k = 1 (viterbi above) and leave the
# general recursion, and its cost, to the reader: see docs/decoding/map-dp.md.
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
        # scores[w, x] = delta[w] + log p(x | w): every (state, next token) pair, each one operation.
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


def map_decode_dp(model: Any, length: int, order: int | None = None) -> Decoded:
    """Return the most probable sequence of a k-th order model by dynamic programming (k = 1: Viterbi)."""
    check_length(length)
    if not hasattr(model, "log_conditional"):
        raise TypeError(
            f"map_decode_dp needs a model of finite order (MarkovModel or TableModel), got "
            f"{type(model).__name__}; a transformer looks at the whole prefix, so use beam_search "
            f"or map_decode_bruteforce"
        )
    k = model.order if order is None else order
    if isinstance(k, bool) or not isinstance(k, int) or k < model.order:
        raise ValueError(
            f"order must be an integer >= the model's order {model.order}, got {order!r}: "
            f"a smaller state would forget context the model uses"
        )
    check_model_length(model, length)
    # One step scores every (state, next token) pair at once: V^(k+1) float64 numbers in memory.
    require_size(model.vocab_size ** (k + 1), "order", MAX_DP_SCORES, "scores per DP step, V^(order+1)")
    tokens, logprob, operations = kth_order_dp(lambda step: model.log_conditional(step, k), length, k)
    return Decoded(tokens, logprob, operations)


# --8<-- [start:count_pairs]
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


# --8<-- [end:count_pairs]
