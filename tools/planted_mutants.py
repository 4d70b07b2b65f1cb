"""Hand-written mutants: small, realistic bugs that the tests of each module must notice.

``python tools/mutate.py planted`` plants them one at a time in a scratch copy of the repository
and runs the module's own tests against each (see tools/mutate.py). They are independent of the
mutation tool's mutants: each one is a mistake a contributor could plausibly make, several of them
bugs that the suite once missed (issue 21).

Each entry replaces ``old`` (which must occur exactly once in ``path``) with ``new``. A mutant
marked ``equivalent`` cannot change behaviour (the reason says why); it is run but left out of the
score. models/ (training and the model card) is left out: its code runs for minutes, not tests.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    module: str  # a group in tools/mutate.py's MODULES: its tests are the ones run
    path: str
    old: str
    new: str
    why: str  # the bug, as a reviewer would describe it
    equivalent: str = ""  # non-empty: why this mutant cannot change behaviour (left out of the score)


SAMPLING = "code/inferlab/decoding/sampling.py"
SEARCH = "code/inferlab/decoding/search.py"
DECODER = "code/inferlab/kvcache/decoder.py"
GENERATE = "code/inferlab/kvcache/generate.py"
SIZE = "code/inferlab/kvcache/size.py"
ENGINE = "code/inferlab/paged/engine.py"
BLOCKS = "code/inferlab/paged/blocks.py"
PAGED_ATTENTION = "code/inferlab/paged/attention.py"
TILED = "code/inferlab/flash/tiled.py"
TRAFFIC = "code/inferlab/flash/traffic.py"
BENCH = "code/inferlab/bench/__init__.py"
HOOKS = "tools/mkdocs_hooks.py"
GLOSSARY = "tools/glossary_links.py"
TREE = "code/inferlab/speculative/tree.py"
FORMULAS = "code/inferlab/speculative/formulas.py"
ALPHA = "code/inferlab/speculative/alpha.py"
SAMPLER = "code/inferlab/speculative/sampler.py"

MUTANTS = [
    # ---- decoding ------------------------------------------------------------------------
    Mutant(
        "decoding",
        SAMPLING,
        "drop_sorted = tail_mass <= 1 - p",
        "drop_sorted = tail_mass < 1 - p",
        "top-p keeps one token too many when the mass reaches p exactly",
    ),
    Mutant(
        "decoding",
        SAMPLING,
        'logits.masked_fill(logits < kth_largest, float("-inf"))',
        'logits.masked_fill(logits <= kth_largest, float("-inf"))',
        "top-k drops the k-th token itself",
    ),
    Mutant(
        "decoding",
        SAMPLING,
        "drop_sorted[..., -min_tokens_to_keep:] = False  # the most probable token(s) always stay",
        "drop_sorted[..., :min_tokens_to_keep] = False  # the most probable token(s) always stay",
        "top-p protects the least probable token instead of the most probable",
    ),
    Mutant(
        "decoding",
        SAMPLING,
        "    return logits / temperature\n",
        "    return logits * temperature\n",
        "temperature multiplies instead of divides",
    ),
    Mutant(
        "decoding",
        SAMPLING,
        "    if top_p is not None and top_p < 1.0:\n        logits = top_p_filter",
        "    if top_p is not None:\n        logits = top_p_filter",
        "top_p = 1 runs the filter",
        equivalent="with p = 1 the filter drops only tokens of probability 0, which are -inf already",
    ),
    Mutant(
        "decoding",
        SEARCH,
        "        logprob += float(logprobs[token])",
        "        logprob = float(logprobs[token])",
        "greedy reports the last token's log-probability, not the sequence's",
    ),
    Mutant(
        "decoding",
        SEARCH,
        "candidates = (scores.unsqueeze(-1) + logprobs).flatten()",
        "candidates = logprobs.flatten()",
        "beam search forgets each beam's score so far",
    ),
    Mutant(
        "decoding",
        SEARCH,
        "            winner = max(vocab, key=scores.__getitem__)",
        "            winner = min(vocab, key=scores.__getitem__)",
        "Viterbi keeps the worst predecessor",
    ),
    Mutant(
        "decoding",
        SEARCH,
        "        elif step < order:",
        "        elif step <= order:",
        "the k-th order DP grows the state one step too long",
    ),
    Mutant(
        "decoding",
        SEARCH,
        "    mean_nll = -math.fsum(logprobs) / len(logprobs)",
        "    mean_nll = -math.fsum(logprobs) / (len(logprobs) + 1)",
        "perplexity averages over one token too many",
    ),
    # ---- kvcache -------------------------------------------------------------------------
    Mutant(
        "kvcache",
        DECODER,
        "self._last[0] is positions and",
        "self._last[0].shape == positions.shape and",
        "the rotary memo is keyed on the positions' shape: stale angles at every decode step",
    ),
    Mutant(
        "kvcache",
        DECODER,
        'scores = scores.masked_fill(key_pos > query_pos, float("-inf"))',
        'scores = scores.masked_fill(key_pos >= query_pos, float("-inf"))',
        "the causal mask hides each token from itself",
    ),
    Mutant(
        "kvcache",
        DECODER,
        "rotated_half = torch.cat([-second, first], dim=-1)",
        "rotated_half = torch.cat([second, -first], dim=-1)",
        "rotary embedding rotates the wrong way",
    ),
    Mutant(
        "kvcache",
        DECODER,
        "x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)",
        "x32 = x32 * (torch.rsqrt(x32.pow(2).mean(-1, keepdim=True)) + self.eps)",
        "RMSNorm adds eps outside the square root",
    ),
    Mutant(
        "kvcache",
        DECODER,
        "self.keys_computed += h.shape[0] * h.shape[1]",
        "self.keys_computed += h.shape[1]",
        "the key counter forgets the batch",
    ),
    Mutant(
        "kvcache",
        DECODER,
        "    if causal and not (q_len == 1 and q_start == k_len - 1):",
        "    if causal:",
        "the mask is built for a last query too",
        equivalent="the last query may see every key, so its mask hides nothing",
    ),
    Mutant(
        "kvcache",
        GENERATE,
        "    for _ in range(max_new_tokens - 1):  # decode",
        "    for _ in range(max_new_tokens):  # decode",
        "the cached loop generates one token too many",
    ),
    Mutant(
        "kvcache",
        GENERATE,
        "    cache.length = start + ids.shape[1]",
        "    cache.length = ids.shape[1]",
        "the cache length is reset to the chunk length",
    ),
    Mutant(
        "kvcache",
        SIZE,
        "kv_heads = heads if kv_heads is None else kv_heads",
        "kv_heads = 1 if kv_heads is None else kv_heads",
        "a config without num_key_value_heads is sized as one KV head",
    ),
    Mutant(
        "kvcache",
        SIZE,
        "return free_bytes // kv_cache_bytes(config, tokens, batch=1, dtype=dtype)",
        "return free_bytes // kv_cache_bytes(config, tokens, batch=1)",
        "max_batch_size ignores its dtype",
    ),
    Mutant(
        "kvcache",
        SIZE,
        "head_dim = hidden_size // heads",
        "head_dim = hidden_size // (heads + 1)",
        "head_dim fallback divides by the wrong head count",
    ),
    # ---- paged ---------------------------------------------------------------------------
    Mutant(
        "paged",
        ENGINE,
        "                first = request.num_cached_now",
        "                first = request.cached_tokens",
        "prefill after a preemption starts at the first admission's cached count",
    ),
    Mutant(
        "paged",
        ENGINE,
        "            if not request.output_ids:  # first admission",
        "            if True:  # first admission",
        "cached_tokens is overwritten when a preempted request returns",
    ),
    Mutant(
        "paged",
        ENGINE,
        "                    victim = self.running.pop()",
        "                    victim = self.running.pop(0)",
        "preemption evicts the oldest request, not the youngest",
    ),
    Mutant(
        "paged",
        BLOCKS,
        "        max_blocks = (len(token_ids) - 1) // self.block_size",
        "        max_blocks = len(token_ids) // self.block_size",
        "a fully cached prompt leaves no token to compute logits from",
    ),
    Mutant(
        "paged",
        BLOCKS,
        "        for block_id in reversed(sequence.block_table):  # tail first",
        "        for block_id in sequence.block_table:  # tail first",
        "freed blocks join the queue head first, so shared prefixes are evicted first",
    ),
    Mutant(
        "paged",
        BLOCKS,
        "                    if b.token_ids == tokens and b.parent_serial == parent_serial and b.extra_keys == extra_keys",
        "                    if b.token_ids == tokens and b.extra_keys == extra_keys",
        "a hash collision serves another sequence's KV",
    ),
    Mutant(
        "paged",
        BLOCKS,
        "        self.prefix_cache_hits += cached_tokens",
        "        self.prefix_cache_hits += len(hits)",
        "hits counted in blocks, queries in tokens",
    ),
    Mutant(
        "paged",
        BLOCKS,
        "        block_id, _ = self.free_queue.popitem(last=False)",
        "        block_id, _ = self.free_queue.popitem(last=True)",
        "eviction takes the most recently used free block",
    ),
    Mutant(
        "paged",
        PAGED_ATTENTION,
        "    hidden = key_pos[None, None, :] > query_pos[:, :, None]",
        "    hidden = key_pos[None, None, :] >= query_pos[:, :, None]",
        "paged attention hides each token from itself",
    ),
    Mutant(
        "paged",
        PAGED_ATTENTION,
        "query_pos = context_lens[:, None] - q_len + torch.arange(q_len, device=q.device)",
        "query_pos = context_lens[:, None] - 1 + torch.arange(q_len, device=q.device)",
        "every query is placed at the last position",
    ),
    # ---- flash ---------------------------------------------------------------------------
    Mutant(
        "flash",
        TILED,
        "    return key_position <= query_position",
        "    return key_position < query_position",
        "the tile mask hides the diagonal",
    ),
    Mutant(
        "flash",
        TILED,
        "    row_sum = row_sum * rescale + probs.sum(dim=-1)",
        "    row_sum = row_sum + probs.sum(dim=-1)",
        "the running sum is not rescaled when the maximum moves",
    ),
    Mutant(
        "flash",
        TILED,
        "    return max(0, min(n_k, q_end + n_k - n_q))",
        "    return max(0, min(n_k, q_end))",
        "the causal key loop assumes as many queries as keys",
    ),
    Mutant(
        "flash",
        TILED,
        "grad_scores = probs * (grad_probs - delta[..., q_start:q_end, None])",
        "grad_scores = probs * grad_probs",
        "the softmax backward drops the row term D",
    ),
    Mutant(
        "flash",
        TRAFFIC,
        "keys_loaded = min(N, -(-q_end // block_k) * block_k)",
        "keys_loaded = N",
        "the causal traffic counts the key tiles above the diagonal",
    ),
    Mutant(
        "flash",
        TRAFFIC,
        "    return flops / 2 if causal else flops",
        "    return flops",
        "causal FLOPs are not halved",
    ),
    # ---- bench ---------------------------------------------------------------------------
    Mutant(
        "bench",
        BENCH,
        '        raise FileNotFoundError(f"no result file {path}; run the benchmark that writes it first")',
        '        return {"name": name, "provenance": {}, "values": {}}',
        "a missing result file is read as an empty record",
    ),
    Mutant(
        "bench",
        BENCH,
        'return {"median_s": statistics.median(seconds), "min_s": min(seconds), "max_s": max(seconds)}',
        'return {"median_s": statistics.mean(seconds), "min_s": min(seconds), "max_s": max(seconds)}',
        "the median is reported as the mean",
    ),
    Mutant(
        "bench",
        BENCH,
        'RESULT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")',
        'RESULT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_./-]*")',
        "names with a slash escape the results folder",
    ),
    Mutant(
        "bench",
        BENCH,
        "            seconds[key].append(time.perf_counter() - start)",
        "            seconds[key].append(time.perf_counter())",
        "interleaved timing records the clock, not the duration",
    ),
    # ---- the MkDocs hooks ----------------------------------------------------------------
    Mutant(
        "hooks",
        HOOKS,
        '        raise PluginError(f"result file docs/results/{name}.json does not exist")',
        '        return {"name": name, "provenance": {}, "values": {}}',
        "a missing result file is turned into an empty record",
    ),
    Mutant(
        "hooks",
        HOOKS,
        'targets = {"en": base_url, "zh-TW": "zh-TW/" + base_url}',
        'targets = {"en": base_url, "zh-TW": base_url}',
        "the zh-TW language link points at the English page",
    ),
    Mutant(
        "hooks",
        HOOKS,
        '        spec = ".4g"',
        '        spec = ".3g"',
        "floats print with one significant digit fewer",
    ),
    Mutant(
        "hooks",
        HOOKS,
        '    glossary_url = relative_url(("zh-TW/" if language == "zh-TW" else "") + "glossary", page)',
        '    glossary_url = relative_url("glossary", page)',
        "zh-TW pages link terms to the English glossary",
    ),
    Mutant(
        "hooks",
        GLOSSARY,
        '    "code",\n',
        "",
        "terms inside inline code get linked",
    ),
    # ---- speculative -----------------------------------------------------------------------
    Mutant(
        "speculative",
        TREE,
        "slots = torch.tensor([prefix_length + i for i in path], dtype=torch.long)",
        "slots = torch.tensor([prefix_length + i + 1 for i in path], dtype=torch.long)",
        "the accepted branch's keys are taken from the slot after each node's own",
    ),
    Mutant(
        "speculative",
        TREE,
        "key=lambda i: (-log_probs[i], nodes[i].depth))[:keep]",
        "key=lambda i: (-log_probs[i], -nodes[i].depth))[:keep]",
        "ties between a path and its parent keep the child first, so a kept node can lose its parent",
    ),
    Mutant(
        "speculative",
        TREE,
        "allowed = torch.zeros(len(rows), prefix_length + (rows[-1] + 1 if rows else 0), dtype=torch.bool)",
        "allowed = torch.ones(len(rows), prefix_length + (rows[-1] + 1 if rows else 0), dtype=torch.bool)",
        "every tree node may read every other node (the causal-mask mistake the tree mask exists to avoid)",
    ),
    Mutant(
        "speculative",
        FORMULAS,
        "return prompt + new_tokens, prompt + draft_prompt + rounds * round_cost",
        "return prompt + new_tokens, prompt + rounds * round_cost",
        "the whole-run prediction forgets that the draft reads the prompt too",
    ),
    Mutant(
        "speculative",
        FORMULAS,
        "    return (1.0 - alpha ** (gamma + 1)) / (1.0 - alpha)",
        "    return (1.0 - alpha**gamma) / (1.0 - alpha)",
        "the expected tokens per round leave out the target's bonus token",
    ),
    Mutant(
        "speculative",
        ALPHA,
        "losses = [torch.nn.functional.cross_entropy(logits / t, choice).item() for t in grid]",
        "losses = [torch.nn.functional.cross_entropy(logits * t, choice).item() for t in grid]",
        "the draft's temperature multiplies its logits instead of dividing them",
    ),
    Mutant(
        "speculative",
        SAMPLER,
        "        target_model.rollback(ids.shape[1] + n_accepted)\n",
        "        target_model.rollback(ids.shape[1] + n_accepted + 1)\n",
        "the target keeps the key of the first rejected draft",
    ),
]
