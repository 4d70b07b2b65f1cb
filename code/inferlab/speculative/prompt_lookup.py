"""Prompt lookup: drafting by copying, with no draft model at all.

Inference with Reference (Yang et al. 2023, "LLMA") and prompt lookup decoding (Saxena 2023, the
method behind ``generate(prompt_lookup_num_tokens=...)`` in transformers) notice that outputs often
repeat spans of their input: a summary quotes the document, edited code repeats the code. So the
"draft" is found by string matching: take the last n tokens of the sequence, find where they
occurred before, and propose what followed them there. The target verifies the proposal greedily,
exactly like drafted tokens, so the output is still the target's own greedy output.
"""

from __future__ import annotations

from typing import Any

import torch

from inferlab.speculative.runner import IncrementalModel
from inferlab.speculative.sampler import (
    SpeculativeResult,
    check_decode_args,
    check_gamma,
    check_models_fit,
    verify_greedy,
)


# --8<-- [start:find_draft]
def find_draft(tokens: list[int], max_ngram: int, num_draft: int) -> list[int]:
    """Return up to num_draft tokens that followed the latest earlier occurrence of the last n-gram."""
    for n in range(min(max_ngram, len(tokens) - 1), 0, -1):  # longer matches are more trustworthy
        tail = tokens[-n:]
        # Scan backwards from the latest start that is not the tail itself: recent text predicts best.
        for start in range(len(tokens) - n - 1, -1, -1):
            if tokens[start : start + n] == tail:
                return tokens[start + n : start + n + num_draft]
    return []


# --8<-- [end:find_draft]


# --8<-- [start:decode]
def prompt_lookup_decode(
    target: Any, input_ids: torch.Tensor, max_new_tokens: int, max_ngram: int = 3, num_draft: int = 10
) -> SpeculativeResult:
    """Return the target's greedy continuation, drafted by n-gram lookup in the sequence so far."""
    check_decode_args(input_ids, max_new_tokens)
    check_gamma(max_ngram, "max_ngram")
    check_gamma(num_draft, "num_draft")
    check_models_fit(target, None, input_ids, max_new_tokens)
    model = IncrementalModel(target, "target")
    ids = input_ids.cpu()
    result = SpeculativeResult(ids, prompt_length=ids.shape[1])
    while ids.shape[1] - result.prompt_length < max_new_tokens:
        budget = max_new_tokens - (ids.shape[1] - result.prompt_length) - 1  # the target adds one more
        drafts = find_draft(ids[0].tolist(), max_ngram, min(num_draft, budget)) if budget else []
        target_logits = model.new_logits(torch.cat([ids, torch.tensor([drafts], dtype=torch.long)], 1))
        kept, n_accepted = verify_greedy(target_logits[-(len(drafts) + 1) :], drafts)
        model.rollback(ids.shape[1] + n_accepted)  # forget the copied tokens that turned out wrong
        ids = torch.cat([ids, torch.tensor([kept], dtype=torch.long)], 1)
        result.accepted += n_accepted
        result.drafted += len(drafts)
        result.acceptance_probs += [1.0] * n_accepted + [0.0] * (n_accepted < len(drafts))
        result.accepted_per_round.append(n_accepted)
        result.rounds += 1
    result.sequences = ids
    result.target_calls = model.calls
    return result


# --8<-- [end:decode]
