"""How big is the KV cache? A calculator for any Hugging Face config: change the numbers and rerun.

Needs only torch (and transformers if you load a real config). The functions are generated from
inferlab/kvcache/size.py.
"""

from collections.abc import Mapping
from typing import Any

import torch

# >>> generated from inferlab/kvcache/size.py:calculator (python -m inferlab.snippetsync)
# Config values only, from each model's config.json on the Hugging Face hub.
PRESETS: dict[str, dict[str, Any]] = {
    "Llama-3.2-3B": {
        "source": "https://huggingface.co/meta-llama/Llama-3.2-3B/blob/main/config.json",
        "num_hidden_layers": 28,
        "num_attention_heads": 24,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "hidden_size": 3072,
        "max_position_embeddings": 131072,
    },
    "Gemma-3-1B": {
        # Gemma 3 also gives 5 of every 6 layers a sliding window (Gemma Team, 2025, Gemma 3 Technical Report, Sec. 2),
        # which caps their cache; the formula below is the full-attention upper bound.
        "source": "https://huggingface.co/google/gemma-3-1b-it/blob/main/config.json",
        "num_hidden_layers": 26,
        "num_attention_heads": 4,
        "num_key_value_heads": 1,
        "head_dim": 256,
        "hidden_size": 1152,
        "max_position_embeddings": 32768,
    },
    "Qwen2.5-1.5B": {
        "source": "https://huggingface.co/Qwen/Qwen2.5-1.5B/blob/main/config.json",
        "num_hidden_layers": 28,
        "num_attention_heads": 12,
        "num_key_value_heads": 2,
        "head_dim": 128,
        "hidden_size": 1536,
        "max_position_embeddings": 131072,
    },
}

BYTES_PER_ELEMENT = {
    "float32": 4,
    "fp32": 4,
    "float16": 2,
    "fp16": 2,
    "half": 2,
    "bfloat16": 2,
    "bf16": 2,
    "float8": 1,
    "fp8": 1,
    "int8": 1,
}


def bytes_per_element(dtype: torch.dtype | str) -> int:
    """Return the bytes one cached number takes in ``dtype`` (a torch dtype or a name like 'bf16')."""
    if isinstance(dtype, torch.dtype):
        return torch.empty((), dtype=dtype).element_size()
    if isinstance(dtype, str) and dtype.lower().removeprefix("torch.") in BYTES_PER_ELEMENT:
        return BYTES_PER_ELEMENT[dtype.lower().removeprefix("torch.")]
    raise ValueError(f"dtype must be a torch.dtype or one of {sorted(BYTES_PER_ELEMENT)}, got {dtype!r}")


def _get(config: Any, *names: str) -> Any:
    for name in names:
        value = config.get(name) if isinstance(config, Mapping) else getattr(config, name, None)
        if value is not None:
            return value
    return None


def cache_shape(config: Any) -> dict[str, int]:
    """Return layers, kv_heads and head_dim of a Hugging Face config, a dict, a preset name or a decoder."""
    if isinstance(config, str):
        if config not in PRESETS:
            raise ValueError(
                f"config must be a config object, a dict or a preset name in {sorted(PRESETS)}, got {config!r}"
            )
        config = PRESETS[config]
    config = getattr(config, "config", config)  # a LlamaDecoder or a Hugging Face model
    config = getattr(config, "text_config", None) or config  # multimodal configs nest the language model
    layers = _get(config, "num_hidden_layers", "num_layers")
    heads = _get(config, "num_attention_heads", "num_heads")
    kv_heads = _get(config, "num_key_value_heads", "num_kv_heads")
    kv_heads = heads if kv_heads is None else kv_heads  # no GQA field: plain MHA (but 0 is an error, not "absent")
    head_dim, hidden_size = _get(config, "head_dim"), _get(config, "hidden_size")
    if head_dim is None and _is_count(hidden_size) and _is_count(heads):
        if hidden_size % heads:
            raise ValueError(
                f"config hidden_size ({hidden_size}) must be a multiple of num_attention_heads ({heads}) "
                "when it gives no head_dim"
            )
        head_dim = hidden_size // heads
    if not all(_is_count(v) for v in (layers, kv_heads, head_dim)):
        raise ValueError(
            "config must give num_hidden_layers, num_key_value_heads (or num_attention_heads) and "
            f"head_dim (or hidden_size), integers >= 1, got layers={layers!r}, kv_heads={kv_heads!r}, "
            f"head_dim={head_dim!r}"
        )
    if _is_count(heads) and heads % kv_heads:
        raise ValueError(
            f"config num_attention_heads ({heads}) must be a multiple of num_key_value_heads ({kv_heads}): "
            "each key/value head serves an equal group of query heads"
        )
    return {"layers": layers, "kv_heads": kv_heads, "head_dim": head_dim}


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _check_count(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def kv_cache_bytes(config: Any, tokens: int, batch: int = 1, dtype: torch.dtype | str = torch.float16) -> int:
    """Return the bytes of keys and values cached for ``batch`` sequences of ``tokens`` tokens."""
    _check_count("tokens", tokens, 0)
    _check_count("batch", batch, 0)
    size = bytes_per_element(dtype)
    shape = cache_shape(config)
    # 2: one key and one value vector, per layer, per key/value head, per token, per sequence.
    return 2 * shape["layers"] * shape["kv_heads"] * shape["head_dim"] * tokens * batch * size




def kv_bytes_per_token(config: Any, dtype: torch.dtype | str = torch.float16) -> int:
    """Return the cache bytes one more token adds to one sequence."""
    return kv_cache_bytes(config, tokens=1, batch=1, dtype=dtype)


def max_batch_size(config: Any, tokens: int, free_bytes: int, dtype: torch.dtype | str = torch.float16) -> int:
    """Return how many sequences of ``tokens`` tokens fit their KV cache into ``free_bytes`` of memory."""
    _check_count("tokens", tokens, 1)
    _check_count("free_bytes", free_bytes, 0)
    return free_bytes // kv_cache_bytes(config, tokens, batch=1, dtype=dtype)




def attention_variants(config: Any) -> dict[str, int]:
    """Return the kv_heads of the same model as MHA (one per query head), its own GQA, and MQA (one)."""
    shape = cache_shape(config)
    source = PRESETS.get(config, config) if isinstance(config, str) else getattr(config, "config", config)
    heads = _get(getattr(source, "text_config", None) or source, "num_attention_heads", "num_heads")
    if not _is_count(heads):
        raise ValueError(f"config must give num_attention_heads, an integer >= 1, got {heads!r}")
    return {"MHA": heads, "GQA": shape["kv_heads"], "MQA": 1}


# <<< generated

# --8<-- [start:demo]
GIB = 2**30
TOKENS, FREE_GIB = 8192, 16  # one long conversation; the memory left after loading the weights

for name in PRESETS:
    per_token = kv_cache_bytes(name, tokens=1, dtype="bf16")
    whole = kv_cache_bytes(name, tokens=TOKENS, dtype="bf16")
    fits = max_batch_size(name, TOKENS, FREE_GIB * GIB, dtype="bf16")
    print(f"{name:>13}: {per_token / 1024:6.1f} KiB per token, {whole / GIB:5.2f} GiB for {TOKENS} tokens, "
          f"{fits} such sequences fit in {FREE_GIB} GiB")

# The same model with one key/value head per query head (MHA), its own grouping (GQA), or one (MQA).
for kind, kv_heads in attention_variants("Llama-3.2-3B").items():
    config = dict(PRESETS["Llama-3.2-3B"], num_key_value_heads=kv_heads)
    print(f"Llama-3.2-3B as {kind} ({kv_heads:2d} kv heads): {kv_cache_bytes(config, 1, dtype='bf16') / 1024:6.1f} KiB per token")
# --8<-- [end:demo]

# Any Hugging Face config works too (only the config is read; no weights are downloaded):
#   from transformers import AutoConfig
#   print(kv_cache_bytes(AutoConfig.from_pretrained("Qwen/Qwen2.5-1.5B"), tokens=4096, batch=8))
