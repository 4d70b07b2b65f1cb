"""Decoding: table and k-th order models, greedy, beam search, MAP (brute force and dynamic
programming), temperature / top-k / top-p sampling, perplexity.

Every decoder takes the package's logits-function protocol (``inferlab.models.as_logits_fn``), so
the small tables of the guides and the bundled transformer run through the same code.
"""

from inferlab.decoding.sampling import (
    ancestral_sample,
    apply_temperature,
    distinct_n,
    epsilon_filter,
    eta_filter,
    filter_logits,
    filtered_probs,
    min_p_filter,
    sample_next,
    top_k_filter,
    top_p_filter,
    typical_filter,
)

__all__ = [
    "ancestral_sample",
    "apply_temperature",
    "distinct_n",
    "epsilon_filter",
    "eta_filter",
    "filter_logits",
    "filtered_probs",
    "min_p_filter",
    "sample_next",
    "top_k_filter",
    "top_p_filter",
    "typical_filter",
]

from inferlab.decoding.examples import page_model
from inferlab.decoding.search import (
    Decoded,
    beam_search,
    enumerate_sequences,
    greedy_decode,
    map_decode_bruteforce,
    map_decode_dp,
    perplexity,
    sequence_logprob,
    token_logprobs,
)
from inferlab.decoding.tables import MarkovModel, TableModel

__all__ += [
    "Decoded",
    "MarkovModel",
    "TableModel",
    "beam_search",
    "enumerate_sequences",
    "greedy_decode",
    "map_decode_bruteforce",
    "map_decode_dp",
    "page_model",
    "perplexity",
    "sequence_logprob",
    "token_logprobs",
]
