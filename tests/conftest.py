"""Shared test set-up: markers, the --gpu / --browser switches, and model fixtures."""

from __future__ import annotations

import locale
import os
import re
import sys

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing may download at test time
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

if os.environ.get("INFERLAB_PRELOAD_MODELS"):
    # Set by tools/mutate.py: mutmut imports this file once in its fork server and then forks one
    # process per mutant, so what is imported here is not imported again for each of thousands of
    # mutants (transformers' Llama classes take about 3 s to import; most tests build a tiny one).
    import transformers.models.llama.modeling_llama  # noqa: F401

    import inferlab.models  # noqa: F401


def pytest_addoption(parser):
    parser.addoption("--gpu", action="store_true", help="fail, rather than skip, gpu tests when CUDA is missing")
    parser.addoption(
        "--browser", action="store_true", help="fail, rather than skip, browser tests when Chromium is missing"
    )


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if gpu_items and not torch.cuda.is_available():
        if config.getoption("--gpu"):
            raise pytest.UsageError("--gpu was given but torch.cuda.is_available() is False: no CUDA GPU here")
        skip = pytest.mark.skip(reason="needs a CUDA GPU (none found); `nox -s test -- --gpu` makes this an error")
        for item in gpu_items:
            item.add_marker(skip)


def tiny_llama(
    vocab_size: int = 97, hidden: int = 32, layers: int = 2, heads: int = 4, kv_heads: int = 2, seed: int = 0
):
    """Return a small randomly initialised LlamaForCausalLM (fast; for logic tests)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=256,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config).eval()
    # Random init gives near-uniform logits; scaling the head makes distributions peaked like a trained model's.
    with torch.no_grad():
        model.lm_head.weight.mul_(20.0)
    return model


@pytest.fixture(scope="session")
def tiny_pair():
    """A random (target, draft) pair sharing a 97-token vocabulary."""
    return tiny_llama(layers=2, seed=0), tiny_llama(hidden=16, layers=1, heads=2, kv_heads=1, seed=1)


@pytest.fixture(scope="session")
def bundled_pair():
    """The trained (target, draft, tokenizer) that ships in the package."""
    from inferlab.models import load_pair

    return load_pair()


@pytest.fixture
def ascii_locale():
    """Switch the locale's encoding to ASCII: files must still be UTF-8, whatever the machine's locale."""
    if sys.flags.utf8_mode:
        pytest.skip("Python's UTF-8 mode ignores the locale's encoding")
    saved = locale.setlocale(locale.LC_CTYPE)
    try:
        locale.setlocale(locale.LC_CTYPE, "C")
        if locale.getpreferredencoding(False).lower().replace("-", "") == "utf8":
            pytest.skip("the C locale here is UTF-8")
        yield
    finally:
        locale.setlocale(locale.LC_CTYPE, saved)


@pytest.fixture
def one_thread():
    """Tiny tensors in Python loops: thread start-up costs more than the work (the test box has 2 cores)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def exactly(message: str) -> str:
    """A pattern for pytest.raises(match=...) that accepts this whole message and nothing else."""
    return f"^{re.escape(message)}$"
