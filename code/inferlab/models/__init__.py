"""The bundled tiny model pair, loading any causal LM, and the logits-function protocol.

Every algorithm in ``inferlab`` takes a *logits function*: anything that maps a (batch, length)
LongTensor of token ids to (batch, length, vocab) logits. A Hugging Face causal LM is turned into
one by :func:`as_logits_fn`; a table model or an n-gram model simply *is* one. That is how the
CS181 table examples and a real transformer run through the same decoders.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import torch

BUNDLED_DIR = Path(__file__).resolve().parent / "bundled"
EOS_TOKEN = "<|endoftext|>"
MAX_POSITIONS = 2048


@runtime_checkable
class LogitsFn(Protocol):
    """Anything that maps (batch, length) token ids to (batch, length, vocab) logits."""

    def __call__(self, input_ids: torch.Tensor) -> torch.Tensor: ...


# --8<-- [start:configs]
def target_config(vocab_size: int):
    """Return the bundled target's architecture: Llama, 9 layers, width 384, grouped-query attention."""
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=384,
        intermediate_size=1024,
        num_hidden_layers=9,
        num_attention_heads=6,
        num_key_value_heads=2,
        max_position_embeddings=MAX_POSITIONS,
        rope_theta=10000.0,
        tie_word_embeddings=True,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    )


def draft_config(vocab_size: int):
    """Return the bundled draft's architecture: two Llama layers of width 128, sharing the vocabulary.

    Two layers, because copying a span seen earlier (what code does all the time) takes two
    attention layers working together (an induction head); width 128, because its decode step must
    stay within a tenth of the target's (c <= 0.1, measured on the model card).
    """
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=MAX_POSITIONS,
        rope_theta=10000.0,
        tie_word_embeddings=True,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    )


# --8<-- [end:configs]


def bundled_available() -> bool:
    """Return True when the trained pair ships in this installation."""
    return all((BUNDLED_DIR / name / "model.safetensors").is_file() for name in ("target", "draft"))


def _load_model(name_or_path: str | Path, device: str, dtype: torch.dtype):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(name_or_path), dtype=dtype)
    return model.to(device).eval()


def load_tokenizer(name_or_path: str | Path | None = None):
    """Return the bundled tokenizer, or the one of a Hugging Face id or local path."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(name_or_path or BUNDLED_DIR / "tokenizer"))


def vocab_size_of(model: Any) -> int:
    """Return the number of logits a model produces per position (a Hugging Face model or a LlamaDecoder)."""
    if hasattr(model, "get_output_embeddings"):
        return int(model.get_output_embeddings().weight.shape[0])
    return int(model.vocab_size)


def check_same_vocab(target: Any, draft: Any) -> None:
    """Raise ValueError when two models do not share a vocabulary (a draft must speak the target's tokens)."""
    target_vocab, draft_vocab = vocab_size_of(target), vocab_size_of(draft)
    if target_vocab != draft_vocab:
        raise ValueError(
            f"target and draft vocabularies differ: target has {target_vocab} logits, "
            f"draft has {draft_vocab}; speculative decoding needs one shared tokenizer"
        )


BACKENDS = ("transformers", "inferlab")


# --8<-- [start:load_pair]
def load_pair(
    target: str | Path | None = None,
    draft: str | Path | None = None,
    device: str = "cpu",
    dtype: torch.dtype = torch.float32,
    backend: str = "transformers",
):
    """Return (target, draft, tokenizer): the bundled pair by default, else Hugging Face ids or local paths.

    ``backend="transformers"`` gives two ``LlamaForCausalLM``s (any architecture transformers knows);
    ``backend="inferlab"`` gives two of inferlab's own ``LlamaDecoder``s with the same weights: the
    fast path for speculative decoding on a CPU (a preallocated KV cache, no per-call overhead).
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if (target is None) != (draft is None):
        raise ValueError(
            "give both target and draft (Hugging Face ids or local paths), or neither for the bundled pair"
        )
    if target is None:
        if not bundled_available():
            raise FileNotFoundError(
                f"the bundled pair is missing from {BUNDLED_DIR}; train it with `python -m inferlab.models.train`"
            )
        target, draft = BUNDLED_DIR / "target", BUNDLED_DIR / "draft"
        tokenizer = load_tokenizer()
    else:
        tokenizer = load_tokenizer(target)
        draft_tokenizer = load_tokenizer(draft)
        if len(tokenizer) != len(draft_tokenizer):
            raise ValueError(
                f"target and draft tokenizers differ: target has {len(tokenizer)} tokens, "
                f"draft has {len(draft_tokenizer)}; pick a pair from one model family"
            )
    if backend == "inferlab":
        from inferlab.kvcache import LlamaDecoder

        target_model, draft_model = (
            LlamaDecoder.from_pretrained(p, dtype=dtype, device=device) for p in (target, draft)
        )
    else:
        target_model, draft_model = _load_model(target, device, dtype), _load_model(draft, device, dtype)
    check_same_vocab(target_model, draft_model)
    return target_model, draft_model, tokenizer


# --8<-- [end:load_pair]


def as_logits_fn(model: Any) -> Callable[[torch.Tensor], torch.Tensor]:
    """Return a logits function for a Hugging Face model, or ``model`` itself if it already is one."""
    if hasattr(model, "get_output_embeddings") and hasattr(model, "config"):

        def logits_fn(input_ids: torch.Tensor) -> torch.Tensor:
            with torch.no_grad():
                return model(input_ids.to(model.device)).logits.float()

        logits_fn.vocab_size = vocab_size_of(model)  # type: ignore[attr-defined]
        return logits_fn
    if callable(model):
        return model
    raise TypeError(
        f"expected a Hugging Face causal LM or a callable mapping (batch, length) ids to "
        f"(batch, length, vocab) logits, got {type(model).__name__}"
    )


def greedy_generate(model: Any, input_ids: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
    """Return ``input_ids`` extended by ``max_new_tokens`` argmax tokens (no cache: the plain definition)."""
    if input_ids.dim() != 2 or input_ids.shape[1] < 1:
        raise ValueError(f"input_ids must be a (batch, length >= 1) tensor, got shape {tuple(input_ids.shape)}")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    logits_fn = as_logits_fn(model)
    ids = input_ids
    for _ in range(max_new_tokens):
        next_token = logits_fn(ids)[:, -1].argmax(-1, keepdim=True)
        ids = torch.cat([ids, next_token.to(ids.device)], dim=1)
    return ids
