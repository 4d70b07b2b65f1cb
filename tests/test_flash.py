"""FlashAttention in PyTorch: forward and backward against PyTorch's own attention, traffic counts
against closed forms, and clear errors for bad input."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.flash import (
    FlashAttention,
    TrafficCounter,
    attention_flops,
    blocks_from_sram,
    estimate_runtime,
    flash_attention,
    hbm_traffic,
    standard_attention,
)

TOL = dict(atol=1e-4, rtol=1e-4)
EDGE_N = [1, 2, 63, 64, 65, 127, pytest.param(1024, marks=pytest.mark.slow)]
HEAD_DIMS = [16, 32, 64, 128]


@pytest.fixture(autouse=True)
def one_thread():
    """Small matmuls in a Python loop run far faster on one thread on a busy 2-core machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def random_qkv(n_q, n_k, d, lead=(2,), dtype=torch.float32, seed=0):
    generator = torch.Generator().manual_seed(seed)
    make = lambda n: torch.randn(*lead, n, d, generator=generator, dtype=torch.float32).to(dtype)  # noqa: E731
    return make(n_q), make(n_k), make(n_k)


def explicit_mask(n_q, n_k):
    """Query i (the last n_q of the sequence) sees key j when j - i <= n_k - n_q; built with tril."""
    return torch.ones(n_q, n_k, dtype=torch.bool).tril(diagonal=n_k - n_q)


def explicit_attention(q, k, v, mask=None):
    """The formula softmax(QK^T / sqrt(d) + mask) V written out, for autograd to differentiate (float64)."""
    scores = q.double() @ k.double().transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v.double()


# ---------------------------------------------------------------- forward and backward vs PyTorch


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", HEAD_DIMS)
@pytest.mark.parametrize("n", EDGE_N)
def test_forward_matches_sdpa(n, d, causal):
    q, k, v = random_qkv(n, n, d)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    torch.testing.assert_close(flash_attention(q, k, v, causal=causal), expected, **TOL)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", HEAD_DIMS)
@pytest.mark.parametrize("n", EDGE_N)
def test_gradients_match_autograd_of_the_formula(n, d, causal):
    q, k, v = random_qkv(n, n, d, lead=(1,), seed=1)
    grad_out = torch.randn(1, n, d, generator=torch.Generator().manual_seed(2))
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = FlashAttention.apply(*leaves, causal)
    out.backward(grad_out)

    ref_leaves = [t.double().requires_grad_() for t in (q, k, v)]
    ref_out = explicit_attention(*ref_leaves, explicit_mask(n, n) if causal else None)
    ref_grads = torch.autograd.grad(ref_out, ref_leaves, grad_out.double())
    torch.testing.assert_close(out.double(), ref_out.detach(), **TOL)
    for name, leaf, expected in zip("qkv", leaves, ref_grads, strict=True):
        torch.testing.assert_close(leaf.grad.double(), expected, **TOL, msg=lambda m, name=name: f"d{name}: {m}")


def test_lse_is_the_log_sum_exp_of_the_scaled_scores():
    q, k, v = random_qkv(70, 45, 32)
    _, lse = flash_attention(q, k, v, block_q=16, block_k=16, return_lse=True)
    expected = torch.logsumexp(q @ k.transpose(-2, -1) / math.sqrt(32), dim=-1)
    torch.testing.assert_close(lse, expected, **TOL)


@settings(max_examples=25, deadline=None)
@given(
    n_q=st.integers(1, 80),
    n_k=st.integers(1, 80),
    d=st.sampled_from([1, 3, 8, 16]),
    block_q=st.integers(1, 40),
    block_k=st.integers(1, 40),
    lead=st.sampled_from([(), (2,), (2, 3)]),
    causal=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_any_shape_and_tile_matches_sdpa(n_q, n_k, d, block_q, block_k, lead, causal, seed):
    q, k, v = random_qkv(n_q, n_k, d, lead=lead, seed=seed)
    mask = explicit_mask(n_q, n_k) if causal else None
    got = flash_attention(q, k, v, causal=causal, block_q=block_q, block_k=block_k)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    seen = mask.any(dim=-1) if causal else torch.ones(n_q, dtype=torch.bool)
    torch.testing.assert_close(got[..., seen, :], expected[..., seen, :], **TOL)


@pytest.mark.parametrize(("n_q", "n_k"), [(5, 12), (1, 9), (12, 12), (3, 40)])
def test_causal_queries_after_a_longer_past_see_every_earlier_key(n_q, n_k):
    """The queries are the last n_q positions: with more keys than queries (a decode or verify step
    after a cache) the key loop must run to each tile's own position, not stop at its row index."""
    q, k, v = random_qkv(n_q, n_k, 8, seed=n_k)
    got = flash_attention(q, k, v, causal=True, block_q=2, block_k=4)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=explicit_mask(n_q, n_k))
    torch.testing.assert_close(got, expected, **TOL)


def test_rows_that_see_no_key_give_zero_not_nan():
    # 7 queries, 3 keys, causal: the queries are the last 7 positions, so the first 4 see no key.
    q, k, v = random_qkv(7, 3, 8)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = FlashAttention.apply(*leaves, True, 2, 2)
    out.sum().backward()
    assert torch.equal(out[..., :4, :], torch.zeros_like(out[..., :4, :]))
    assert torch.equal(standard_attention(q, k, v, causal=True)[..., :4, :], torch.zeros(2, 4, 8))
    assert not any(torch.isnan(t).any() for t in (out, *(leaf.grad for leaf in leaves)))
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=explicit_mask(7, 3))
    torch.testing.assert_close(out[..., 4:, :], expected[..., 4:, :], **TOL)


def test_standard_attention_matches_sdpa():
    q, k, v = random_qkv(50, 50, 16)
    for causal in (False, True):
        expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        torch.testing.assert_close(standard_attention(q, k, v, causal=causal), expected, **TOL)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_inputs_accumulate_in_fp32(dtype):
    q, k, v = random_qkv(100, 100, 32, dtype=dtype)
    out = flash_attention(q, k, v, causal=True, block_q=32, block_k=32)
    assert out.dtype == dtype
    expected = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True)
    torch.testing.assert_close(out.float(), expected, atol=2e-2, rtol=2e-2)


def test_forward_saves_only_q_k_v_o_and_lse():
    n, d = 96, 16
    q, k, v = (t.requires_grad_() for t in random_qkv(n, n, d, lead=(1,)))
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.numel()) or t, lambda t: t):
        FlashAttention.apply(q, k, v, False)
    assert sum(saved) == 4 * n * d + n  # Q, K, V, O and one L per row: O(N d), no N x N matrix


# ---------------------------------------------------------------- HBM traffic


@pytest.mark.parametrize("n,d", [(1, 16), (64, 64), (100, 32), (257, 8)])
def test_standard_traffic_is_n_times_4d_plus_4n(n, d):
    counter = TrafficCounter()
    standard_attention(*random_qkv(n, n, d, lead=()), counter=counter)
    assert counter.total == n * (4 * d + 4 * n)
    assert hbm_traffic(n, d, "standard")["total"] == n * (4 * d + 4 * n)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n,d,block_q,block_k", [(1, 16, 64, 64), (100, 16, 32, 16), (257, 8, 64, 30), (64, 4, 7, 64)])
def test_flash_traffic_formula_equals_what_the_code_moves(n, d, block_q, block_k, causal):
    counter = TrafficCounter()
    flash_attention(*random_qkv(n, n, d, lead=()), causal=causal, block_q=block_q, block_k=block_k, counter=counter)
    traffic = hbm_traffic(n, d, "flash", block_q=block_q, block_k=block_k, causal=causal)
    assert (traffic["reads"], traffic["writes"]) == (counter.reads, counter.writes)


def test_flash_traffic_closed_form_without_mask():
    # Q once, K and V once per query tile, O and L once.
    n, d, block_q = 1000, 64, 48
    expected = n * d + math.ceil(n / block_q) * 2 * n * d + n * d + n
    assert hbm_traffic(n, d, "flash", block_q=block_q, block_k=100)["total"] == expected


def test_blocks_from_sram_follow_algorithm_1():
    # M = 100 KiB of fp32 = 25,600 elements; d = 64: block_k = ceil(25600 / 256) = 100, block_q = min(100, 64).
    assert blocks_from_sram(100 * 1024, 64) == (64, 100)
    assert blocks_from_sram(100 * 1024, 16) == (16, 400)


def test_flash_traffic_is_theta_n2_d2_over_m():
    # Dao et al. (2022), Theorem 2: with block_q = M / 4d <= d, K and V are read N / block_q times,
    # 2 N d * N * 4d / M = 8 N^2 d^2 / M elements, which dominates the total for long sequences.
    n, d = 8192, 64
    for sram_bytes in (16 * 1024, 32 * 1024, 64 * 1024):
        m = sram_bytes // 4
        ratio = hbm_traffic(n, d, "flash", sram_bytes=sram_bytes)["total"] / (8 * n * n * d * d / m)
        assert 1.0 < ratio < 1.02


def test_flops_and_roofline_against_hand_arithmetic():
    assert attention_flops(1024, 64) == 4 * 1024**2 * 64
    assert attention_flops(1024, 64, causal=True, backward=True) == 4 * 1024**2 * 64 * 2.5 / 2
    # T4: 8.1e12 FLOP/s and 320e9 B/s, so 8.1e12 FLOPs take 1 s and 640e9 bytes take 2 s.
    estimate = estimate_runtime(8.1e12, 640e9, "T4")
    assert estimate["compute_s"] == pytest.approx(1.0)
    assert estimate["memory_s"] == pytest.approx(2.0)
    assert estimate["runtime_s"] == pytest.approx(2.0) and estimate["bound"] == "memory"
    assert estimate["ridge_point"] == pytest.approx(8.1e12 / 320e9)
    assert estimate_runtime(8.1e12, 1.0, "T4")["bound"] == "compute"

    # The additive model (the NTU lab's): no overlap, so 1 s of arithmetic plus 2 s of traffic.
    additive = estimate_runtime(8.1e12, 640e9, "T4", runtime_model="additive")
    assert additive["runtime_s"] == pytest.approx(3.0) and additive["bound"] == "memory"


def algorithm_1_traffic(n: int, d: int, block_r: int, block_c: int) -> int:
    """Elements Dao et al. (2022), Algorithm 1 moves, step by step: an independent count.

    Outer loop over key/value blocks j (K_j and V_j loaded once); inner loop over query blocks i:
    load Q_i, O_i, l_i, m_i, then write O_i, l_i, m_i back.
    """
    moved = 0
    for j in range(0, n, block_c):
        moved += 2 * min(block_c, n - j) * d
        for i in range(0, n, block_r):
            rows = min(block_r, n - i)
            moved += 2 * rows * d + 2 * rows + rows * d + 2 * rows
    return moved


@pytest.mark.parametrize("n,d", [(1, 8), (100, 16), (1000, 64), (6144, 64)])
def test_ideal_traffic_is_algorithm_1_with_a_single_key_block(n, d):
    ideal = hbm_traffic(n, d, "flash_ideal")
    assert ideal["total"] == n * (5 * d + 4)  # the NTU lab's count
    assert ideal["reads"] == 4 * n * d + 2 * n and ideal["writes"] == n * d + 2 * n
    assert algorithm_1_traffic(n, d, block_r=64, block_c=n) == ideal["total"]  # one K/V block holds every key
    if n > 64:
        # With real SRAM something is reread, in either loop order: more than the ideal count.
        assert algorithm_1_traffic(n, d, block_r=64, block_c=64) > ideal["total"]
        assert hbm_traffic(n, d, "flash", block_q=64, block_k=64)["total"] > ideal["total"]


def test_theorem_2_needs_sram_below_4d_squared():
    # Algorithm 1's tiles cap the query tile at d rows: once M >= 4 d^2 more SRAM no longer helps.
    n, d = 4096, 64
    at_the_cap = hbm_traffic(n, d, "flash", sram_bytes=4 * d * d * 4)["total"]
    assert hbm_traffic(n, d, "flash", sram_bytes=16 * d * d * 4)["total"] == at_the_cap
    assert hbm_traffic(n, d, "flash", sram_bytes=2 * d * d * 4)["total"] > at_the_cap


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        (dict(k=torch.zeros(2, 5, 16, dtype=torch.float64)), TypeError, "share one dtype"),
        (dict(k=torch.zeros(2, 5, 8)), ValueError, "same head dim"),
        (dict(v=torch.zeros(2, 6, 16)), ValueError, "same number of keys"),
        (dict(k=torch.zeros(3, 5, 16)), ValueError, "leading"),
        (dict(q=torch.zeros(4)), ValueError, "at least 2 dims"),
        (dict(q=torch.zeros(2, 5, 16, dtype=torch.int64)), TypeError, "dtype"),
        (dict(q="not a tensor"), TypeError, "q must be a torch.Tensor"),
        (dict(block_q=0), ValueError, "block_q must be an integer >= 1"),
        (dict(block_k=2.5), ValueError, "block_k must be an integer >= 1"),
        (dict(scale=-1.0), ValueError, "scale must be a positive number"),
    ],
)
def test_bad_input_is_refused_before_any_work(kwargs, error, words):
    q, k, v = random_qkv(5, 5, 16)
    arguments = dict(q=q, k=k, v=v) | kwargs
    counter = TrafficCounter()
    with pytest.raises(error, match=words):
        flash_attention(**arguments, counter=counter)
    assert counter.total == 0


def test_backward_refuses_mismatched_saved_tensors():
    from inferlab.flash import flash_attention_backward

    q, k, v = random_qkv(5, 5, 16)
    out, lse = flash_attention(q, k, v, return_lse=True)
    with pytest.raises(ValueError, match=r"lse must have shape \(2, 5\)"):
        flash_attention_backward(q, k, v, out, lse[..., :4], torch.ones_like(out))
    with pytest.raises(ValueError, match="grad_out must have shape"):
        flash_attention_backward(q, k, v, out, lse, torch.ones(2, 5, 8))


def test_device_mismatch_is_refused():
    q, k, v = random_qkv(5, 5, 16)
    with pytest.raises(ValueError, match="one device"):
        flash_attention(q, k.to("meta"), v)


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda: hbm_traffic(0, 64, "flash"), "N must be an integer >= 1"),
        (lambda: hbm_traffic(64, 64, "tiled"), "method must be one of"),
        (lambda: hbm_traffic(64, 64, "standard", block_q=16), "no tiles"),
        (lambda: hbm_traffic(64, 64, "flash", sram_bytes=1024, block_q=16), "not both"),
        (lambda: hbm_traffic(64, 64, "flash", sram_bytes=100), "fewer than 4d"),
        (lambda: estimate_runtime(1.0, 1.0, "V100"), "gpu must be one of"),
        (lambda: estimate_runtime(-1.0, 1.0, "T4"), "flops must be a finite number >= 0"),
        (lambda: estimate_runtime(1.0, 1.0, "T4", precision="int8"), "precision must be"),
        (lambda: estimate_runtime(1.0, 1.0, "T4", runtime_model="overlap"), "runtime_model must be one of"),
        (lambda: hbm_traffic(64, 64, "flash_ideal", block_q=16), "flash_ideal has no tiles"),
    ],
)
def test_bad_model_arguments_name_what_is_allowed(call, words):
    with pytest.raises(ValueError, match=words):
        call()


def test_committed_traffic_results_are_current():
    """The page's model numbers must be what the package computes now (rerun the bench if not)."""
    import json
    from pathlib import Path

    from inferlab.flash.bench import traffic_values

    committed = Path(__file__).resolve().parent.parent / "docs" / "results" / "flash_traffic.json"
    stored = json.loads(committed.read_text(encoding="utf-8"))["values"]
    assert stored == json.loads(json.dumps(traffic_values())), "run python -m inferlab.flash.bench --traffic-only"


# ---------------------------------------------------------------- inside a Hugging Face model


def test_tiled_attention_inside_llama_matches_its_own_attention(tiny_pair):
    from inferlab.flash.hf import use_flash_attention

    model = tiny_pair[0]  # grouped-query attention: 4 query heads, 2 key/value heads
    ids = torch.randint(0, 97, (2, 70), generator=torch.Generator().manual_seed(0))
    before = model.config._attn_implementation
    try:
        model.set_attn_implementation("eager")
        with torch.no_grad():
            expected_logits = model(ids, use_cache=False).logits
            expected_tokens = model.generate(ids[:1, :9], max_new_tokens=8, do_sample=False)
        use_flash_attention(model)
        with torch.no_grad():
            torch.testing.assert_close(model(ids, use_cache=False).logits, expected_logits, **TOL)
            # Cached decoding: each step is 1 query against all earlier keys.
            assert torch.equal(model.generate(ids[:1, :9], max_new_tokens=8, do_sample=False), expected_tokens)
            with pytest.raises(ValueError, match="padding"):
                model(ids[:, :5], attention_mask=torch.tensor([[1, 1, 1, 1, 1], [0, 1, 1, 1, 1]]), use_cache=False)
    finally:
        model.set_attn_implementation(before)


# ----------------------------------------------------------------------------------------------
# Issue 18: NaN and inf propagate as PyTorch's SDPA propagates them (its output is the reference),
# float64 stays float64, and a switch like causal takes only True or False.


def poisoned(tensor: torch.Tensor, value: float, row: int) -> torch.Tensor:
    tensor = tensor.clone()
    tensor[0, row, 1] = value
    return tensor


@pytest.mark.parametrize("attention", ["standard", "flash"])
@pytest.mark.parametrize(
    ("name", "value", "row", "causal"),
    [
        ("q", math.nan, 3, False),
        ("q", math.nan, 3, True),
        ("k", math.inf, 4, False),
        ("k", -math.inf, 4, False),
        ("v", math.nan, 2, False),
        ("k", math.nan, 0, True),  # key 0 is seen by every query, causal or not
        ("q", math.inf, 6, True),
    ],
)
def test_nan_and_inf_come_out_where_sdpa_puts_them(attention, name, value, row, causal):
    generator = torch.Generator().manual_seed(11)
    tensors = {n: torch.randn(2, 9, 8, generator=generator) for n in "qkv"}
    tensors[name] = poisoned(tensors[name], value, row)
    expected = F.scaled_dot_product_attention(tensors["q"], tensors["k"], tensors["v"], is_causal=causal)
    if attention == "standard":
        out = standard_attention(tensors["q"], tensors["k"], tensors["v"], causal=causal)
    else:
        out = flash_attention(tensors["q"], tensors["k"], tensors["v"], causal=causal, block_q=4, block_k=4)
    nan = torch.isnan(expected)
    assert nan.any() or value == -math.inf, "the poisoned entry must reach some output"
    assert torch.equal(torch.isnan(out), nan), "a NaN became a number, or a number became NaN"
    torch.testing.assert_close(out[~nan], expected[~nan], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("attention", [standard_attention, flash_attention])
def test_a_row_with_no_visible_key_is_zero_as_in_sdpa(attention):
    q, k, v = (torch.randn(1, 5, 8) for _ in range(3))
    k[0, :, :] = -math.inf  # every score is -inf: nothing to attend to
    q = q.abs() + 0.1  # positive queries: each score is +sum(q) * -inf = -inf, never NaN
    expected = F.scaled_dot_product_attention(q, k, v)
    assert torch.equal(expected, torch.zeros_like(expected))
    assert torch.equal(attention(q, k, v), expected)


def test_float64_is_computed_in_float64_so_gradcheck_passes():
    generator = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 5, 4, dtype=torch.float64, generator=generator).requires_grad_() for _ in range(3))
    assert flash_attention(q, k, v).dtype == standard_attention(q, k, v).dtype == torch.float64
    for causal in (False, True):
        assert torch.autograd.gradcheck(lambda a, b, c, m=causal: FlashAttention.apply(a, b, c, m, 2, 2), (q, k, v))
    # And the float64 result agrees with SDPA in float64 to float64 precision, not float32's.
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(
        flash_attention(q, k, v, causal=True, block_q=2, block_k=2), expected, atol=1e-12, rtol=0
    )


@pytest.mark.parametrize("causal", ["yes", "no", 1, None])
@pytest.mark.parametrize("attention", [standard_attention, flash_attention])
def test_causal_must_be_a_bool(attention, causal):
    q = torch.zeros(1, 4, 8)
    with pytest.raises(TypeError, match="causal must be True or False"):
        attention(q, q, q, causal=causal)
