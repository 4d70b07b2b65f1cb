"""The acceptance rate alpha, measured one way everywhere on the site.

Leviathan et al. (2022, Section 3.1) define alpha as the expected probability that the target
accepts one drafted token, E[sum_x min(p(x), q(x))] over the prefixes the decoder meets. Under
greedy verification p and q are one-hot at the two argmaxes, so min(p, q) sums to 1 when the
argmaxes agree and 0 when they do not; and every prefix the decoder meets is a piece of the
target's own greedy output. So greedy alpha is the *agreement along the target's greedy path*:
let the target write its greedy continuation, then count the positions where the draft's argmax
equals the target's. The model card, the gamma sweep and the calculator presets all use
:func:`greedy_alpha`.

A speculative run also counts its own acceptances (``SpeculativeResult.alpha_per_token``). That
count skips the position after each fully accepted round (the bonus token comes from the target,
never from the draft), so it measures almost the same positions and agrees closely with
:func:`greedy_alpha` on the same prompt.
"""

from __future__ import annotations

from typing import Any

import torch

from inferlab.kvcache import LlamaDecoder, generate_cached
from inferlab.models import as_logits_fn

# Prompts written for this site and never part of the training corpus (the corpus is the Python
# standard library; these are new code, docstrings, comments and English prose). Each kind tests
# something else: code repeats names, docstrings and prose are free text the target is unsure of.
UNSEEN_PROMPTS: dict[str, tuple[str, str]] = {
    "code: a queue class": (
        "code",
        "class TaskQueue:\n    def __init__(self, limit):\n        self.limit = limit\n        self.items = []\n\n"
        "    def push(self, item):\n        if len(self.items) >= self.limit:\n",
    ),
    "code: parse a config line": (
        "code",
        "def parse_setting(line):\n    line = line.strip()\n    if not line or line.startswith('#'):\n"
        "        return None\n    key, _, value = line.partition('=')\n",
    ),
    "code: a loop over files": (
        "code",
        "import os\n\n\ndef count_lines(folder):\n    total = 0\n    for name in os.listdir(folder):\n"
        "        path = os.path.join(folder, name)\n",
    ),
    "docstring: a function": (
        "docstring",
        'def merge_intervals(intervals):\n    """Merge overlapping intervals.\n\n    Each interval is a pair',
    ),
    "docstring: a module": (
        "docstring",
        '"""Utilities for reading and writing small key-value stores.\n\nThe store keeps',
    ),
    "comment: explaining a branch": (
        "comment",
        "    if timeout is None:\n        # No timeout was given, so we wait",
    ),
    "comment: a block header": (
        "comment",
        "# Build the lookup table once, at import time, so that every call",
    ),
    "prose: what a cache is": (
        "prose",
        "A cache keeps the results of earlier work so that the same question does not have to be",
    ),
    "prose: a changelog entry": (
        "prose",
        "This release fixes a bug in the parser and adds support for",
    ),
    "prose: instructions": (
        "prose",
        "To install the package, first create a new virtual environment, then",
    ),
}


def greedy_path(target: Any, input_ids: torch.Tensor, new_tokens: int) -> torch.Tensor:
    """Return the prompt followed by the target's greedy continuation of ``new_tokens`` tokens."""
    if isinstance(target, LlamaDecoder):
        return generate_cached(target, input_ids, new_tokens).tokens
    from inferlab.speculative.runner import IncrementalModel

    runner, ids = IncrementalModel(target, "target"), input_ids
    for _ in range(new_tokens):
        ids = torch.cat([ids, runner.new_logits(ids)[-1].argmax().view(1, 1)], 1)
    return ids


@torch.inference_mode()
def on_greedy_path(
    target: Any, draft: Any, input_ids: torch.Tensor, new_tokens: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (the target's choices, the draft's logits) at each position that predicts a new token of
    the target's greedy continuation: shapes (new_tokens,) and (new_tokens, vocab)."""
    path = greedy_path(target, input_ids, new_tokens)
    # The positions that predict the new tokens: from the prompt's last token to the one before the end.
    predicting = slice(input_ids.shape[1] - 1, path.shape[1] - 1)
    target_choice = as_logits_fn(target)(path)[0, predicting].argmax(-1)
    return target_choice, as_logits_fn(draft)(path)[0, predicting].float()


def greedy_agreement(target: Any, draft: Any, input_ids: torch.Tensor, new_tokens: int) -> tuple[int, int]:
    """Return (agreements, positions): where the draft's argmax equals the target's along its greedy path."""
    if new_tokens < 1:
        raise ValueError(f"new_tokens must be >= 1, got {new_tokens}")
    target_choice, draft_logits = on_greedy_path(target, draft, input_ids, new_tokens)
    return int((target_choice == draft_logits.argmax(-1)).sum()), target_choice.numel()


def greedy_alpha(target: Any, draft: Any, input_ids: torch.Tensor, new_tokens: int) -> float:
    """Return greedy alpha: the fraction of the target's greedy tokens that the draft's argmax predicts."""
    agree, total = greedy_agreement(target, draft, input_ids, new_tokens)
    return agree / total


@torch.inference_mode()
def fit_draft_temperature(target: Any, draft: Any, prompts: list[torch.Tensor], new_tokens: int) -> float:
    """Return the temperature T that makes softmax(draft logits / T) best predict the target's greedy token.

    Temperature scaling (Guo et al. 2017, "On Calibration of Modern Neural Networks"): one number,
    fitted by maximum likelihood on the target's greedy paths from ``prompts``. A draft distilled on
    the target's *soft* labels spreads its probability like the target's sampling distribution, but
    greedy verification accepts a token only when it is the target's argmax, which is far more
    predictable; so T comes out below 1. Dynamic token trees rank paths with the calibrated
    probabilities (:class:`inferlab.speculative.tree.DynamicTree`).
    """
    if not prompts:
        raise ValueError("prompts must hold at least one (1, T) tensor of token ids, got none")
    if isinstance(new_tokens, bool) or not isinstance(new_tokens, int) or new_tokens < 1:
        raise ValueError(f"new_tokens must be an integer >= 1, got {new_tokens!r}")
    for ids in prompts:
        if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.shape[0] != 1 or ids.shape[1] < 1:
            shape = tuple(ids.shape) if isinstance(ids, torch.Tensor) else type(ids).__name__
            raise ValueError(f"prompts must be (1, T) tensors of token ids with T >= 1, got {shape}")
    choices, draft_logits = zip(*(on_greedy_path(target, draft, ids, new_tokens) for ids in prompts), strict=True)
    logits, choice = torch.cat(draft_logits), torch.cat(choices)
    grid = torch.logspace(-2, 1, 61).tolist()  # 0.01 .. 10, 20 points per decade: fine enough for ranking
    losses = [torch.nn.functional.cross_entropy(logits / t, choice).item() for t in grid]
    return grid[losses.index(min(losses))]
