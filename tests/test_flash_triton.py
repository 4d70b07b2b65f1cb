"""The Triton kernel against PyTorch's own attention.

On a CPU the kernel runs in Triton's interpreter. TRITON_INTERPRET=1 must be set before Triton is
imported, so those checks run in one fresh subprocess (tiny sizes: the interpreter is slow) that
prints its measured errors as JSON; the tests below assert on them. On a CUDA GPU the gpu-marked
tests compare with SDPA up to N = 16k.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not installed")

# (n_q, n_k, d, causal, dtype, block_q, block_k)
INTERPRETER_CASES = [
    (1, 1, 16, False, "float32", 16, 16),
    (17, 17, 16, True, "float32", 16, 16),
    (40, 40, 32, False, "float16", 16, 32),
    (33, 33, 64, True, "float32", 16, 16),
    (9, 20, 16, True, "float32", 16, 16),  # fewer queries than keys: the queries are the last 9
    (20, 9, 16, True, "float32", 16, 16),  # more queries than keys: the first 11 rows see no key
    (16, 16, 128, False, "float32", 16, 16),
]

SCRIPT = textwrap.dedent(
    """
    import json, math, sys
    import torch
    import torch.nn.functional as F
    from inferlab.flash import triton_attention

    torch.set_num_threads(1)
    cases = json.loads(sys.argv[1])
    report = []
    for n_q, n_k, d, causal, dtype, block_q, block_k in cases:
        g = torch.Generator().manual_seed(n_q * 1000 + n_k)
        q, k, v = (torch.randn(2, 3, n, d, generator=g).to(getattr(torch, dtype)) for n in (n_q, n_k, n_k))
        mask = torch.ones(n_q, n_k, dtype=torch.bool).tril(diagonal=n_k - n_q) if causal else None
        out = triton_attention(q, k, v, causal=causal, block_q=block_q, block_k=block_k).float()
        expected = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask)
        seen = mask.any(dim=-1) if causal else torch.ones(n_q, dtype=torch.bool)
        report.append({
            "max_error": (out[..., seen, :] - expected[..., seen, :]).abs().max().item(),
            "unseen_rows_zero": bool((out[..., ~seen, :] == 0).all()),
            "any_nan": bool(out.isnan().any()),
        })

    # Backward: gradients through the kernel's L against autograd of the explicit formula.
    g = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(1, 2, 24, 16, generator=g).requires_grad_() for _ in range(3))
    grad_out = torch.randn(1, 2, 24, 16, generator=g)
    triton_attention(q, k, v, causal=True, block_q=16, block_k=16).backward(grad_out)
    ref = [t.detach().double().requires_grad_() for t in (q, k, v)]
    scores = (ref[0] @ ref[1].transpose(-2, -1) / math.sqrt(16)).masked_fill(
        ~torch.ones(24, 24, dtype=torch.bool).tril(), float("-inf"))
    ref_grads = torch.autograd.grad(torch.softmax(scores, -1) @ ref[2], ref, grad_out.double())
    backward_error = max((t.grad.double() - r).abs().max().item() for t, r in zip((q, k, v), ref_grads, strict=True))
    print(json.dumps({"cases": report, "backward_error": backward_error}))
    """
)


@pytest.fixture(scope="module")
def interpreter_report():
    env = dict(os.environ, TRITON_INTERPRET="1", OMP_NUM_THREADS="1")
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(INTERPRETER_CASES)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("index", range(len(INTERPRETER_CASES)), ids=[str(c) for c in INTERPRETER_CASES])
def test_interpreted_kernel_matches_sdpa(interpreter_report, index):
    case, result = INTERPRETER_CASES[index], interpreter_report["cases"][index]
    tolerance = 2e-3 if case[4] == "float16" else 1e-4
    assert result["max_error"] < tolerance
    assert result["unseen_rows_zero"] and not result["any_nan"]


def test_interpreted_backward_matches_autograd(interpreter_report):
    assert interpreter_report["backward_error"] < 1e-4


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        (dict(d=48), ValueError, r"head dims \(16, 32, 64, 128\)"),
        (dict(block_q=24), ValueError, "block_q must be a power of two >= 16"),
        (dict(block_k=8), ValueError, "block_k must be a power of two >= 16"),
        (dict(dtype=torch.float64), TypeError, "float16, bfloat16 or float32"),
    ],
)
def test_kernel_refuses_what_it_cannot_run(kwargs, error, words, monkeypatch):
    from inferlab.flash import triton_kernel

    monkeypatch.setattr(triton_kernel, "interpreter_on", lambda: True)  # reach the shape checks on a CPU
    d, dtype = kwargs.pop("d", 16), kwargs.pop("dtype", torch.float32)
    q = torch.zeros(1, 32, d, dtype=dtype)
    with pytest.raises(error, match=words):
        triton_kernel.attention_forward(q, q, q, **kwargs)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU refusal")
def test_cpu_tensors_without_the_interpreter_are_refused(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    from inferlab.flash import triton_attention

    q = torch.zeros(1, 32, 16)
    with pytest.raises(ValueError, match="needs CUDA tensors"):
        triton_attention(q, q, q)


# --8<-- [start:gpu_test]
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("n", [1, 100, 1024, 4096, 16384])
def test_gpu_kernel_matches_sdpa(n, d, causal, dtype):
    from inferlab.flash import triton_attention

    if dtype is torch.bfloat16 and not torch.cuda.is_bf16_supported():
        pytest.skip("this GPU has no bfloat16 support (needs compute capability 8.0+)")

    g = torch.Generator(device="cuda").manual_seed(n + d)
    q, k, v = (torch.randn(2, 4, n, d, device="cuda", dtype=dtype, generator=g) for _ in range(3))
    out = triton_attention(q, k, v, causal=causal)
    expected = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    torch.testing.assert_close(out.float(), expected, atol=2e-2, rtol=2e-2)


# --8<-- [end:gpu_test]


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
def test_gpu_backward_matches_sdpa(causal):
    from inferlab.flash import triton_attention

    g = torch.Generator(device="cuda").manual_seed(3)
    q, k, v = (torch.randn(1, 4, 2048, 64, device="cuda", generator=g).half().requires_grad_() for _ in range(3))
    grad_out = torch.randn(1, 4, 2048, 64, device="cuda", generator=g).half()
    ours = torch.autograd.grad(triton_attention(q, k, v, causal=causal), (q, k, v), grad_out)
    theirs = torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, is_causal=causal), (q, k, v), grad_out)
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a.float(), b.float(), atol=3e-2, rtol=3e-2)


NAN_SCRIPT = textwrap.dedent(
    """
    import json
    import torch
    import torch.nn.functional as F
    from inferlab.flash import triton_attention

    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, 2, 16, 16, generator=g) for _ in range(3))
    report = {}
    for name, causal, poisoned in [
        ("nan_q", False, "q"), ("inf_k", False, "k"), ("nan_v", False, "v"), ("nan_q_causal", True, "q"),
    ]:
        tensors = {"q": q.clone(), "k": k.clone(), "v": v.clone()}
        tensors[poisoned][0, 1, 5, 3] = float("inf") if poisoned == "k" else float("nan")
        out = triton_attention(tensors["q"], tensors["k"], tensors["v"], causal=causal, block_q=16, block_k=16)
        expected = F.scaled_dot_product_attention(tensors["q"], tensors["k"], tensors["v"], is_causal=causal)
        nan = expected.isnan()
        report[name] = {
            "same_nan_rows": bool(torch.equal(out.isnan(), nan)),
            "expected_nans": int(nan.sum()),
            "max_error_elsewhere": (out[~nan] - expected[~nan]).abs().max().item(),
        }
    print(json.dumps(report))
    """
)


def test_interpreted_kernel_propagates_nan_and_inf_like_sdpa():
    """Issue 18: a NaN in q (or an inf in k) used to come out as 0.0 because a NaN row sum failed the
    "row saw a key" test; the kernel must put NaN exactly where PyTorch's SDPA does."""
    env = dict(os.environ, TRITON_INTERPRET="1", OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", NAN_SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    for name, result in report.items():
        assert result["expected_nans"] > 0, name  # the case does poison something
        assert result["same_nan_rows"], f"{name}: NaN where SDPA has none, or a number where SDPA has NaN"
        assert result["max_error_elsewhere"] < 1e-4, name
