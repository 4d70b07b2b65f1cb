"""Paged attention against PyTorch's own attention; MiniEngine against transformers' generate."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inferlab.models import bundled_available
from inferlab.paged import MiniEngine, paged_attention, paged_prefill_attention, write_kv
from inferlab.paged.attention import decode_mask, paged_decode_attention


def contiguous_reference(q, k, v):
    """PyTorch's scaled_dot_product_attention over contiguous keys/values; queries are the last Tq tokens."""
    q_len, k_len = q.shape[2], k.shape[2]
    allowed = torch.ones(q_len, k_len, dtype=torch.bool).tril(diagonal=k_len - q_len)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, enable_gqa=True)


@pytest.mark.parametrize(("heads", "kv_heads"), [(4, 4), (6, 2), (4, 1)])
@pytest.mark.parametrize("q_len", [1, 5])
def test_paged_attention_equals_pytorch_attention_on_scrambled_blocks(heads, kv_heads, q_len):
    torch.manual_seed(0)
    block_size, head_dim, num_blocks = 4, 8, 32
    lengths = [q_len + 2, 13, 16]  # a partial block, an odd length, exactly full blocks
    k_cache = torch.randn(num_blocks, block_size, kv_heads, head_dim)  # garbage everywhere first
    v_cache = torch.randn(num_blocks, block_size, kv_heads, head_dim)
    free = torch.randperm(num_blocks).tolist()  # blocks land anywhere in the pool
    tables, keys, values, queries = [], [], [], []
    for length in lengths:
        table = [free.pop() for _ in range(-(-length // block_size))]
        k = torch.randn(length, kv_heads, head_dim)
        v = torch.randn(length, kv_heads, head_dim)
        slots = torch.tensor([table[p // block_size] * block_size + p % block_size for p in range(length)])
        write_kv(k_cache, v_cache, k, v, slots)
        tables.append(table)
        keys.append(k.transpose(0, 1)[None])
        values.append(v.transpose(0, 1)[None])
        queries.append(torch.randn(1, heads, q_len, head_dim))
    width = max(map(len, tables))
    padded = torch.tensor([t + [free[0]] * (width - len(t)) for t in tables])  # pad with a foreign block
    out = paged_attention(torch.cat(queries), k_cache, v_cache, padded, torch.tensor(lengths))
    for i in range(len(lengths)):
        expected = contiguous_reference(queries[i], keys[i], values[i])
        torch.testing.assert_close(out[i : i + 1], expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(("heads", "kv_heads"), [(4, 4), (6, 2)])
@pytest.mark.parametrize(("length", "q_len"), [(13, 13), (13, 5), (16, 1), (9, 2)])
def test_fused_prefill_equals_the_explicit_paged_attention(heads, kv_heads, length, q_len):
    # The engine's prefill path (fused kernel) against the readable paged_attention the pages show,
    # on blocks scattered through a pool of garbage: a whole prompt, a prompt after a cached
    # prefix, one token, a partial last block.
    torch.manual_seed(1)
    block_size, head_dim, num_blocks = 4, 8, 16
    k_cache = torch.randn(num_blocks, block_size, kv_heads, head_dim)
    v_cache = torch.randn(num_blocks, block_size, kv_heads, head_dim)
    table = torch.randperm(num_blocks)[: -(-length // block_size)]
    q = torch.randn(1, heads, q_len, head_dim)
    explicit = paged_attention(q, k_cache, v_cache, table[None], torch.tensor([length]))
    fused = paged_prefill_attention(q, k_cache, v_cache, table, length)
    torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(("heads", "kv_heads"), [(4, 4), (6, 2)])
def test_fused_decode_equals_the_explicit_paged_attention(heads, kv_heads):
    # The engine's decode path: one new query per sequence, tables of different widths padded
    # with a foreign block, against the readable paged_attention.
    torch.manual_seed(2)
    block_size, head_dim, num_blocks = 4, 8, 24
    k_cache = torch.randn(num_blocks, block_size, kv_heads, head_dim)
    v_cache = torch.randn(num_blocks, block_size, kv_heads, head_dim)
    lengths = torch.tensor([3, 13, 16, 1])
    order = torch.randperm(num_blocks).tolist()
    widths = [-(-int(n) // block_size) for n in lengths]
    tables = torch.tensor([[order.pop() for _ in range(w)] + [order[0]] * (max(widths) - w) for w in widths])
    q = torch.randn(len(lengths), heads, 1, head_dim)
    explicit = paged_attention(q, k_cache, v_cache, tables, lengths)
    fused = paged_decode_attention(q, k_cache, v_cache, tables, decode_mask(tables, lengths, block_size))
    torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=1e-5)


def hf_greedy(model, prompt, max_new_tokens):
    ids = model.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=max_new_tokens)
    return ids[0, len(prompt) :].tolist()


PROMPTS = [
    [5, 6, 7, 8, 9, 10, 11],
    [3, 4],
    [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],  # shares two blocks with the first prompt
    list(range(20, 41)),
    [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 60, 61],
    [90],
]


@pytest.mark.parametrize(
    "engine_kwargs",
    [
        {"max_batch_size": 8},
        {"max_batch_size": 3},  # requests join as others leave (continuous batching)
        {"max_batch_size": 8, "num_blocks": 12},  # too few blocks: requests wait, cached blocks get evicted
        {"max_batch_size": 8, "enable_prefix_caching": False},
    ],
)
def test_engine_matches_transformers_greedy_generate(tiny_pair, engine_kwargs):
    model = tiny_pair[0]
    kwargs = {"num_blocks": 64, "block_size": 4, "eos_token_id": model.generation_config.eos_token_id}
    engine = MiniEngine(model, **{**kwargs, **engine_kwargs})
    expected = [hf_greedy(model, p, 10) for p in PROMPTS]
    for _ in range(2):  # the second round is served largely from the prefix cache
        requests = engine.run(PROMPTS, 10)
        assert [r.output_ids for r in requests] == expected
    if "num_blocks" in engine_kwargs:
        assert engine.num_preemptions > 0  # the small pool really forced requests out and back
    if engine_kwargs.get("enable_prefix_caching", True) and "num_blocks" not in engine_kwargs:
        assert all(r.cached_tokens == (len(p) - 1) // 4 * 4 for r, p in zip(requests, PROMPTS, strict=True))


def test_prefill_skips_cached_blocks_counted_in_key_projections(tiny_pair):
    engine = MiniEngine(tiny_pair[0], num_blocks=64, block_size=4)
    layers = engine.model.num_layers
    prompt = list(range(10, 31))  # 21 tokens: 5 full blocks + 1
    engine.model.reset_counts()
    engine.run([prompt], 1)
    assert engine.model.keys_computed == layers * 21  # cold: every prompt token
    engine.model.reset_counts()
    second = engine.run([prompt + [50, 51]], 3)[0]  # 23 tokens; 5 full blocks (20 tokens) cached
    assert second.cached_tokens == 20
    # 3 prompt tokens in prefill, then 2 decode steps of one token each (the last sample is never fed back).
    assert engine.model.keys_computed == layers * (3 + 2)


def test_engine_rejects_bad_requests(tiny_pair):
    engine = MiniEngine(tiny_pair[0], num_blocks=8, block_size=4)
    with pytest.raises(ValueError, match="max_new_tokens must be an integer >= 1"):
        engine.add_request([1, 2], 0)
    with pytest.raises(ValueError, match=r"prompt_ids must be .* token ids in 0..96, got 97"):
        engine.add_request([1, 97], 2)
    with pytest.raises(ValueError, match="exceeds the model's 256 positions"):
        engine.add_request([1] * 250, 10)
    with pytest.raises(ValueError, match="max_batch_size must be"):
        MiniEngine(tiny_pair[0], max_batch_size=0)
    # Needs 11 blocks of 4 and the pool has 8: refused at once (issue 18), not by every later step().
    with pytest.raises(ValueError, match="needs 11 blocks of 4 tokens, more than the cache's 8"):
        engine.add_request([1] * 40, 2)
    assert not engine.waiting and not engine.running


@pytest.mark.slow
@pytest.mark.skipif(not bundled_available(), reason="needs the bundled pair")
def test_engine_matches_generate_on_the_bundled_target(bundled_pair):
    target, _, tokenizer = bundled_pair
    from inferlab.paged.labs import harbour_log

    ids = tokenizer(harbour_log(4))["input_ids"]
    prompts = [ids[:40], ids[:75], ids[:40] + ids[100:110], ids[20:33]]  # shared prefixes and different lengths
    engine = MiniEngine(target, num_blocks=64, block_size=16, eos_token_id=target.generation_config.eos_token_id)
    expected = [hf_greedy(target, p, 8) for p in prompts]
    assert [r.output_ids for r in engine.run(prompts, 8)] == expected
    assert [r.output_ids for r in engine.run(prompts, 8)] == expected  # now mostly from the prefix cache


# ----------------------------------------------------------------------------------------------
# Preemption: what is recomputed when a request comes back.


def record_prefills(engine):
    """Wrap the engine's forward pass; return {request id: [positions of each prefill it ran]}."""
    prefills, forward = {}, engine._forward

    def recording_forward(tokens, positions, slots, rows):
        for request, first, count in rows:
            if not request.prefilled:  # a (re)admitted request: its uncached tokens
                prefills.setdefault(request.request_id, []).append(positions[first : first + count])
        return forward(tokens, positions, slots, rows)

    engine._forward = recording_forward
    return prefills


LONG, SHORT = list(range(10, 17)), list(range(30, 36))  # 7 and 6 tokens: two blocks of 4 each


def test_a_preempted_request_recomputes_only_what_fell_out_of_the_cache(tiny_pair):
    # Four blocks of 4 tokens, two requests of two blocks each. At the third step LONG needs a
    # third block for position 8: none is free, so SHORT (the youngest) is preempted and its
    # blocks go back to the free queue, the full first block (positions 0-3) still cached. LONG
    # takes only SHORT's partial block, so when SHORT returns with 6 + 2 = 8 tokens of context,
    # positions 0-3 are served from the cache and only 4-7 are recomputed.
    model = tiny_pair[0]
    engine = MiniEngine(model, num_blocks=4, block_size=4, max_batch_size=2)
    prefills = record_prefills(engine)
    long, short = engine.run([LONG, SHORT], 6)
    assert engine.num_preemptions == 1
    assert [long.output_ids, short.output_ids] == [hf_greedy(model, LONG, 6), hf_greedy(model, SHORT, 6)]
    assert prefills[long.request_id] == [list(range(0, 7))]
    assert prefills[short.request_id] == [list(range(0, 6)), list(range(4, 8))]


def test_a_prefix_evicted_while_its_request_waits_is_recomputed(tiny_pair):
    # SHORT's first block is cached by an earlier run, so its first admission computes only
    # positions 4-5. Preempted as above, it then waits while LONG (8 new tokens, 14 positions,
    # four blocks) takes every block, evicting that cached first block. Back in the batch, SHORT
    # finds nothing cached and must recompute all 8 positions of its context, 0-7, not resume at
    # the 4 tokens its first admission found.
    model = tiny_pair[0]
    engine = MiniEngine(model, num_blocks=4, block_size=4, max_batch_size=2)
    engine.run([SHORT], 1)
    prefills = record_prefills(engine)
    long, short = engine.run([LONG, SHORT], 8)
    assert short.cached_tokens == 4 and engine.num_preemptions == 1
    assert [long.output_ids, short.output_ids] == [hf_greedy(model, LONG, 8), hf_greedy(model, SHORT, 8)]
    assert prefills[short.request_id] == [list(range(4, 6)), list(range(0, 8))]


# Prompts drawn from a few shared stems, so that the prefix cache hits, misses and gets evicted.
STEMS = [list(range(10, 22)), list(range(40, 46)), [7, 7, 7, 7, 7, 7, 7, 7]]
request_mixes = st.lists(
    st.tuples(
        st.integers(0, len(STEMS) - 1), st.integers(1, 12), st.lists(st.integers(1, 96), max_size=3), st.integers(1, 6)
    ),
    min_size=1,
    max_size=7,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    mix=request_mixes,
    block_size=st.sampled_from([2, 4]),
    spare_blocks=st.integers(0, 6),
    max_batch_size=st.integers(1, 4),
    caching=st.booleans(),
)
def test_any_request_mix_finishes_with_generates_tokens_and_leaks_no_block(
    tiny_pair, mix, block_size, spare_blocks, max_batch_size, caching
):
    # Every request must finish, each with exactly the tokens transformers' greedy generate gives
    # for it alone, however small the pool (down to the largest single request: preemption must
    # resolve every squeeze), and afterwards every block is free again.
    model = tiny_pair[0]
    requests = [(STEMS[stem][:length] + tail, new) for stem, length, tail, new in mix]
    largest = max(-(-(len(prompt) + new - 1) // block_size) for prompt, new in requests)
    num_blocks = largest + spare_blocks
    engine = MiniEngine(
        model,
        num_blocks=num_blocks,
        block_size=block_size,
        max_batch_size=max_batch_size,
        enable_prefix_caching=caching,
        eos_token_id=model.generation_config.eos_token_id,  # generate stops there too
    )
    handles = [engine.add_request(prompt, new) for prompt, new in requests]
    for _ in range(10_000):  # a bound, so a wedged scheduler fails instead of hanging
        if not (engine.waiting or engine.running):
            break
        engine.step()
    assert not engine.waiting and not engine.running, "the scheduler stopped making progress"
    for handle, (prompt, new) in zip(handles, requests, strict=True):
        assert handle.output_ids == greedy_reference(model, prompt, new)
    assert engine.blocks.num_free_blocks == num_blocks


GREEDY_MEMO: dict = {}


def greedy_reference(model, prompt, max_new_tokens):
    """hf_greedy, remembered: hypothesis asks for the same prompt many times."""
    key = (id(model), tuple(prompt), max_new_tokens)
    if key not in GREEDY_MEMO:
        GREEDY_MEMO[key] = hf_greedy(model, prompt, max_new_tokens)
    return GREEDY_MEMO[key]
