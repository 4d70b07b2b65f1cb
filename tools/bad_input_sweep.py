"""Feed bad input to every public function of inferlab (but speculative/ and models/) and say how each fared.

``python tools/bad_input_sweep.py`` prints a table of outcomes per module, lists the cases not
handled well, and exits 1 unless at least 95% are handled well and none is a silently wrong
result, a hang or corrupted state. ``tests/test_bad_input.py`` runs the same cases, one test each,
and feeds hypothesis-drawn bad values to the same arguments.

A case is handled well when:

- bad input is refused with a ValueError or TypeError (a named subclass of one included; a missing
  file may be a FileNotFoundError) whose message names the argument, within the time limit, and
  the object it was called on is unchanged afterwards;
- NaN or inf that a function documents as propagated comes out where PyTorch's own
  scaled_dot_product_attention or softmax puts it, never as an invented number.

The outcomes are the ones issue 18 counted: handled well, unclear message, silently wrong result,
hang, corrupted state, obscure crash (any other exception).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import functools
import json
import signal
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

NAN, INF = float("nan"), float("inf")
OUTCOMES = ("handled well", "unclear message", "silently wrong result", "hang", "corrupted state", "obscure crash")
NEVER = ("silently wrong result", "hang", "corrupted state")  # none of these may remain
GOAL = 0.95
TIME_LIMIT_S = 20

# ---------------------------------------------------------------- bad values, by what is allowed

TOKEN_IDS = [[], [1.5], ["3"], [-1], [10**6], "abc", [True]]
KINDS: dict[str, list[Any]] = {
    "count>=1": [0, -1, True, 1.5, "2", None],
    "count>=0": [-1, True, 0.5, "0", None],
    "count>=1 or None": [0, -1, True, 1.5, "2"],
    "count>=0 or None": [-1, True, 0.5, "0"],
    "positive": [0, -1.0, NAN, INF, True, "1", None],
    "positive or None": [0, -1.0, NAN, INF, True, "1"],
    "nonnegative": [-1.0, NAN, INF, True, "1", None],
    "probability (0, 1]": [0, -0.1, 1.5, NAN, INF, True, "0.5", None],
    "probability (0, 1] or None": [0, -0.1, 1.5, NAN, INF, True, "0.5"],
    "probability [0, 1]": [-0.1, 1.5, NAN, True, "0.5", None],
    "probability [0, 1] or None": [-0.1, 1.5, NAN, True, "0.5"],
    "probability (0, 1)": [0, 1, -0.1, 1.5, NAN, True, "0.5", None],
    "probability (0, 1) or None": [0, 1, -0.1, 1.5, NAN, True, "0.5"],
    "bool": ["yes", "no", 1, 0, None],
    "token ids": [*TOKEN_IDS, None],
    "token ids or None": TOKEN_IDS,
    "token ids, any size": [[], [1.5], ["3"], [-1], "abc", [True], None],
    "tensor": ["x", None, [[1.0, 2.0]], 3.0],
}


@dataclass
class Case:
    """One bad call: what it is, how to make it, and what a good answer is."""

    module: str
    function: str
    what: str
    call: Callable[[], Any]
    argument: str | None = None  # the name a refusal must contain; None: the call must return
    check: Callable[[Any], bool] | None = None  # for a call that must return: is the result right?
    state: Callable[[], Any] | None = None  # a snapshot that must be equal before and after the call
    errors: tuple[type[BaseException], ...] = (ValueError, TypeError)

    @property
    def name(self) -> str:
        return f"{self.module}.{self.function}: {self.what}"


class Fresh:
    """An object made on first use, so a case and its state snapshot share one, and no case shares it."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self.factory, self.made = factory, None

    def __call__(self) -> Any:
        if self.made is None:
            self.made = self.factory()
        return self.made


# ---------------------------------------------------------------- small fixtures


@functools.cache
def table_model():
    from inferlab.decoding import page_model

    return page_model()


@functools.cache
def two_step_table():
    """A model over exactly two steps: it has no table for a third."""
    from inferlab.decoding import TableModel

    return TableModel([[0.5, 0.5], [[0.9, 0.1], [0.2, 0.8]]])


@functools.cache
def markov():
    from inferlab.decoding import MarkovModel

    return MarkovModel.random(1, 3, seed=0)


def nan_model(input_ids: torch.Tensor) -> torch.Tensor:
    """A logits function gone wrong: NaN for every token."""
    return torch.full((*input_ids.shape, 4), NAN)


def logits() -> torch.Tensor:
    return torch.tensor([[2.0, 1.0, 0.5, -1.0], [0.0, 0.1, 0.2, 0.3]])


@functools.cache
def decoder_config():
    from inferlab.kvcache import DecoderConfig

    return DecoderConfig(32, 16, 32, num_layers=1, num_heads=2, num_kv_heads=1, head_dim=8, max_positions=64)


@functools.cache
def decoder():
    from inferlab.kvcache import LlamaDecoder

    torch.manual_seed(0)
    return LlamaDecoder(decoder_config()).eval()


def config_with(**changes):
    from inferlab.kvcache import DecoderConfig

    return DecoderConfig(**{**dataclasses.asdict(decoder_config()), **changes})


def qkv(n: int = 6, d: int = 8, dtype=torch.float32):
    generator = torch.Generator().manual_seed(0)
    return tuple(torch.randn(2, n, d, generator=generator, dtype=dtype) for _ in range(3))


def backward_args():
    from inferlab.flash import flash_attention

    out, lse = flash_attention(*qkv(), return_lse=True)
    return out, lse, torch.ones_like(out)


def decoder_qkv():
    h = torch.randn(1, 3, 16, generator=torch.Generator().manual_seed(1))
    return decoder().layers[0].qkv(h, torch.arange(3))


def paged_inputs():
    """q for 1 sequence of 1 query, a pool of 4 blocks of 2, its table and its length."""
    generator = torch.Generator().manual_seed(2)
    q = torch.randn(1, 2, 1, 8, generator=generator)
    pool = torch.randn(4, 2, 1, 8, generator=generator)
    return q, pool, pool.clone(), torch.tensor([[0, 1]]), torch.tensor([3])


def manager():
    from inferlab.paged import BlockManager

    made = BlockManager(4, 2)
    made.allocate("a", [1, 2, 3])
    return made


def manager_state(made) -> Any:
    return copy.deepcopy(
        (made.blocks, list(made.free_queue), made.cached, made.sequences)
        + (made.prefix_cache_queries, made.prefix_cache_hits)
    )


def engine():
    from inferlab.paged import MiniEngine

    made = MiniEngine(decoder(), num_blocks=8, block_size=4)
    made.add_request([1, 2, 3], 2)
    return made


def engine_state(made) -> Any:
    return (len(made.waiting), len(made.running), made._next_id, manager_state(made.blocks))


def poisoned(tensor: torch.Tensor, value: float, index=(0, 2, 1)) -> torch.Tensor:
    tensor = tensor.clone()
    tensor[index] = value
    return tensor


def like(reference: torch.Tensor) -> Callable[[Any], bool]:
    """Return a check: NaN exactly where the reference has NaN, and close to it elsewhere."""

    def check(result) -> bool:
        result = result[0] if isinstance(result, tuple) else result
        if not isinstance(result, torch.Tensor) or result.shape != reference.shape:
            return False
        nan = torch.isnan(reference)
        return torch.equal(torch.isnan(result), nan) and torch.allclose(result[~nan], reference[~nan], atol=1e-5)

    return check


def sdpa(q, k, v, causal=False):
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


# ---------------------------------------------------------------- one argument at a time


def argument_specs() -> list[tuple[str, str, str, str, Callable[[Any], Any], Callable[[], Any] | None]]:
    """Return (module, function, argument, kind, call with a value, fresh object or None) for each argument."""
    from inferlab import bench, decoding, flash, kvcache, paged
    from inferlab.decoding.search import viterbi
    from inferlab.paged import labs, offload

    d, f, k, p = decoding, flash, kvcache, paged
    lg, table = logits, table_model
    return [
        ("decoding", "apply_temperature", "temperature", "positive", lambda x: d.apply_temperature(lg(), x), None),
        ("decoding", "top_k_filter", "k", "count>=1", lambda x: d.top_k_filter(lg(), x), None),
        ("decoding", "top_k_filter", "min_tokens_to_keep", "count>=1", lambda x: d.top_k_filter(lg(), 2, x), None),
        ("decoding", "top_p_filter", "p", "probability (0, 1]", lambda x: d.top_p_filter(lg(), x), None),
        ("decoding", "top_p_filter", "min_tokens_to_keep", "count>=1", lambda x: d.top_p_filter(lg(), 0.5, x), None),
        ("decoding", "min_p_filter", "min_p", "probability [0, 1]", lambda x: d.min_p_filter(lg(), x), None),
        ("decoding", "typical_filter", "typical_p", "probability (0, 1)", lambda x: d.typical_filter(lg(), x), None),
        ("decoding", "epsilon_filter", "epsilon", "probability (0, 1)", lambda x: d.epsilon_filter(lg(), x), None),
        ("decoding", "eta_filter", "eta", "probability (0, 1)", lambda x: d.eta_filter(lg(), x), None),
        ("decoding", "filter_logits", "temperature", "positive", lambda x: d.filter_logits(lg(), x), None),
        ("decoding", "filter_logits", "top_k", "count>=1 or None", lambda x: d.filter_logits(lg(), top_k=x), None),
        ("decoding", "filter_logits", "top_p", "probability (0, 1] or None", lambda x: d.filter_logits(lg(), top_p=x), None),
        ("decoding", "filter_logits", "min_p", "probability [0, 1] or None", lambda x: d.filter_logits(lg(), min_p=x), None),
        ("decoding", "filter_logits", "typical_p", "probability (0, 1) or None", lambda x: d.filter_logits(lg(), typical_p=x), None),
        ("decoding", "filter_logits", "eta", "probability (0, 1) or None", lambda x: d.filter_logits(lg(), eta=x), None),
        ("decoding", "filter_logits", "min_tokens_to_keep", "count>=1", lambda x: d.filter_logits(lg(), min_tokens_to_keep=x), None),
        ("decoding", "filtered_probs", "temperature", "positive", lambda x: d.filtered_probs(lg(), x), None),
        ("decoding", "filtered_probs", "logits", "tensor", lambda x: d.filtered_probs(x), None),
        ("decoding", "sample_next", "top_p", "probability (0, 1] or None", lambda x: d.sample_next(lg(), top_p=x), None),
        ("decoding", "sample_next", "logits", "tensor", lambda x: d.sample_next(x), None),
        ("decoding", "ancestral_sample", "length", "count>=1", lambda x: d.ancestral_sample(table(), x), None),
        ("decoding", "ancestral_sample", "num_samples", "count>=1", lambda x: d.ancestral_sample(table(), 1, num_samples=x), None),
        ("decoding", "ancestral_sample", "prompt", "token ids or None", lambda x: d.ancestral_sample(markov(), 1, prompt=x), None),
        ("decoding", "distinct_n", "n", "count>=1", lambda x: d.distinct_n([[1, 2, 3]], x), None),
        ("decoding", "greedy_decode", "length", "count>=1", lambda x: d.greedy_decode(table(), x), None),
        ("decoding", "greedy_decode", "prompt", "token ids or None", lambda x: d.greedy_decode(markov(), 1, prompt=x), None),
        ("decoding", "beam_search", "beam_width", "count>=1", lambda x: d.beam_search(table(), 2, x), None),
        ("decoding", "token_logprobs", "tokens", "token ids", lambda x: d.token_logprobs(table(), x), None),
        ("decoding", "perplexity", "tokens", "token ids", lambda x: d.perplexity(table(), x), None),
        ("decoding", "enumerate_sequences", "max_sequences", "count>=1", lambda x: d.enumerate_sequences(table(), 2, max_sequences=x), None),
        ("decoding", "map_decode_dp", "length", "count>=1", lambda x: d.map_decode_dp(table(), x), None),
        ("decoding", "MarkovModel.random", "vocab_size", "count>=1", lambda x: d.MarkovModel.random(1, x), None),
        ("decoding", "MarkovModel.random", "order", "count>=0", lambda x: d.MarkovModel.random(x, 3), None),
        ("decoding", "MarkovModel.random", "concentration", "positive", lambda x: d.MarkovModel.random(1, 3, concentration=x), None),
        ("decoding", "MarkovModel.log_conditional", "step", "count>=0", lambda x: markov().log_conditional(x), None),
        ("decoding", "viterbi", "length", "count>=1", lambda x: viterbi([0.5, 0.5], [[0.5, 0.5], [0.5, 0.5]], x), None),
        ("flash", "standard_attention", "causal", "bool", lambda x: f.standard_attention(*qkv(), causal=x), None),
        ("flash", "standard_attention", "scale", "positive or None", lambda x: f.standard_attention(*qkv(), scale=x), None),
        ("flash", "standard_attention", "q", "tensor", lambda x: f.standard_attention(x, *qkv()[1:]), None),
        ("flash", "flash_attention", "causal", "bool", lambda x: f.flash_attention(*qkv(), causal=x), None),
        ("flash", "flash_attention", "block_q", "count>=1", lambda x: f.flash_attention(*qkv(), block_q=x), None),
        ("flash", "flash_attention", "block_k", "count>=1", lambda x: f.flash_attention(*qkv(), block_k=x), None),
        ("flash", "flash_attention", "k", "tensor", lambda x: f.flash_attention(qkv()[0], x, qkv()[2]), None),
        ("flash", "flash_attention", "return_lse", "bool", lambda x: f.flash_attention(*qkv(), return_lse=x), None),
        ("flash", "flash_attention_backward", "causal", "bool", lambda x: f.flash_attention_backward(*qkv(), *backward_args(), causal=x), None),
        ("flash", "causal_mask", "n_q", "count>=0", lambda x: f.causal_mask(x, 4), None),
        ("flash", "hbm_traffic", "N", "count>=1", lambda x: f.hbm_traffic(x, 64, "flash"), None),
        ("flash", "hbm_traffic", "d", "count>=1", lambda x: f.hbm_traffic(64, x, "standard"), None),
        ("flash", "hbm_traffic", "block_q", "count>=1 or None", lambda x: f.hbm_traffic(64, 64, "flash", block_q=x), None),
        ("flash", "hbm_traffic", "causal", "bool", lambda x: f.hbm_traffic(64, 64, "flash", causal=x), None),
        ("flash", "blocks_from_sram", "sram_bytes", "count>=1", lambda x: f.blocks_from_sram(x, 64), None),
        ("flash", "attention_flops", "N", "count>=1", lambda x: f.attention_flops(x, 64), None),
        ("flash", "attention_flops", "causal", "bool", lambda x: f.attention_flops(64, 64, causal=x), None),
        ("flash", "estimate_runtime", "flops", "nonnegative", lambda x: f.estimate_runtime(x, 1.0, "T4"), None),
        ("flash", "estimate_runtime", "bytes_moved", "nonnegative", lambda x: f.estimate_runtime(1.0, x, "T4"), None),
        ("kvcache", "kv_cache_bytes", "tokens", "count>=0", lambda x: k.kv_cache_bytes("Llama-3.2-3B", x), None),
        ("kvcache", "kv_cache_bytes", "batch", "count>=0", lambda x: k.kv_cache_bytes("Llama-3.2-3B", 8, x), None),
        ("kvcache", "max_batch_size", "tokens", "count>=1", lambda x: k.max_batch_size("Llama-3.2-3B", x, 10**9), None),
        ("kvcache", "max_batch_size", "free_bytes", "count>=0", lambda x: k.max_batch_size("Llama-3.2-3B", 8, x), None),
        ("kvcache", "generate_cached", "max_new_tokens", "count>=0", lambda x: k.generate_cached(decoder(), torch.tensor([[1, 2]]), x), None),
        ("kvcache", "generate_naive", "max_new_tokens", "count>=0", lambda x: k.generate_naive(decoder(), torch.tensor([[1, 2]]), x), None),
        ("kvcache", "generate_cached", "input_ids", "tensor", lambda x: k.generate_cached(decoder(), x, 2), None),
        ("kvcache", "KVCache", "batch", "count>=1", lambda x: k.KVCache(decoder(), x, 8), None),
        ("kvcache", "KVCache", "max_tokens", "count>=1", lambda x: k.KVCache(decoder(), 1, x), None),
        ("kvcache", "causal_attention", "causal", "bool", lambda x: k.causal_attention(*decoder_qkv(), causal=x), None),
        ("kvcache", "causal_attention", "q_start", "count>=0", lambda x: k.causal_attention(*decoder_qkv(), q_start=x), None),
        ("kvcache", "DecoderConfig", "num_layers", "count>=1", lambda x: config_with(num_layers=x), None),
        ("kvcache", "DecoderConfig", "rope_theta", "positive", lambda x: config_with(rope_theta=x), None),
        ("kvcache", "DecoderConfig", "rms_norm_eps", "positive", lambda x: config_with(rms_norm_eps=x), None),
        ("kvcache", "DecoderConfig", "tie_embeddings", "bool", lambda x: config_with(tie_embeddings=x), None),
        ("paged", "hash_chain", "block_size", "count>=1", lambda x: p.hash_chain([1, 2, 3, 4], x), None),
        ("paged", "BlockManager", "num_blocks", "count>=1", lambda x: p.BlockManager(x), None),
        ("paged", "BlockManager", "enable_prefix_caching", "bool", lambda x: p.BlockManager(4, enable_prefix_caching=x), None),
        ("paged", "BlockManager.allocate", "token_ids", "token ids, any size", lambda x, m: m().allocate("b", x), manager),
        ("paged", "BlockManager.append", "token_id", "count>=0", lambda x, m: m().append("a", x), manager),
        ("paged", "MiniEngine.add_request", "prompt_ids", "token ids", lambda x, m: m().add_request(x, 2), engine),
        ("paged", "MiniEngine.add_request", "max_new_tokens", "count>=1", lambda x, m: m().add_request([1, 2], x), engine),
        ("paged", "MiniEngine", "max_batch_size", "count>=1", lambda x: p.MiniEngine(decoder(), num_blocks=4, max_batch_size=x), None),
        ("paged", "MiniEngine", "eos_token_id", "count>=0 or None", lambda x: p.MiniEngine(decoder(), num_blocks=4, eos_token_id=x), None),
        ("paged", "paged_attention", "context_lens", "tensor", lambda x: p.paged_attention(*paged_inputs()[:4], x), None),
        ("paged", "offload.step_seconds", "offloaded_bytes", "nonnegative", lambda x: offload.step_seconds(1e9, x, "T4"), None),
        ("paged", "offload.tokens_per_second", "batch", "count>=1", lambda x: offload.tokens_per_second(1e9, 0, "T4", x), None),
        ("paged", "offload.kv_capacity_tokens", "gpu_memory_utilization", "probability (0, 1]", lambda x: offload.kv_capacity_tokens(1e9, 0, "T4", 1000, x), None),
        ("paged", "offload.kv_capacity_tokens", "kv_bytes_per_token", "positive", lambda x: offload.kv_capacity_tokens(1e9, 0, "T4", x), None),
        ("paged", "fragmentation_example", "max_len", "count>=1", lambda x: labs.fragmentation_example([5], x), None),
        ("bench", "time_call", "repeat", "count>=1", lambda x: bench.time_call(lambda: None, repeat=x), None),
        ("bench", "time_call", "warmup", "count>=0", lambda x: bench.time_call(lambda: None, warmup=x), None),
        ("bench", "time_interleaved", "repeat", "count>=1", lambda x: bench.time_interleaved({"a": lambda: None}, repeat=x), None),
    ]  # fmt: skip


def argument_case(spec, value) -> Case:
    """Return the case that calls one spec's function with one bad value of its argument."""
    module, function, argument, kind, call, factory = spec
    if factory is None:
        return Case(module, function, f"{argument}={value!r}", functools.partial(call, value), argument)
    made = Fresh(factory)
    snapshot = manager_state if function.startswith("BlockManager") else engine_state
    return Case(
        module,
        function,
        f"{argument}={value!r}",
        functools.partial(call, value, made),
        argument,
        state=lambda: snapshot(made()),
    )


def argument_cases() -> list[Case]:
    return [argument_case(spec, value) for spec in argument_specs() for value in KINDS[spec[3]]]


# ---------------------------------------------------------------- NaN, resources, files, state


def special_cases() -> list[Case]:
    """Return the cases one bad argument value does not cover: NaN and inf, sizes, files, models."""
    from inferlab import bench, decoding, flash, kvcache, paged
    from inferlab.decoding.search import dp_pairs_per_step, viterbi

    q, k, v = qkv()
    nan_q, inf_k, nan_v = poisoned(q, NAN), poisoned(k, INF), poisoned(v, NAN)
    cases = [
        # NaN and inf in attention: propagated exactly as PyTorch's SDPA does (its output is the reference).
        *(
            Case("flash", name, f"{label} (propagates like SDPA)", functools.partial(fn, *args), check=like(sdpa(*args)))
            for name, fn in (("standard_attention", flash.standard_attention), ("flash_attention", flash.flash_attention))
            for label, args in (("NaN in q", (nan_q, k, v)), ("inf in k", (q, inf_k, v)), ("NaN in v", (q, k, nan_v)))
        ),
        Case(
            "flash",
            "flash_attention",
            "NaN in q, causal (propagates like SDPA)",
            lambda: flash.flash_attention(nan_q, k, v, causal=True),
            check=like(sdpa(nan_q, k, v, causal=True)),
        ),
        Case(
            "flash",
            "flash_attention",
            "float64 keeps float64 (gradcheck)",
            lambda: torch.autograd.gradcheck(
                lambda a, b, c: flash.FlashAttention.apply(a, b, c, True, 2, 2),
                tuple(t[:1, :4].clone().requires_grad_() for t in qkv(dtype=torch.float64)),
            ),
            check=lambda passed: passed is True,
        ),
        # NaN, inf and empty rows in sampling: refused by name (NonFiniteError is a ValueError).
        Case("decoding", "filtered_probs", "NaN logits", lambda: decoding.filtered_probs(poisoned(logits(), NAN, (0, 1))), "logits"),
        Case("decoding", "filtered_probs", "all -inf row", lambda: decoding.filtered_probs(torch.full((1, 4), -INF)), "logits"),
        Case("decoding", "filtered_probs", "+inf logit", lambda: decoding.filtered_probs(poisoned(logits(), INF, (1, 2))), "logits"),
        Case(
            "decoding",
            "filtered_probs",
            "temperature=1e-39 (the argmax, not NaN)",
            lambda: decoding.filtered_probs(logits(), 1e-39),
            check=lambda probs: torch.equal(probs, F.one_hot(logits().argmax(-1), 4).float()),
        ),
        Case("decoding", "sample_next", "NaN logits", lambda: decoding.sample_next(poisoned(logits(), NAN, (0, 1))), "logits"),
        Case("decoding", "sample_next", "3-dim logits", lambda: decoding.sample_next(logits()[None]), "logits"),
        Case("decoding", "greedy_decode", "NaN model", lambda: decoding.greedy_decode(nan_model, 2, prompt=[0]), "model"),
        Case("decoding", "beam_search", "NaN model", lambda: decoding.beam_search(nan_model, 2, 2, prompt=[0]), "model"),
        Case("decoding", "perplexity", "NaN model", lambda: decoding.perplexity(nan_model, [1, 2], prompt=[0]), "model"),
        Case("decoding", "ancestral_sample", "NaN model", lambda: decoding.ancestral_sample(nan_model, 2, prompt=[0]), "model"),
        Case("decoding", "map_decode_bruteforce", "NaN model", lambda: decoding.map_decode_bruteforce(nan_model, 2, prompt=[0]), "model"),
        Case("decoding", "greedy_decode", "table model past its steps", lambda: decoding.greedy_decode(two_step_table(), 3), "length"),
        Case("decoding", "ancestral_sample", "table model past its steps", lambda: decoding.ancestral_sample(two_step_table(), 3), "length"),
        Case("decoding", "distinct_n", "sequences=None", lambda: decoding.distinct_n(None, 2), "sequences"),
        Case("decoding", "viterbi", "an empty start", lambda: viterbi([], [], 2), "start"),
        Case("decoding", "viterbi", "NaN in start", lambda: viterbi([NAN, 1.0], [[0.5, 0.5], [0.5, 0.5]], 2), "start"),
        Case("decoding", "viterbi", "a short transition row", lambda: viterbi([0.5, 0.5], [[0.5, 0.5], [1.0]], 2), "transition"),
        Case("decoding", "dp_pairs_per_step", "10^9 states to follow", lambda: dp_pairs_per_step(1000, 5, 3), "order"),
        Case("decoding", "MarkovModel", "tables=None", lambda: decoding.MarkovModel(1, None), "tables"),
        Case("decoding", "MarkovModel", "a row summing to 0.9", lambda: decoding.MarkovModel(0, [[0.5, 0.4]]), "tables"),
        Case("decoding", "MarkovModel", "NaN in a table", lambda: decoding.MarkovModel(0, [[NAN, 1.0]]), "tables"),
        # Sizes: refused before allocating, with the size it would take.
        Case("decoding", "MarkovModel.random", "order=12 over 1000 tokens", lambda: decoding.MarkovModel.random(12, 1000), "order"),
        Case("decoding", "ancestral_sample", "num_samples=10**9", lambda: decoding.ancestral_sample(table_model(), 1, num_samples=10**9), "num_samples"),
        Case("decoding", "map_decode_dp", "order=9 over 50 tokens", lambda: decoding.map_decode_dp(decoding.MarkovModel.random(1, 50), 3, order=9), "order"),
        Case("paged", "BlockManager", "num_blocks=10**9", lambda: paged.BlockManager(10**9), "num_blocks"),
        Case("paged", "MiniEngine", "num_blocks=10**9", lambda: paged.MiniEngine(decoder(), num_blocks=10**9), "num_blocks"),
        Case("paged", "MiniEngine", "a pool larger than memory", lambda: paged.MiniEngine(decoder(), num_blocks=1000, block_size=2**30), "num_blocks"),
        Case("flash", "hbm_traffic", "10**9 causal query tiles", lambda: flash.hbm_traffic(10**9, 64, "flash", block_q=1, causal=True), "block_q"),
        Case("kvcache", "KVCache", "batch=10**7 (80 GB)", lambda: kvcache.KVCache(decoder(), 10**7, 64), "batch"),
        # Helpers that are exported: each checks its own arguments.
        Case("flash", "estimate_runtime", "NaN FLOPs", lambda: flash.estimate_runtime(NAN, 1.0, "T4"), "flops"),
        Case("flash", "estimate_runtime", "a GPU with bandwidth 0", lambda: flash.estimate_runtime(1.0, 1.0, dataclasses.replace(flash.GPU_PRESETS["T4"], bandwidth_gbs=0.0)), "gpu"),
        Case("kvcache", "kv_cache_bytes", "kv_heads=0", lambda: kvcache.kv_cache_bytes({"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 0, "head_dim": 8}, 8), "config"),
        Case("kvcache", "kv_cache_bytes", "heads that do not divide hidden_size", lambda: kvcache.kv_cache_bytes({"num_hidden_layers": 2, "num_attention_heads": 5, "hidden_size": 32}, 8), "config"),
        Case("kvcache", "kv_cache_bytes", "layers=True", lambda: kvcache.kv_cache_bytes({"num_hidden_layers": True, "num_attention_heads": 4, "head_dim": 8}, 8), "config"),
        Case("kvcache", "attention_variants", "no head count", lambda: kvcache.attention_variants({"num_hidden_layers": 2, "num_key_value_heads": 2, "head_dim": 8}), "config"),
        Case("kvcache", "DecoderConfig", "vocab_size=True", lambda: config_with(vocab_size=True), "vocab_size"),
        Case("kvcache", "DecoderConfig", "rms_norm_eps=-1e-6", lambda: config_with(rms_norm_eps=-1e-6), "rms_norm_eps"),
        Case("kvcache", "DecoderConfig", "rope_theta=0 (NaN before)", lambda: config_with(rope_theta=0), "rope_theta"),
        Case("kvcache", "LlamaDecoder", "config={}", lambda: kvcache.LlamaDecoder({}), "config"),
        Case("kvcache", "LlamaDecoder.forward", "ids out of the vocabulary", lambda: decoder()(torch.tensor([[1, 99]])), "ids"),
        Case("kvcache", "generate_naive", "ids out of the vocabulary", lambda: kvcache.generate_naive(decoder(), torch.tensor([[1, 99]]), 2), "input_ids"),
        Case("kvcache", "generate_cached", "float ids", lambda: kvcache.generate_cached(decoder(), torch.tensor([[1.0, 2.0]]), 2), "input_ids"),
        Case("paged", "paged_attention", "context_lens 0", lambda: paged.paged_attention(*paged_inputs()[:4], torch.tensor([0])), "context_lens"),
        Case("paged", "paged_attention", "context_lens past the block table", lambda: paged.paged_attention(*paged_inputs()[:4], torch.tensor([5])), "context_lens"),
        Case("paged", "paged_attention", "a block id past the pool", lambda: paged.paged_attention(*paged_inputs()[:3], torch.tensor([[0, 9]]), torch.tensor([3])), "block_tables"),
        Case("paged", "write_kv", "a slot past the pool", lambda: paged.write_kv(*paged_inputs()[1:3], torch.zeros(1, 1, 8), torch.zeros(1, 1, 8), torch.tensor([8])), "slots"),
        Case("paged", "offload.step_seconds", "NaN weight bytes", lambda: paged_offload().step_seconds(NAN, 0, "T4"), "weight_bytes"),
        Case("paged", "fragmentation_example", "no lengths", lambda: paged_labs().fragmentation_example([], 40), "lengths"),
        Case("bench", "time_call", "fn=None", lambda: bench.time_call(None), "fn"),
        Case("bench", "read_result", "name='../x'", lambda: bench.read_result("../x"), "name"),
        Case("bench", "time_interleaved", "fns=[]", lambda: bench.time_interleaved([]), "fns"),
        Case("flash", "triton_attention", "causal='yes'", lambda: flash.triton_attention(*qkv(), causal="yes"), "causal"),
        Case("flash", "flash_attention_for_transformers", "dropout=0.1", lambda: flash.flash_attention_for_transformers(None, *(t[None] for t in qkv()), None, dropout=0.1), "dropout"),
        Case("kvcache", "bytes_per_element", "dtype='fp4'", lambda: kvcache.bytes_per_element("fp4"), "dtype"),
        Case("kvcache", "cache_shape", "an unknown preset", lambda: kvcache.cache_shape("GPT-5"), "config"),
        Case("paged", "hash_chain", "block_size=-1 (returned [] before)", lambda: paged.hash_chain([1, 2, 3], -1), "block_size"),
    ]  # fmt: skip
    return cases + stateful_cases() + file_cases()


def paged_offload():
    from inferlab.paged import offload

    return offload


def paged_labs():
    from inferlab.paged import labs

    return labs


def stateful_cases() -> list[Case]:
    """Return refused calls on objects that hold state: the state must be as before."""
    cases = []
    refusals = [  # (function, what, call on the object, argument, factory, snapshot)
        ("BlockManager.allocate", "seq_id already allocated", lambda m: m.allocate("a", [4]), "seq_id", manager, manager_state),
        ("BlockManager.allocate", "seq_id=[] (unhashable)", lambda m: m.allocate([], [4]), "seq_id", manager, manager_state),
        ("BlockManager.allocate", "extra_keys='lora'", lambda m: m.allocate("b", [4], extra_keys="lora"), "extra_keys", manager, manager_state),
        ("BlockManager.free", "an unknown seq_id", lambda m: m.free("zzz"), "seq_id", manager, manager_state),
        ("BlockManager.free", "a double free", lambda m: (m.free("a"), m.free("a")), "seq_id", manager, None),
        ("MiniEngine.add_request", "a request that can never fit", lambda e: e.add_request([1] * 40, 2), "max_new_tokens", engine, engine_state),
        ("MiniEngine.add_request", "prompt past the positions", lambda e: e.add_request([1] * 60, 10), "max_new_tokens", engine, engine_state),
    ]  # fmt: skip
    for function, what, call, argument, factory, snapshot in refusals:
        made = Fresh(factory)
        state = (lambda s=snapshot, m=made: s(m())) if snapshot else None
        errors = (ValueError, TypeError, KeyError)  # an unknown id is a KeyError, as for a dict
        cases.append(Case("paged", function, what, lambda c=call, m=made: c(m()), argument, state=state, errors=errors))

    def cache_and_ids(ids):
        from inferlab.kvcache import KVCache, forward_with_cache

        cache = KVCache(decoder(), 1, 4)
        forward_with_cache(decoder(), cache, torch.tensor([[1, 2, 3]]))
        return cache, ids

    for what, ids, argument in (
        ("past the cache's room", torch.tensor([[4, 5]]), "ids"),
        ("a batch of 2 for a cache of 1", torch.tensor([[4], [5]]), "ids"),
        ("ids out of the vocabulary", torch.tensor([[99]]), "ids"),
    ):
        made = Fresh(lambda ids=ids: cache_and_ids(ids))
        cases.append(
            Case(
                "kvcache",
                "forward_with_cache",
                what,
                lambda m=made: kvcache_forward(decoder(), m()[0], m()[1]),
                argument,
                state=lambda m=made: (m()[0].length, m()[0].keys.clone(), m()[0].values.clone()),
            )
        )
    return cases


def kvcache_forward(model, cache, ids):
    from inferlab.kvcache import forward_with_cache

    return forward_with_cache(model, cache, ids)


def file_cases() -> list[Case]:
    """Return result-file and checkpoint cases: refused naming the file, and nothing half-written."""
    from inferlab import bench
    from inferlab.kvcache import LlamaDecoder

    folder = Path(tempfile.mkdtemp(prefix="inferlab-sweep-"))
    results = folder / "results"

    def with_results(call):
        def run():
            import os

            old = os.environ.get(bench.RESULTS_ENV)
            os.environ[bench.RESULTS_ENV] = str(results)
            try:
                return call()
            finally:
                if old is None:
                    os.environ.pop(bench.RESULTS_ENV)
                else:
                    os.environ[bench.RESULTS_ENV] = old

        return run

    def kept_file():
        """Return the kept result file and the folder's listing (writing the file the first time only)."""
        if not (results / "kept.json").exists():
            with_results(lambda: bench.write_result("kept", {"speedup": 2.0}))()
        return (results / "kept.json").read_bytes(), sorted(p.name for p in results.iterdir())

    cases = [
        Case("bench", "write_result", what, with_results(call), argument, state=kept_file)
        for what, call, argument in (
            ("a NaN value", lambda: bench.write_result("kept", {"speedup": NAN}), "values"),
            ("an inf deep in a list", lambda: bench.write_result("kept", {"rows": [{"t": INF}]}), "values"),
            ("an object that is not JSON", lambda: bench.write_result("kept", {"z": object()}), "values"),
            ("values=[1, 2]", lambda: bench.write_result("kept", [1, 2]), "values"),
            ("values=None", lambda: bench.write_result("kept", None), "values"),
            ("name='x.json'", lambda: bench.write_result("x.json", {"a": 1}), "name"),
            ("name='../results/ok'", lambda: bench.write_result("../results/ok", {"a": 1}), "name"),
            ("name=3", lambda: bench.write_result(3, {"a": 1}), "name"),
        )
    ]
    checkpoint = folder / "checkpoint"

    def broken_checkpoint(config: dict | bytes, weights: bytes | None):
        def run():
            checkpoint.mkdir(exist_ok=True)
            text = config if isinstance(config, bytes) else json.dumps(config).encode()
            (checkpoint / "config.json").write_bytes(text)
            model = LlamaDecoder(config_with(num_layers=2))
            state = {f"model.{k}": v for k, v in _hf_names(model).items()}
            if weights is None:
                from safetensors.torch import save_file

                save_file(state, checkpoint / "model.safetensors")
            else:
                (checkpoint / "model.safetensors").write_bytes(weights)
            return LlamaDecoder.from_safetensors_folder(str(checkpoint))

        return run

    good = {
        "model_type": "llama",
        "vocab_size": 32,
        "hidden_size": 16,
        "intermediate_size": 32,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 8,
        "max_position_embeddings": 64,
        "rms_norm_eps": 1e-6,
    }
    missing_field = {key: value for key, value in good.items() if key != "hidden_size"}
    files = (FileNotFoundError, ValueError, TypeError)
    cases += [
        Case("kvcache", "from_safetensors_folder", "2 layers of weights, a 1-layer config", broken_checkpoint(good, None), "model.safetensors"),
        Case("kvcache", "from_safetensors_folder", "a missing config field", broken_checkpoint(missing_field, None), "hidden_size"),
        Case("kvcache", "from_safetensors_folder", "a truncated weight file", broken_checkpoint(good, b"\x08\x00\x00\x00\x00\x00\x00\x00{}"), "model.safetensors"),
        Case("kvcache", "from_safetensors_folder", "an empty weight file", broken_checkpoint(good, b""), "model.safetensors"),
        Case("kvcache", "from_safetensors_folder", "config.json not UTF-8", broken_checkpoint(b"\xff\xfe{", b""), "config.json"),
        Case("kvcache", "from_safetensors_folder", "a missing folder", lambda: LlamaDecoder.from_safetensors_folder(folder / "nope"), "nope", errors=files),
        Case("kvcache", "from_pretrained", "a missing local folder", lambda: LlamaDecoder.from_pretrained("./no/such/model"), "./no/such/model", errors=files),
    ]  # fmt: skip
    return cases


def _hf_names(model) -> dict[str, torch.Tensor]:
    """Return a LlamaDecoder's weights under Hugging Face's names (without the model. prefix)."""
    ours_to_hf = {
        "attn_norm": "input_layernorm",
        "mlp_norm": "post_attention_layernorm",
        "q_proj": "self_attn.q_proj",
        "k_proj": "self_attn.k_proj",
        "v_proj": "self_attn.v_proj",
        "o_proj": "self_attn.o_proj",
        "gate_proj": "mlp.gate_proj",
        "up_proj": "mlp.up_proj",
        "down_proj": "mlp.down_proj",
    }
    names = {"embed_tokens.weight": model.embed.weight, "norm.weight": model.final_norm.weight}
    for key, tensor in model.state_dict().items():
        parts = key.split(".")
        if parts[0] == "layers":
            names[f"layers.{parts[1]}.{ours_to_hf[parts[2]]}.{parts[3]}"] = tensor
    return {name: tensor.detach().clone().contiguous() for name, tensor in names.items()}


def all_cases() -> list[Case]:
    """Return every case of the sweep."""
    return argument_cases() + special_cases()


# ---------------------------------------------------------------- running a case


def same(a: Any, b: Any) -> bool:
    """Return True when two snapshots are equal (tensors compared element by element)."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


class Hang(Exception):
    """The call ran past the time limit."""


def _alarm(signum, frame):
    raise Hang


def outcome(case: Case, time_limit_s: float = TIME_LIMIT_S) -> tuple[str, str]:
    """Return (outcome, detail) of running one case under a time limit."""
    before = case.state() if case.state else None
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, time_limit_s)
    try:
        result, error = case.call(), None
    except Hang:
        return "hang", f"still running after {time_limit_s} s"
    except Exception as raised:  # noqa: BLE001 - every exception is an outcome to classify
        result, error = None, raised
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    if case.state and not same(case.state(), before):
        return "corrupted state", f"state changed ({type(error).__name__ if error else 'returned'})"
    if case.argument is None:  # a call that must return the right thing
        if error is not None:
            return "obscure crash", f"{type(error).__name__}: {error}"
        return ("handled well", "") if case.check(result) else ("silently wrong result", f"{result!r:.120}")
    if error is None:
        return "silently wrong result", f"returned {result!r:.120}"
    if not isinstance(error, case.errors):
        return "obscure crash", f"{type(error).__name__}: {error}"
    if case.argument not in str(error):
        return "unclear message", f"{type(error).__name__}: {error}"
    return "handled well", ""


def sweep(cases: list[Case]) -> list[tuple[Case, str, str]]:
    """Return (case, outcome, detail) for every case."""
    return [(case, *outcome(case)) for case in cases]


def report(results: list[tuple[Case, str, str]]) -> str:
    """Return the Markdown report: outcomes per module, the total, and every case not handled well."""
    modules = sorted({case.module for case, _, _ in results})
    counts = {module: Counter(o for c, o, _ in results if c.module == module) for module in modules}
    total = Counter(o for _, o, _ in results)
    lines = ["| module | " + " | ".join(OUTCOMES) + " | cases |", "|---" * (len(OUTCOMES) + 2) + "|"]
    for module in [*modules, "all"]:
        row = total if module == "all" else counts[module]
        lines.append(f"| {module} | " + " | ".join(str(row[o]) for o in OUTCOMES) + f" | {sum(row.values())} |")
    well = total["handled well"] / len(results)
    lines.append("")
    lines.append(f"Handled well: {total['handled well']} of {len(results)} ({well:.1%}); goal {GOAL:.0%}.")
    failures = [(case, o, detail) for case, o, detail in results if o != "handled well"]
    if failures:
        lines.append("")
        lines += [f"- {o}: {case.name} -> {detail}" for case, o, detail in failures]
    return "\n".join(lines)


def passed(results: list[tuple[Case, str, str]]) -> bool:
    """Return True when the goal is met: >= 95% handled well and no wrong result, hang or corrupted state."""
    total = Counter(o for _, o, _ in results)
    return total["handled well"] >= GOAL * len(results) and not any(total[o] for o in NEVER)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", help="only the cases of one module (decoding, flash, kvcache, paged, bench)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    cases = [case for case in all_cases() if args.module in (None, case.module)]
    results = sweep(cases)
    print(report(results))
    return 0 if passed(results) else 1


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "code"))
    sys.exit(main())
