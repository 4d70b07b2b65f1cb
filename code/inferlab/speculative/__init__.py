"""Speculative decoding: a cheap draft proposes, the target verifies many tokens in one call.

- :func:`speculative_sample`: Leviathan et al. / Chen et al. speculative sampling, exact for any
  draft, KV-cached; temperature 0 gives greedy verification. :func:`speculative_sample_reference`
  is the same algorithm without caches, as the papers write it.
- :func:`prompt_lookup_decode`: drafts copied from earlier text (Inference with Reference).
- :func:`tree_speculative_decode`: SpecInfer-style token trees verified with a tree attention mask.
- :func:`expected_tokens_per_step`, :func:`expected_speedup`, :func:`best_gamma`,
  :func:`arithmetic_cost_increase`: the closed forms of Leviathan et al., Section 3.
"""

from inferlab.speculative.formulas import (
    arithmetic_cost_increase,
    best_gamma,
    expected_accepted_fraction,
    expected_speedup,
    expected_tokens_per_step,
)
from inferlab.speculative.prompt_lookup import find_draft, prompt_lookup_decode
from inferlab.speculative.sampler import (
    SpeculativeResult,
    sample_token,
    speculative_sample,
    speculative_sample_reference,
    verify_drafts,
    verify_greedy,
)
from inferlab.speculative.tree import tree_attention_mask, tree_speculative_decode

__all__ = [
    "SpeculativeResult",
    "arithmetic_cost_increase",
    "best_gamma",
    "expected_accepted_fraction",
    "expected_speedup",
    "expected_tokens_per_step",
    "find_draft",
    "prompt_lookup_decode",
    "sample_token",
    "speculative_sample",
    "speculative_sample_reference",
    "tree_attention_mask",
    "tree_speculative_decode",
    "verify_drafts",
    "verify_greedy",
]
