"""The bundled pair: offline loading, greedy generation vs Hugging Face, quality bounds, tokenizer."""

from __future__ import annotations

import functools
import json
import math
from collections import Counter
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import tiny_llama
from inferlab.models import (
    BUNDLED_DIR,
    as_logits_fn,
    check_same_vocab,
    greedy_generate,
    load_pair,
    load_tokenizer,
)
from inferlab.models.evaluate import heldout_tokens, perplexity, windows
from inferlab.models.train import read_split


def test_bundled_pair_loads_offline_and_shares_a_vocabulary(bundled_pair):
    target, draft, tokenizer = bundled_pair
    assert target.config.model_type == draft.config.model_type == "llama"
    assert target.config.vocab_size == draft.config.vocab_size == len(tokenizer) <= 8192
    target_params = sum(p.numel() for p in target.parameters())
    assert 8e6 <= target_params <= 20e6
    assert sum(p.numel() for p in draft.parameters()) < target_params / 10


def test_weights_ship_in_fp16_within_budget():
    files = list(BUNDLED_DIR.rglob("*.safetensors"))
    assert len(files) == 2
    assert sum(f.stat().st_size for f in files) <= 40 * 2**20


@pytest.mark.parametrize("which", [0, 1], ids=["target", "draft"])
def test_our_greedy_equals_hf_generate(bundled_pair, which):
    model, tokenizer = bundled_pair[which], bundled_pair[2]
    ids = tokenizer(
        ["import os\n\ndef walk(path):", "class Stack:\n    def push(self, x):"], return_tensors="pt", padding=True
    ).input_ids[:1]
    ours = greedy_generate(model, ids, max_new_tokens=24)
    reference = model.generate(ids, max_new_tokens=24, do_sample=False, min_new_tokens=24)
    assert torch.equal(ours, reference)


def unigram_perplexity(train_tokens: torch.Tensor, heldout: torch.Tensor, vocab: int) -> float:
    """Exact perplexity of a unigram model (add-one smoothed counts): the baseline to beat."""
    counts = Counter(train_tokens.tolist())
    total = len(train_tokens) + vocab
    nll = -sum(math.log((counts[t] + 1) / total) for t in heldout.tolist()) / len(heldout)
    return math.exp(nll)


@pytest.mark.slow
def test_heldout_perplexity_beats_baselines_and_recorded_bound(bundled_pair):
    target, draft, tokenizer = bundled_pair
    tokens = heldout_tokens(tokenizer)
    batch = windows(tokens, 257, 48)  # the card's own windows, so its recorded value is the bound
    target_ppl, draft_ppl = perplexity(target, batch), perplexity(draft, batch)
    manifest = json.loads((BUNDLED_DIR / "corpus_manifest.json").read_text())
    train_text = "".join(read_split(manifest, "train")[:60])
    train_tokens = torch.tensor(tokenizer(train_text, add_special_tokens=False)["input_ids"])
    baseline = unigram_perplexity(train_tokens, batch[:, 1:].flatten(), len(tokenizer))
    assert target_ppl < draft_ppl < baseline
    card = json.loads((Path(__file__).parent.parent / "docs" / "results" / "models_card.json").read_text())
    # Same windows as the card: only float rounding may differ; corrupted or swapped weights would not.
    assert target_ppl < 1.01 * card["values"]["target_perplexity"]


@functools.cache
def bundled_tokenizer():
    return load_tokenizer()  # once for all the examples below: loading it is most of their time


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_tokenizer_round_trips_any_unicode(text):
    tokenizer = bundled_tokenizer()
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids) == text


def test_tokenizer_round_trips_chinese_and_code():
    tokenizer = load_tokenizer()
    for text in ["推測解碼讓生成變快。", "def f(x):\n\treturn x ** 2  # 平方\n", "emoji 🚀 and NUL \x00 bytes"]:
        assert tokenizer.decode(tokenizer(text, add_special_tokens=False)["input_ids"]) == text


def test_local_paths_load_like_hub_ids():
    target, draft, tokenizer = load_pair(BUNDLED_DIR / "target", BUNDLED_DIR / "draft")
    assert tokenizer("x")["input_ids"] == load_tokenizer()("x")["input_ids"]
    assert target.config.num_hidden_layers > draft.config.num_hidden_layers


def test_mismatched_vocabularies_are_refused():
    with pytest.raises(ValueError, match="97.*50|vocabularies differ"):
        check_same_vocab(tiny_llama(vocab_size=97), tiny_llama(vocab_size=50))


def test_half_a_pair_is_refused():
    with pytest.raises(ValueError, match="both target and draft"):
        load_pair(target=BUNDLED_DIR / "target")


def test_logits_protocol_accepts_callables_and_models():
    table = torch.log_softmax(torch.randn(5), -1)

    def unigram(ids):
        return table.expand(ids.shape[0], ids.shape[1], 5)

    assert as_logits_fn(unigram) is unigram
    ids = torch.tensor([[1, 2]])
    assert torch.equal(greedy_generate(unigram, ids, 3)[0, 2:], torch.full((3,), int(table.argmax())))
    with pytest.raises(TypeError, match="logits"):
        as_logits_fn(42)


def test_bad_generation_arguments_are_refused():
    model = tiny_llama()
    with pytest.raises(ValueError, match="max_new_tokens"):
        greedy_generate(model, torch.tensor([[1]]), -1)
    with pytest.raises(ValueError, match="input_ids"):
        greedy_generate(model, torch.tensor([1, 2]), 1)


def test_quick_generate_equals_hf_generate_without_importing_transformers(bundled_pair):
    import subprocess
    import sys

    target, _, tokenizer = bundled_pair
    prompt = "def read_lines(path):\n"
    ids = tokenizer(prompt, return_tensors="pt").input_ids
    reference = tokenizer.decode(target.generate(ids, max_new_tokens=12, do_sample=False, min_new_tokens=12)[0])
    # A fresh process: the quick path must neither need nor load transformers.
    code = (
        "import sys; from inferlab.models.quick import quick_generate; "
        f"text = quick_generate({prompt!r}, 12); assert 'transformers' not in sys.modules, 'transformers was imported'; "
        "sys.stdout.write(text)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout == reference


def test_quick_cli_refuses_negative_token_counts():
    from inferlab.models.quick import main

    with pytest.raises(SystemExit):
        main(["x", "--max-new-tokens", "-1"])
