"""Exact checks of the paged KV cache, paged attention and MiniEngine (mutation-testing survivors).

References are independent of the code under test: PyTorch's scaled_dot_product_attention over
keys gathered by hand, transformers' greedy ``generate`` (or inferlab's plain decoder, which
recomputes every position), block counts worked by hand (ceil(tokens / block_size)), clock
readings taken by the test, and the exact documented error messages.
"""

from __future__ import annotations

import copy
import re
import time

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import inferlab.paged.blocks as blocks_module
import inferlab.paged.engine as engine_module
from inferlab.kvcache.decoder import LlamaDecoder
from inferlab.paged import BlockManager, MiniEngine, hash_block, hash_chain, paged_attention, write_kv
from inferlab.paged.attention import decode_mask
from inferlab.paged.engine import available_memory


def exactly(message: str) -> str:
    """A pattern for pytest.raises that matches ``message`` from its first character."""
    return "^" + re.escape(message)


@pytest.fixture(scope="module")
def decoder(tiny_pair):
    """The tiny target as inferlab's decoder: 2 layers, 4 heads, 2 KV heads of head_dim 8, float32."""
    return LlamaDecoder.from_pretrained(tiny_pair[0])


def hf_greedy(model, prompt, max_new_tokens):
    ids = model.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=max_new_tokens)
    return ids[0, len(prompt) :].tolist()


@torch.no_grad()
def plain_greedy(decoder, prompt, max_new_tokens):
    """Greedy tokens from inferlab's plain decoder: every step recomputes the whole context, no cache."""
    ids = list(prompt)
    for _ in range(max_new_tokens):
        ids.append(int(decoder(torch.tensor([ids], device=decoder.device))[0, -1].argmax()))
    return ids[len(prompt) :]


# ----------------------------------------------------------------------------------------------
# Paged attention against PyTorch's attention over keys gathered by hand.


def scrambled_case(device="cpu", dtype=torch.float32, heads=4, kv_heads=2, q_len=2):
    """Two sequences (lengths 5 and 11) in blocks of 4 scattered through a pool of garbage."""
    generator = torch.Generator().manual_seed(3)
    block_size, head_dim, num_blocks = 4, 8, 12
    k_cache = torch.randn(num_blocks, block_size, kv_heads, head_dim, generator=generator)
    v_cache = torch.randn(num_blocks, block_size, kv_heads, head_dim, generator=generator)
    tables = [[7, 2, 10], [4, 11, 0]]  # sequence 0 uses 2 blocks, padded with block 10 (someone else's)
    lengths = [5, 11]
    q = torch.randn(2, heads, q_len, head_dim, generator=generator)
    expected = []
    for table, length, query in zip(tables, lengths, q, strict=True):
        k = torch.cat([k_cache[b] for b in table])[:length].transpose(0, 1)[None]  # (1, kv_heads, T, d)
        v = torch.cat([v_cache[b] for b in table])[:length].transpose(0, 1)[None]
        allowed = torch.ones(q_len, length, dtype=torch.bool).tril(diagonal=length - q_len)
        expected.append(F.scaled_dot_product_attention(query[None], k, v, attn_mask=allowed, enable_gqa=True))
    inputs = (q, k_cache, v_cache, torch.tensor(tables), torch.tensor(lengths))
    return [t.to(device=device, dtype=dtype if t.is_floating_point() else t.dtype) for t in inputs], torch.cat(expected)


def test_paged_attention_in_bfloat16_matches_float32_attention_and_stays_bfloat16():
    inputs, expected = scrambled_case(dtype=torch.bfloat16)
    out = paged_attention(*inputs)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), expected, atol=0.05, rtol=0.05)


@pytest.mark.gpu
def test_paged_attention_on_cuda_matches_pytorch_attention():
    inputs, expected = scrambled_case(device="cuda")
    torch.testing.assert_close(paged_attention(*inputs).cpu(), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("device", ["cpu", "meta", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_decode_mask_marks_each_sequences_own_keys_on_the_tables_device(device):
    tables = torch.tensor([[3, 0], [1, 2]], device=device)  # two blocks of 4: 8 key slots each
    lengths = torch.tensor([3, 6], device=device)
    mask = decode_mask(tables, lengths, 4)
    assert mask.device.type == device and mask.shape == (2, 1, 1, 8)
    if device != "meta":  # a meta tensor has a shape but no values
        expected = torch.tensor([[True] * 3 + [False] * 5, [True] * 6 + [False] * 2])
        assert torch.equal(mask.cpu()[:, 0, 0], expected)


# ----------------------------------------------------------------------------------------------
# check_paged_inputs: each refusal names the argument and what is allowed.


def attention_inputs(**changes):
    """q for 1 sequence (4 heads, 1 query, head_dim 8), a pool of 4 blocks of 2 with 2 KV heads, its table."""
    inputs = {
        "q": torch.zeros(1, 4, 1, 8),
        "k_cache": torch.zeros(4, 2, 2, 8),
        "v_cache": torch.zeros(4, 2, 2, 8),
        "block_tables": torch.tensor([[0, 1]]),
        "context_lens": torch.tensor([3]),
    }
    return {**inputs, **changes}


SHAPES_MESSAGE = (
    "k_cache and v_cache must both be (num_blocks, block_size, kv_heads, head_dim) with q's head_dim and "
    "kv_heads dividing q's heads, got q {}, k_cache (4, 2, 2, 8), v_cache {}"
)


@pytest.mark.parametrize(
    ("changes", "error", "message"),
    [
        (
            {"q": torch.zeros(1, 4, 1, 8, dtype=torch.int64)},
            TypeError,
            "q must be a floating-point tensor with 4 dims, got shape (1, 4, 1, 8) torch.int64",
        ),
        ({"q": torch.zeros(4, 1, 8)}, TypeError, "q must be a floating-point tensor with 4 dims, got shape (4, 1, 8)"),
        ({"q": [[[[0.0] * 8]]]}, TypeError, "q must be a floating-point tensor with 4 dims, got list"),
        (
            {"k_cache": torch.zeros(4, 2, 2, 8, dtype=torch.int32)},
            TypeError,
            "k_cache must be a floating-point tensor with 4 dims, got shape (4, 2, 2, 8) torch.int32",
        ),
        ({"k_cache": None}, TypeError, "k_cache must be a floating-point tensor with 4 dims, got NoneType"),
        (
            {"v_cache": torch.zeros(4, 2, 2, 8, dtype=torch.int32)},
            TypeError,
            "v_cache must be a floating-point tensor with 4 dims, got shape (4, 2, 2, 8) torch.int32",
        ),
        (
            {"v_cache": torch.zeros(4, 2, 1, 8)},
            ValueError,
            SHAPES_MESSAGE.format((1, 4, 1, 8), (4, 2, 1, 8)),
        ),
        ({"q": torch.zeros(1, 4, 1, 4)}, ValueError, SHAPES_MESSAGE.format((1, 4, 1, 4), (4, 2, 2, 8))),
        ({"q": torch.zeros(1, 3, 1, 8)}, ValueError, SHAPES_MESSAGE.format((1, 3, 1, 8), (4, 2, 2, 8))),
        (
            {"block_tables": torch.tensor([[0.0, 1.0]])},
            TypeError,
            "block_tables must be an integer tensor with 2 dims, got shape (1, 2) torch.float32",
        ),
        (
            {"block_tables": torch.tensor([0, 1])},
            TypeError,
            "block_tables must be an integer tensor with 2 dims, got shape (2,) torch.int64",
        ),
        (
            {"context_lens": torch.tensor([3.0])},
            TypeError,
            "context_lens must be an integer tensor with 1 dims, got shape (1,) torch.float32",
        ),
        (
            {"block_tables": torch.tensor([[0, 1], [2, 3]])},
            ValueError,
            "block_tables must have one row per sequence (1), got shape (2, 2)",
        ),
        (
            {"block_tables": torch.zeros(1, 0, dtype=torch.int64)},
            ValueError,
            "block_tables must have one row per sequence (1), got shape (1, 0)",
        ),
        (
            {"block_tables": torch.tensor([[0, 4]])},  # the pool has blocks 0..3: 4 is one past the end
            ValueError,
            "block_tables must hold block ids in 0..3, got [[0, 4]]",
        ),
    ],
    ids=lambda value: value if isinstance(value, str) and len(value) < 40 else None,
)
def test_paged_attention_refuses_bad_inputs_by_name(changes, error, message):
    with pytest.raises(error, match=exactly(message)):
        paged_attention(**attention_inputs(**changes))


def test_the_last_block_of_the_pool_is_a_valid_block_id():
    inputs = attention_inputs(block_tables=torch.tensor([[3, 0]]), context_lens=torch.tensor([2]))
    inputs["k_cache"][3] = torch.randn(2, 2, 8)
    inputs["v_cache"][3] = torch.randn(2, 2, 8)
    inputs["q"] = torch.randn(1, 4, 1, 8)
    k = inputs["k_cache"][3].transpose(0, 1)[None]  # the sequence's 2 keys sit in block 3
    v = inputs["v_cache"][3].transpose(0, 1)[None]
    expected = F.scaled_dot_product_attention(inputs["q"], k, v, enable_gqa=True)
    torch.testing.assert_close(paged_attention(**inputs), expected, atol=1e-5, rtol=1e-5)


# ----------------------------------------------------------------------------------------------
# write_kv: a refused call names what is wrong and writes no slot.


@pytest.mark.parametrize(
    ("shapes", "message"),
    [
        (
            {"v_cache": (4, 2, 1, 8)},
            "k_cache and v_cache must share one 4-dim shape, got (4, 2, 2, 8), (4, 2, 1, 8)",
        ),
        (
            {"slots": torch.tensor([[0], [1]])},
            "slots must be a 1-dim integer tensor of N slots and k, v must be (N, kv_heads, head_dim), got slots "
            "(2, 1) torch.int64, k (2, 2, 8), v (2, 2, 8)",
        ),
        (
            {"v": (2, 1, 8)},
            "slots must be a 1-dim integer tensor of N slots and k, v must be (N, kv_heads, head_dim), got slots "
            "(2,) torch.int64, k (2, 2, 8), v (2, 1, 8)",
        ),
        (
            {"slots": torch.tensor([0.0, 1.0])},
            "slots must be a 1-dim integer tensor of N slots and k, v must be (N, kv_heads, head_dim), got slots "
            "(2,) torch.float32, k (2, 2, 8), v (2, 2, 8)",
        ),
    ],
)
def test_write_kv_refuses_bad_shapes_and_writes_nothing(shapes, message):
    k_cache = torch.zeros(4, 2, 2, 8)
    v_cache = torch.zeros(shapes.get("v_cache", (4, 2, 2, 8)))
    k = torch.ones(2, 2, 8)
    v = torch.ones(shapes.get("v", (2, 2, 8)))
    slots = shapes.get("slots", torch.tensor([0, 1]))
    with pytest.raises(ValueError, match=exactly(message)):
        write_kv(k_cache, v_cache, k, v, slots)
    assert not k_cache.any() and not v_cache.any()


# ----------------------------------------------------------------------------------------------
# The hash chain and the block manager.


def test_hash_block_names_differ_whenever_parent_tokens_or_extra_keys_differ():
    base = hash_block(0, [1, 2, 3])
    assert hash_block(0, (1, 2, 3)) == base  # the same block, whatever sequence type holds its ids
    others = [
        hash_block(1, [1, 2, 3]),  # another parent
        hash_block(0, [1, 2, 4]),  # another last token
        hash_block(0, [3, 2, 1]),  # the same tokens in another order
        hash_block(0, [1, 2, 3], ("lora-a",)),  # an extra key
    ]
    assert len({base, *others}) == 5


def test_hash_block_names_are_64_bit_integers():
    names = [hash_block(parent, [token, token + 1]) for parent in range(4) for token in range(8)]
    assert all(0 <= name < 2**64 for name in names)
    assert len(set(names)) == 32


def test_hash_chain_accepts_blocks_of_one_token():
    calls = []

    def recording_hash(parent, tokens, extra):
        calls.append((parent, tuple(tokens)))
        return 10 * len(calls)

    assert hash_chain([5, 6, 7], 1, (), recording_hash) == [10, 20, 30]
    assert calls == [(0, (5,)), (10, (6,)), (20, (7,))]


def test_a_block_manager_with_blocks_of_one_token_gives_each_token_a_block():
    bm = BlockManager(4, 1)
    assert len(bm.allocate("a", [1, 2, 3])[0]) == 3 and bm.num_free_blocks == 1
    # Every block is full; a second request recomputes only its last token.
    assert bm.allocate("b", [1, 2, 3])[1] == 2 and bm.num_free_blocks == 0


def test_block_manager_default_block_size_is_16_tokens():
    bm = BlockManager(4)
    table, _ = bm.allocate("a", list(range(17)))  # ceil(17 / 16) = 2 blocks
    assert len(table) == 2 and bm.num_free_blocks == 2


@pytest.mark.parametrize("block_size", [2.5, True, "4"])
def test_block_manager_refuses_a_block_size_that_is_not_an_integer(block_size):
    with pytest.raises(ValueError, match=exactly(f"block_size must be an integer >= 1, got {block_size!r}")):
        BlockManager(4, block_size)


def test_the_block_record_limit_itself_is_allowed(monkeypatch):
    monkeypatch.setattr(blocks_module, "MAX_BLOCKS", 8)
    assert BlockManager(8, 2).num_free_blocks == 8
    message = "num_blocks would need 9 block records (about 0.0 GiB of Python objects), over the limit of 8"
    with pytest.raises(ValueError, match=exactly(message)):
        BlockManager(9, 2)


def test_a_block_filled_by_append_is_cached_at_once():
    bm = BlockManager(8, 4)
    bm.allocate("a", [1, 2, 3])
    bm.append("a", 4)  # block 0 is now full: [1, 2, 3, 4]
    assert bm.allocate("b", [1, 2, 3, 4, 5])[1] == 4
    assert bm.block_table("b")[0] == bm.block_table("a")[0]


def test_with_colliding_hashes_a_continuing_block_is_never_served_as_a_first_block():
    # Every block hashes to 7. Block [7, 7] of "a" holds those tokens after [5, 5, 6, 6]: its KV
    # is not that of a sequence that starts with [7, 7], so "b" must find nothing cached.
    bm = BlockManager(8, 2, hash_fn=lambda parent, tokens, extra: 7)
    bm.allocate("a", [5, 5, 6, 6, 7, 7, 0])
    assert bm.allocate("b", [7, 7, 9])[1] == 0
    assert bm.allocate("c", [5, 5, 6, 6, 1])[1] == 4  # a true prefix still hits


@pytest.mark.parametrize(
    "as_ids",
    [
        lambda ids: np.array(ids, dtype=np.int64),
        lambda ids: [np.int32(t) for t in ids],
        lambda ids: torch.tensor(ids),
    ],
    ids=["numpy array", "numpy scalars", "torch tensor"],
)
def test_integer_like_token_ids_are_the_same_tokens_as_python_ints(as_ids):
    bm = BlockManager(8, 4)
    table, cached = bm.allocate("a", as_ids([1, 2, 3, 4, 5]))
    assert len(table) == 2 and cached == 0
    assert bm.append("a", as_ids([6])[0]) == (table[1], 1)  # position 5: block 1, offset 1
    assert bm.allocate("b", [1, 2, 3, 4, 9])[1] == 4  # plain ints hit the block the others filled


# ----------------------------------------------------------------------------------------------
# MiniEngine: the memory check and where its pool lives.


def test_available_memory_on_cuda_is_the_free_memory_of_that_device(monkeypatch):
    free_and_total = {1: (3 * 2**30 + 12_345, 80 * 2**30)}  # only cuda:1 answers as itself

    def fake_mem_get_info(device=None):
        index = 0 if device is None else torch.device(device).index
        return free_and_total.get(index, (7 * 2**30, 96 * 2**30))

    monkeypatch.setattr(torch.cuda, "mem_get_info", fake_mem_get_info)
    assert available_memory(torch.device("cuda", 1)) == 3 * 2**30 + 12_345


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_cache_fits_check_allows_exactly_the_pools_bytes(monkeypatch, tiny_pair, dtype):
    model = LlamaDecoder.from_pretrained(tiny_pair[0], dtype=dtype)
    element = 4 if dtype == torch.float32 else 2
    # K and V, 2 layers, 8 blocks of 4 tokens, 2 KV heads of head_dim 8.
    pool_bytes = 2 * 2 * 8 * 4 * 2 * 8 * element
    monkeypatch.setattr(engine_module, "available_memory", lambda device: pool_bytes)
    engine = MiniEngine(model, num_blocks=8, block_size=4)
    allocated = sum(t.numel() * t.element_size() for t in engine.k_cache + engine.v_cache)
    assert allocated == pool_bytes  # the hand count is what the engine really allocates
    monkeypatch.setattr(engine_module, "available_memory", lambda device: pool_bytes - 1)
    with pytest.raises(ValueError, match=exactly("num_blocks=8 blocks of 4 tokens would take 0.00 GiB of KV cache")):
        MiniEngine(model, num_blocks=8, block_size=4)


def test_the_block_pool_is_made_on_the_models_device(decoder):
    on_meta = copy.deepcopy(decoder).to("meta")  # a device with shapes but no memory: any machine has it
    engine = MiniEngine(on_meta, num_blocks=4, block_size=4)
    assert [t.device.type for t in engine.k_cache + engine.v_cache] == ["meta"] * 4


def test_a_bfloat16_engine_keeps_bfloat16_caches_and_matches_the_plain_decoder(tiny_pair):
    model = LlamaDecoder.from_pretrained(tiny_pair[0], dtype=torch.bfloat16)
    engine = MiniEngine(model, num_blocks=16, block_size=4)
    assert {t.dtype for t in engine.k_cache + engine.v_cache} == {torch.bfloat16}
    prompts = [[5, 6, 7, 8, 9, 10], [5, 6, 7, 8, 9, 10, 11, 12, 13], [40]]
    requests = engine.run(prompts, 4)
    assert [r.output_ids for r in requests] == [plain_greedy(model, p, 4) for p in prompts]


@pytest.mark.gpu
def test_engine_on_cuda_matches_transformers_generate(tiny_pair):
    model = copy.deepcopy(tiny_pair[0]).to("cuda")
    engine = MiniEngine(model, num_blocks=16, block_size=4)
    assert {t.device.type for t in engine.k_cache + engine.v_cache} == {"cuda"}
    prompts = [[5, 6, 7, 8, 9, 10, 11], [3, 4], [5, 6, 7, 8, 9, 10, 11, 12, 13]]
    expected = [
        model.generate(torch.tensor([p], device="cuda"), do_sample=False, max_new_tokens=5)[0, len(p) :].tolist()
        for p in prompts
    ]
    for _ in range(2):  # the second round starts from the prefix cache
        assert [r.output_ids for r in engine.run(prompts, 5)] == expected


# ----------------------------------------------------------------------------------------------
# MiniEngine: defaults and arguments, through what the engine does.


def test_engine_defaults_to_512_blocks_of_16_tokens(decoder):
    engine = MiniEngine(decoder)
    assert engine.blocks.num_free_blocks == 512
    engine.add_request(list(range(17)), 2)
    engine.step()  # the 17-token prompt now holds ceil(17 / 16) = 2 blocks
    assert engine.blocks.num_free_blocks == 510


@pytest.mark.parametrize(("kwargs", "admitted"), [({}, 8), ({"max_batch_size": 2}, 2)])
def test_a_step_admits_at_most_max_batch_size_requests(decoder, kwargs, admitted):
    engine = MiniEngine(decoder, num_blocks=64, block_size=4, **kwargs)
    for token in range(admitted + 1):
        engine.add_request([token + 1], 3)
    engine.step()
    assert (len(engine.running), len(engine.waiting)) == (admitted, 1)


@pytest.mark.parametrize(("caching", "second_hit"), [(True, 8), (False, 0)])
def test_enable_prefix_caching_decides_whether_a_repeated_prompt_hits(decoder, caching, second_hit):
    engine = MiniEngine(decoder, num_blocks=16, block_size=4, enable_prefix_caching=caching)
    prompt = list(range(10, 21))  # 11 tokens: 2 full blocks before the last token
    first = engine.run([prompt], 2)[0]
    second = engine.run([prompt], 2)[0]
    assert (first.cached_tokens, second.cached_tokens) == (0, second_hit)
    assert second.output_ids == first.output_ids


def test_generation_stops_at_the_eos_token(tiny_pair, decoder):
    prompt = [5, 6, 7, 8, 9, 10, 11]
    greedy = hf_greedy(tiny_pair[0], prompt, 8)
    eos = greedy[3]
    expected = greedy[: greedy.index(eos) + 1]  # generate's tokens up to and including the first eos
    engine = MiniEngine(decoder, num_blocks=16, block_size=4, eos_token_id=eos)
    request = engine.run([prompt], 8)[0]
    assert request.output_ids == expected and len(expected) <= 4
    assert engine.blocks.num_free_blocks == 16  # the finished request gave its blocks back


@pytest.mark.parametrize(
    ("eos", "error", "message"),
    [
        (-1, ValueError, "eos_token_id must be an integer >= 0, got -1"),
        (True, TypeError, "eos_token_id must be an integer >= 0, got True"),
    ],
)
def test_a_bad_eos_token_id_is_refused_by_name(decoder, eos, error, message):
    with pytest.raises(error, match=exactly(message)):
        MiniEngine(decoder, num_blocks=4, block_size=4, eos_token_id=eos)


def test_token_zero_is_a_valid_eos_token_id(decoder):
    engine = MiniEngine(decoder, num_blocks=4, block_size=4, eos_token_id=0)
    assert engine.eos_token_id == 0


def test_request_ids_count_up_from_zero_in_arrival_order(decoder):
    engine = MiniEngine(decoder, num_blocks=8, block_size=4)
    requests = [engine.add_request([t], 2) for t in (4, 5, 6)]
    assert [r.request_id for r in requests] == [0, 1, 2]
    engine.step()
    assert [engine.blocks.num_tokens(i) for i in (0, 1, 2)] == [1, 1, 1]  # each id names its own sequence


def test_a_request_may_use_every_position_of_the_model(tiny_pair, decoder):
    engine = MiniEngine(decoder, num_blocks=64, block_size=4)  # 64 blocks of 4: 256 slots
    prompt = [(7 * i) % 97 for i in range(250)]
    with pytest.raises(ValueError, match=exactly("prompt (250 tokens) + max_new_tokens (7) exceeds the model's 256")):
        engine.add_request(prompt, 7)
    assert not engine.waiting
    request = engine.add_request(prompt, 6)  # 250 + 6 = 256 positions: exactly the model's
    while engine.waiting or engine.running:
        engine.step()
    assert request.output_ids == hf_greedy(tiny_pair[0], prompt, 6)


def test_request_times_are_clock_readings_taken_during_the_run(decoder):
    engine = MiniEngine(decoder, num_blocks=8, block_size=4)
    start = time.perf_counter()
    request = engine.run([[3, 4, 5]], 3)[0]
    end = time.perf_counter()
    assert start <= request.arrival_s <= request.first_token_s <= request.finish_s <= end
    assert 0 <= request.ttft_s <= end - start
    assert 0 <= request.tpot_s <= end - start


def test_each_preemption_is_counted(tiny_pair, decoder):
    # Four blocks of 4; a 7-token and a 6-token request take two blocks each. At the third step
    # the 7-token one needs a block for position 8 and none is free: the younger is preempted.
    # A second pair of the same lengths (other tokens, so no cache hit) is squeezed the same way.
    engine = MiniEngine(decoder, num_blocks=4, block_size=4, max_batch_size=2)
    pairs = [[list(range(10, 17)), list(range(30, 36))], [list(range(50, 57)), list(range(70, 76))]]
    for count, prompts in enumerate(pairs, start=1):
        requests = engine.run(prompts, 6)
        assert [r.output_ids for r in requests] == [hf_greedy(tiny_pair[0], p, 6) for p in prompts]
        assert engine.num_preemptions == count


# A float tensor has __index__ too: int(torch.tensor(1.7)) is 1, so its elements were once truncated to ids.
@pytest.mark.parametrize(
    "call",
    [
        lambda bm: bm.allocate("b", torch.tensor([1.7, 2.2, 3.9])),
        lambda bm: bm.append("a", torch.tensor(5.5)),
    ],
    ids=["allocate", "append"],
)
def test_float_tensor_token_ids_are_refused_not_truncated(call):
    bm = BlockManager(4, 2)
    bm.allocate("a", [1, 2, 3])
    with pytest.raises(ValueError, match=exactly("token_ids must be integers >= 0, got")):
        call(bm)


def logits_seen_by_the_engine(engine):
    """Wrap the engine's sampler: record (context, logits) for every token it samples."""
    seen, sample = [], engine._sample_and_retire

    def spy(logits, rows):
        seen.extend((list(request.context_ids), logits[i].clone()) for i, (request, _, _) in enumerate(rows))
        return sample(logits, rows)

    engine._sample_and_retire = spy
    return seen


# Greedy tokens on a tiny random model hide small errors (a position off by one moves the logits, not
# always the argmax): every sampled row is compared with transformers' logits for the same context.
@pytest.mark.parametrize(
    ("num_blocks", "prompts"),
    [
        (16, [list(range(10, 17)), list(range(10, 16)) + [40], [5, 6]]),  # a shared prefix, a short one
        (4, [list(range(10, 17)), list(range(30, 36))]),  # preempts: the younger request is recomputed
    ],
    ids=["prefix-cache", "preemption"],
)
@torch.no_grad()
def test_engine_logits_equal_transformers_at_every_prefill_and_decode_step(tiny_pair, decoder, num_blocks, prompts):
    engine = MiniEngine(decoder, num_blocks=num_blocks, block_size=4, max_batch_size=3)
    seen = logits_seen_by_the_engine(engine)
    engine.run(prompts, 6)
    assert len(seen) == 6 * len(prompts)
    for context, logits in seen:
        expected = tiny_pair[0](torch.tensor([context])).logits[0, -1]
        torch.testing.assert_close(logits, expected, atol=1e-4, rtol=1e-4)
