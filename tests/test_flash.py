"""FlashAttention in PyTorch: forward and backward against PyTorch's own attention, traffic counts
against closed forms, and clear errors for bad input."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.flash import (
    FlashAttention,
    GPUSpec,
    TrafficCounter,
    attention_flops,
    blocks_from_sram,
    causal_mask,
    estimate_runtime,
    flash_attention,
    flash_attention_backward,
    hbm_traffic,
    standard_attention,
)

TOL = dict(atol=1e-4, rtol=1e-4)
EDGE_N = [1, 2, 63, 64, 65, 127, pytest.param(1024, marks=pytest.mark.slow)]
HEAD_DIMS = [16, 32, 64, 128]


pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest


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


def sdpa_with_gradients(q, k, v, grad_out, causal=False, scale=None):
    """PyTorch's SDPA in float64 and autograd's (dQ, dK, dV) through it: the reference for the backward."""
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    mask = explicit_mask(q.shape[-2], k.shape[-2]) if causal else None
    out = F.scaled_dot_product_attention(*leaves, attn_mask=mask, scale=scale)
    return out.detach(), torch.autograd.grad(out, leaves, grad_out.double())


def random_like_out(q, v, seed=5):
    """A random upstream gradient dO, shaped like the output (..., Nq, dv)."""
    return torch.randn(*q.shape[:-1], v.shape[-1], generator=torch.Generator().manual_seed(seed)).to(q.dtype)


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


def test_defaults_are_no_mask_and_scale_1_over_sqrt_d():
    # More keys than queries, so a causal default would hide keys and change the answer.
    q, k, v = random_qkv(6, 9, 8)
    expected = F.scaled_dot_product_attention(q, k, v)  # no mask, scale 1/sqrt(8)
    for attention in (standard_attention, flash_attention, FlashAttention.apply):
        torch.testing.assert_close(attention(q, k, v), expected, **TOL)
    out, lse = flash_attention(q, k, v, return_lse=True)
    grad_out = random_like_out(q, v)
    _, expected_grads = sdpa_with_gradients(q, k, v, grad_out)
    for got, want in zip(flash_attention_backward(q, k, v, out, lse, grad_out), expected_grads, strict=True):
        torch.testing.assert_close(got.double(), want, **TOL)


def test_an_explicit_scale_replaces_1_over_sqrt_d_forward_and_backward():
    q, k, v = random_qkv(5, 7, 8, lead=(1,))
    grad_out = random_like_out(q, v)
    expected_out, expected_grads = sdpa_with_gradients(q, k, v, grad_out, scale=0.3)
    torch.testing.assert_close(standard_attention(q, k, v, scale=0.3).double(), expected_out, **TOL)
    torch.testing.assert_close(flash_attention(q, k, v, block_q=2, block_k=3, scale=0.3).double(), expected_out, **TOL)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = FlashAttention.apply(*leaves, False, 2, 3, 0.3)
    out.backward(grad_out)
    torch.testing.assert_close(out.double(), expected_out, **TOL)
    for name, leaf, want in zip("qkv", leaves, expected_grads, strict=True):
        torch.testing.assert_close(leaf.grad.double(), want, **TOL, msg=lambda m, name=name: f"d{name}: {m}")


def test_default_tiles_are_64_by_64():
    # 70 rows: 64-row tiles split them 64 + 6, so another default would sum in another order and
    # change the last bits. Asking for 64 x 64 explicitly must give the very same numbers.
    q, k, v = random_qkv(70, 70, 4, lead=(1,))
    grad_out = random_like_out(q, v)
    explicit = dict(block_q=64, block_k=64)
    out, lse = flash_attention(q, k, v, return_lse=True, **explicit)
    assert torch.equal(flash_attention(q, k, v), out)
    assert torch.equal(FlashAttention.apply(q, k, v), out)
    default_grads = flash_attention_backward(q, k, v, out, lse, grad_out)
    for got, want in zip(default_grads, flash_attention_backward(q, k, v, out, lse, grad_out, **explicit), strict=True):
        assert torch.equal(got, want)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    FlashAttention.apply(*leaves).backward(grad_out)
    for leaf, want in zip(leaves, default_grads, strict=True):
        assert torch.equal(leaf.grad, want)


def test_the_autograd_function_runs_the_tiles_it_is_given():
    # FlashAttention.apply(q, k, v, causal, block_q, block_k, scale) is flash_attention with those
    # settings, bit for bit (another tile size sums in another order).
    q, k, v = random_qkv(10, 10, 8, lead=(1,))
    expected = flash_attention(q, k, v, causal=True, block_q=3, block_k=4, scale=0.3)
    assert torch.equal(FlashAttention.apply(q, k, v, True, 3, 4, 0.3), expected)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    ("n_q", "n_k", "block_q", "block_k"), [(7, 7, 1, 3), (5, 12, 1, 4), (12, 5, 5, 2), (9, 9, 4, 4)]
)
def test_backward_matches_autograd_for_any_tiles(n_q, n_k, block_q, block_k, causal):
    """One-row query tiles, tiles that do not divide N, more keys than queries and fewer: for each
    key tile the query loop must start at the first row that sees it (row 0 without a mask)."""
    q, k, v = random_qkv(n_q, n_k, 8, lead=(2, 3), seed=n_q + n_k)
    grad_out = random_like_out(q, v)
    out, lse = flash_attention(q, k, v, causal=causal, block_q=block_q, block_k=block_k, return_lse=True)
    grads = flash_attention_backward(q, k, v, out, lse, grad_out, causal=causal, block_q=block_q, block_k=block_k)
    _, expected = sdpa_with_gradients(q, k, v, grad_out, causal=causal)
    for name, got, want in zip("qkv", grads, expected, strict=True):
        torch.testing.assert_close(got.double(), want, **TOL, msg=lambda m, name=name: f"d{name}: {m}")


def test_backward_skips_query_tiles_that_cannot_see_the_key_tile():
    """The backward's query loop starts at the first tile that sees the key tile. So a NaN in the
    upstream gradient of row 0 reaches only the tiles row 0's tile visits (dQ of row 0, dK and dV
    of keys 0 and 1); the rest is autograd's answer with that row's gradient set to 0, since row 0
    sees key 0 alone and adds nothing to any later key."""
    q, k, v = random_qkv(8, 8, 4, lead=(1,))
    grad_out = random_like_out(q, v)
    poisoned, silent = grad_out.clone(), grad_out.clone()
    poisoned[0, 0, :], silent[0, 0, :] = math.nan, 0.0
    out, lse = flash_attention(q, k, v, causal=True, block_q=2, block_k=2, return_lse=True)
    dq, dk, dv = flash_attention_backward(q, k, v, out, lse, poisoned, causal=True, block_q=2, block_k=2)
    _, (want_dq, want_dk, want_dv) = sdpa_with_gradients(q, k, v, silent, causal=True)
    assert torch.isnan(dq[0, 0]).all()
    torch.testing.assert_close(dq[:, 1:].double(), want_dq[:, 1:], **TOL)
    torch.testing.assert_close(dk[:, 2:].double(), want_dk[:, 2:], **TOL)
    torch.testing.assert_close(dv[:, 2:].double(), want_dv[:, 2:], **TOL)


def test_float64_stays_float64_in_every_step():
    # Accumulating anything in float32 would leave errors near 1e-7; float64 all the way gives ~1e-15.
    q, k, v = random_qkv(6, 9, 4, dtype=torch.float64)
    grad_out = random_like_out(q, v)
    exact = dict(atol=1e-12, rtol=0)
    for causal in (False, True):
        expected_out, expected_grads = sdpa_with_gradients(q, k, v, grad_out, causal=causal)
        torch.testing.assert_close(standard_attention(q, k, v, causal=causal), expected_out, **exact)
        out, lse = flash_attention(q, k, v, causal=causal, block_q=2, block_k=4, return_lse=True)
        torch.testing.assert_close(out, expected_out, **exact)
        assert lse.dtype == torch.float64
        mask = explicit_mask(6, 9) if causal else torch.ones(6, 9, dtype=torch.bool)
        scores = (q @ k.transpose(-2, -1) / 2.0).masked_fill(~mask, -math.inf)  # d = 4: scale 1/2
        torch.testing.assert_close(lse, torch.logsumexp(scores, dim=-1), **exact)
        grads = flash_attention_backward(q, k, v, out, lse, grad_out, causal=causal, block_q=2, block_k=4)
        for name, got, want in zip("qkv", grads, expected_grads, strict=True):
            assert got.dtype == torch.float64
            torch.testing.assert_close(got, want, **exact, msg=lambda m, name=name: f"d{name}: {m}")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_forward_and_backward_keep_the_input_dtype(dtype):
    q, k, v = random_qkv(12, 12, 8, lead=(1,), dtype=dtype)
    grad_out = random_like_out(q, v)
    expected_out, expected_grads = sdpa_with_gradients(q, k, v, grad_out, causal=True)
    loose = dict(atol=3e-2, rtol=3e-2)
    standard = standard_attention(q, k, v, causal=True)
    assert standard.dtype == dtype
    torch.testing.assert_close(standard.double(), expected_out, **loose)
    out, lse = flash_attention(q, k, v, causal=True, block_q=4, block_k=4, return_lse=True)
    grads = flash_attention_backward(q, k, v, out, lse, grad_out, causal=True, block_q=4, block_k=4)
    for name, got, want in zip("qkv", grads, expected_grads, strict=True):
        assert got.dtype == dtype
        torch.testing.assert_close(got.double(), want, **loose, msg=lambda m, name=name: f"d{name}: {m}")


def test_the_answer_does_not_depend_on_torch_default_dtype():
    """A notebook that ran torch.set_default_dtype(torch.float64) gets the same float32 answer, bit
    for bit: the running max, sum, output and gradient accumulators follow the inputs' dtype."""
    q, k, v = random_qkv(10, 10, 8, lead=(1,))
    grad_out = random_like_out(q, v)

    def run():
        out, lse = flash_attention(q, k, v, causal=True, block_q=4, block_k=4, return_lse=True)
        return out, lse, *flash_attention_backward(q, k, v, out, lse, grad_out, causal=True, block_q=4, block_k=4)

    expected = run()
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        got = run()
    finally:
        torch.set_default_dtype(before)
    for got_tensor, want in zip(got, expected, strict=True):
        assert got_tensor.dtype == want.dtype == torch.float32
        assert torch.equal(got_tensor, want)


def test_backward_converts_out_and_grad_out_to_the_inputs_dtype_first():
    """O and dO may come in another dtype; they are converted to q's accumulation dtype (float32 here)
    before any arithmetic, so float64 copies give exactly the float32 answer."""
    q, k, v = random_qkv(6, 6, 4, lead=(1,))
    grad_out = random_like_out(q, v)
    out, lse = flash_attention(q, k, v, causal=True, block_q=2, block_k=2, return_lse=True)
    expected = flash_attention_backward(q, k, v, out, lse, grad_out, causal=True, block_q=2, block_k=2)
    got = flash_attention_backward(q, k, v, out.double(), lse, grad_out.double(), causal=True, block_q=2, block_k=2)
    for got_tensor, want in zip(got, expected, strict=True):
        assert got_tensor.dtype == torch.float32 and torch.equal(got_tensor, want)


def test_every_tensor_is_made_on_the_inputs_device():
    """Runs on PyTorch's "meta" device (shapes only, no data), so even without a GPU it shows that
    nothing is created on the default CPU device: such a tensor would not mix with the inputs, or
    would come out on the CPU. 7 queries and 5 keys: causal tiles cross the diagonal and need a mask."""
    q, k, v = (
        torch.empty(2, 7, 4, device="meta"),
        torch.empty(2, 5, 4, device="meta"),
        torch.empty(2, 5, 3, device="meta"),
    )
    assert causal_mask(7, 5, device="meta").device.type == "meta"
    for causal in (False, True):
        assert standard_attention(q, k, v, causal=causal).device.type == "meta"
        out, lse = flash_attention(q, k, v, causal=causal, block_q=2, block_k=2, return_lse=True)
        grads = flash_attention_backward(q, k, v, out, lse, torch.empty_like(out), causal=causal, block_q=2, block_k=2)
        for tensor, like in zip((out, lse, *grads), (out, lse, q, k, v), strict=True):
            assert tensor.device.type == "meta" and tensor.shape == like.shape


# ---------------------------------------------------------------- HBM traffic


@pytest.mark.parametrize("n,d", [(1, 16), (64, 64), (100, 32), (257, 8)])
def test_standard_traffic_is_n_times_4d_plus_4n(n, d):
    counter = TrafficCounter()
    standard_attention(*random_qkv(n, n, d, lead=()), counter=counter)
    assert counter.total == n * (4 * d + 4 * n)
    # Read Q, K, V (3 N d) and S, P back (2 N^2); write S, P (2 N^2) and O (N d).
    assert (counter.reads, counter.writes) == (3 * n * d + 2 * n * n, 2 * n * n + n * d)
    assert hbm_traffic(n, d, "standard") == {"reads": counter.reads, "writes": counter.writes, "total": counter.total}


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


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("n_q", "n_k", "block_q", "block_k"), [(7, 3, 2, 2), (5, 12, 2, 4), (9, 9, 4, 3)])
def test_the_forward_loads_each_key_tile_some_query_of_the_tile_can_see(n_q, n_k, block_q, block_k, causal):
    """Counted by enumeration: a (query tile, key tile) pair is loaded when the mask lets some query of
    the one see some key of the other. With 7 queries and 3 keys the first four queries see no key
    (they are positions -4 to -1), so their two tiles load no key tile at all."""
    d = 4
    mask = explicit_mask(n_q, n_k) if causal else torch.ones(n_q, n_k, dtype=torch.bool)
    key_reads = 0
    for q_start in range(0, n_q, block_q):
        for k_start in range(0, n_k, block_k):
            if mask[q_start : q_start + block_q, k_start : k_start + block_k].any():
                key_reads += 2 * min(block_k, n_k - k_start) * d  # one K tile and one V tile
    counter = TrafficCounter()
    q, k, v = random_qkv(n_q, n_k, d, lead=())
    flash_attention(q, k, v, causal=causal, block_q=block_q, block_k=block_k, counter=counter)
    assert counter.reads == n_q * d + key_reads  # Q once
    assert counter.writes == n_q * d + n_q  # O and L once


def test_flash_traffic_defaults_to_64_by_64_tiles():
    # N = 100, causal, 64 x 64 tiles. Query tile [0, 64) reaches key 63: one key tile, 64 keys.
    # Query tile [64, 100) reaches key 99: both key tiles, all 100 keys.
    # reads = Q (100 d) + K and V (2 (64 + 100) d) = 428 d; writes = O (100 d) + L (100).
    n, d = 100, 4
    counter = TrafficCounter()
    flash_attention(*random_qkv(n, n, d, lead=()), causal=True, counter=counter)
    assert (counter.reads, counter.writes) == (428 * d, 100 * d + 100)
    assert hbm_traffic(n, d, "flash", causal=True) == {
        "reads": 428 * d,
        "writes": 100 * d + 100,
        "total": 528 * d + 100,
    }


def test_causal_traffic_by_hand_with_one_row_tiles():
    # N = 4, d = 2, 1 x 1 tiles: row i loads keys 0..i, so K and V are read 2 (1 + 2 + 3 + 4) d = 40
    # elements; Q adds N d = 8. Written: O (8) and L (4).
    assert hbm_traffic(4, 2, "flash", block_q=1, block_k=1, causal=True) == {"reads": 48, "writes": 12, "total": 60}


def test_the_causal_count_visits_at_most_max_query_tiles(monkeypatch):
    monkeypatch.setattr("inferlab.flash.traffic.MAX_QUERY_TILES", 4)
    assert hbm_traffic(4, 2, "flash", block_q=1, block_k=1, causal=True)["total"] == 60  # 4 tiles: allowed
    with pytest.raises(ValueError, match="into 5 query tiles, over the 4"):
        hbm_traffic(5, 2, "flash", block_q=1, block_k=1, causal=True)


def test_sram_tiles_count_elements_of_the_given_size():
    # 1 KiB of fp16 holds 512 elements: with d = 16, block_k = 512 / 4d = 8 and block_q = min(8, d) = 8.
    assert blocks_from_sram(1024, 16, element_bytes=2) == (8, 8)
    # N = 32: 4 query tiles, each reading all of K and V. reads = N d + 4 * 2 N d = 512 + 4096;
    # writes = O (512) + L (32).
    traffic = hbm_traffic(32, 16, "flash", sram_bytes=1024, element_bytes=2)
    assert traffic == {"reads": 4608, "writes": 544, "total": 5152}


def test_blocks_from_sram_edges():
    # Exactly 4d elements (256 bytes of fp32 with d = 16): one row each of Q, K, V and O fits.
    assert blocks_from_sram(4 * 16 * 4, 16) == (1, 1)
    # 1026 bytes hold 256 whole fp32 elements (the 2 bytes left over hold none): block_k = 256 / 8 = 32.
    assert blocks_from_sram(1026, 2) == (2, 32)


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


# A made-up GPU whose peaks are exact in binary floating point, so the estimates can be checked with ==:
# 2e12 FLOP/s in fp32, 8e12 in fp16, 4e9 bytes/s.
TOY_GPU = GPUSpec("toy", fp32_tflops=2.0, fp16_tflops=8.0, bandwidth_gbs=4.0, sram_kib_per_sm=64, source="test")


def test_estimate_runtime_takes_a_gpu_spec_and_uses_its_exact_peaks():
    estimate = estimate_runtime(6e12, 8e9, TOY_GPU)
    assert estimate == {
        "compute_s": 3.0,  # 6e12 FLOPs / 2e12 FLOP/s
        "memory_s": 2.0,  # 8e9 bytes / 4e9 bytes/s
        "runtime_s": 3.0,  # roofline: the slower of the two
        "bound": "compute",
        "arithmetic_intensity": 750.0,  # 6e12 / 8e9 FLOPs per byte
        "ridge_point": 500.0,  # 2e12 / 4e9
    }
    assert estimate_runtime(6e12, 8e9, TOY_GPU, precision="fp16")["compute_s"] == 0.75  # 6e12 / 8e12
    assert estimate_runtime(6e12, 8e9, TOY_GPU, runtime_model="additive")["runtime_s"] == 5.0
    # Peaks below 1 are fine: 1e12 FLOPs at 0.5 TFLOP/s take 2 s.
    slow = GPUSpec("slow", fp32_tflops=0.5, fp16_tflops=0.5, bandwidth_gbs=0.5, sram_kib_per_sm=1, source="test")
    assert estimate_runtime(1e12, 0.0, slow)["compute_s"] == 2.0


def test_at_the_ridge_point_the_estimate_is_compute_bound():
    # memory-bound means intensity *below* the ridge point; here both take 3 s, intensity = ridge = 500.
    estimate = estimate_runtime(6e12, 12e9, TOY_GPU)
    assert estimate["compute_s"] == estimate["memory_s"] == 3.0
    assert estimate["bound"] == "compute"


def test_no_work_takes_no_time():
    estimate = estimate_runtime(0, 0, "T4")
    assert (estimate["compute_s"], estimate["memory_s"], estimate["runtime_s"]) == (0.0, 0.0, 0.0)
    assert estimate["arithmetic_intensity"] == math.inf  # no bytes moved: FLOPs per byte is unbounded


@pytest.mark.parametrize("field", ["fp32_tflops", "fp16_tflops", "bandwidth_gbs"])
@pytest.mark.parametrize("value", [0.0, -1.0, math.inf, math.nan])
def test_a_gpu_spec_needs_finite_positive_peaks(field, value):
    gpu = dataclasses.replace(TOY_GPU, **{field: value})
    with pytest.raises(ValueError, match="gpu must be one of"):
        estimate_runtime(1.0, 1.0, gpu)


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
        # Each of q, k and v is named, and each size that must be >= 1 is checked on its own.
        (dict(k="not a tensor"), TypeError, "^k must be a torch.Tensor"),
        (dict(v="not a tensor"), TypeError, "^v must be a torch.Tensor"),
        (dict(k=torch.zeros(2, 5, 16, dtype=torch.int32)), TypeError, "^k must have dtype"),
        (dict(v=torch.zeros(5)), ValueError, "^v must have shape"),
        (dict(q=torch.zeros(2, 0, 16)), ValueError, "lengths and head dims must be >= 1"),  # no query
        (dict(k=torch.zeros(2, 0, 16), v=torch.zeros(2, 0, 16)), ValueError, "must be >= 1"),  # no key
        (dict(q=torch.zeros(2, 5, 0), k=torch.zeros(2, 5, 0)), ValueError, "must be >= 1"),  # d = 0
        (dict(v=torch.zeros(2, 5, 0)), ValueError, "must be >= 1"),  # values of width 0
        # The scale must lie in (0, inf): 0 and inf are out, and so are a bool and a string.
        (dict(scale=0), ValueError, "scale must be a positive number"),
        (dict(scale=math.inf), ValueError, "scale must be a positive number"),
        (dict(scale=True), ValueError, "scale must be a positive number"),
        (dict(scale="0.5"), ValueError, "scale must be a positive number"),
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
    q, k, v = random_qkv(5, 5, 16)
    out, lse = flash_attention(q, k, v, return_lse=True)
    with pytest.raises(ValueError, match=r"lse must have shape \(2, 5\)"):
        flash_attention_backward(q, k, v, out, lse[..., :4], torch.ones_like(out))
    with pytest.raises(ValueError, match="grad_out must have shape"):
        flash_attention_backward(q, k, v, out, lse, torch.ones(2, 5, 8))


def test_backward_names_the_saved_tensor_or_tile_that_does_not_fit():
    q, k, v = random_qkv(5, 5, 16)
    out, lse = flash_attention(q, k, v, return_lse=True)
    grad_out = torch.ones_like(out)
    with pytest.raises(ValueError, match=r"^out must have shape \(2, 5, 16\)"):
        flash_attention_backward(q, k, v, out[..., :4, :], lse, grad_out)
    for name in ("block_q", "block_k"):
        with pytest.raises(ValueError, match=f"^{name} must be an integer >= 1"):
            flash_attention_backward(q, k, v, out, lse, grad_out, **{name: 0})


@pytest.mark.parametrize(("n_q", "n_k"), [(3, 5), (5, 3), (4, 4), (1, 1), (0, 3), (3, 0)])
def test_causal_mask_lets_each_query_see_keys_up_to_its_position(n_q, n_k):
    # Brute force: the queries are the last n_q positions, so query i sits at i + n_k - n_q.
    expected = torch.tensor([[j <= i + n_k - n_q for j in range(n_k)] for i in range(n_q)], dtype=torch.bool)
    mask = causal_mask(n_q, n_k)  # the default device is the CPU
    assert mask.device.type == "cpu"
    assert torch.equal(mask, expected.reshape(n_q, n_k))


@pytest.mark.parametrize(("n_q", "n_k", "name"), [(-1, 3, "n_q"), (3, -1, "n_k"), (2.5, 3, "n_q"), (True, 3, "n_q")])
def test_causal_mask_refuses_sizes_that_are_not_counts(n_q, n_k, name):
    with pytest.raises(ValueError, match=f"^{name} must be an integer >= 0"):
        causal_mask(n_q, n_k)


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: blocks_from_sram(0, 64), "sram_bytes"),
        (lambda: blocks_from_sram(1024, 0), "d"),
        (lambda: blocks_from_sram(1024, 64, element_bytes=0), "element_bytes"),
        (lambda: hbm_traffic(2.5, 64, "flash"), "N"),
        (lambda: hbm_traffic(True, 64, "flash"), "N"),
        (lambda: hbm_traffic(64, 0, "flash"), "d"),
        (lambda: hbm_traffic(64, 64, "flash", block_q=0), "block_q"),
        (lambda: hbm_traffic(64, 64, "flash", block_k=0), "block_k"),
        (lambda: attention_flops(0, 64), "N"),
        (lambda: attention_flops(64, 0), "d"),
    ],
)
def test_model_sizes_must_be_counts_and_the_message_names_which(call, name):
    with pytest.raises(ValueError, match=f"^{name} must be an integer >= 1"):
        call()


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: attention_flops(64, 64, causal=1), "causal"),
        (lambda: attention_flops(64, 64, backward="yes"), "backward"),
        (lambda: estimate_runtime(True, 1.0, "T4"), "flops"),  # a bool is not a count of FLOPs
        (lambda: estimate_runtime("1e12", 1.0, "T4"), "flops"),
        (lambda: estimate_runtime(1.0, -1.0, "T4"), "bytes_moved"),
        (lambda: estimate_runtime(1.0, math.nan, "T4"), "bytes_moved"),
    ],
)
def test_model_switches_and_amounts_name_the_bad_argument(call, name):
    with pytest.raises(ValueError, match=f"^{name} must be"):
        call()


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
