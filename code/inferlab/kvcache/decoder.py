"""A Llama decoder written out by hand, to be read top to bottom.

This is the architecture of Llama (Touvron et al., 2023) and of the bundled target model:

    ids -> embedding -> [ RMSNorm -> attention (rotary q, k) -> + residual
                          RMSNorm -> gated MLP (SiLU)        -> + residual ] x layers
        -> RMSNorm -> output projection -> logits

It loads the weights of any Hugging Face ``LlamaForCausalLM`` (the bundled target, TinyLlama,
SmolLM, ...) and reproduces its logits. Each layer is split into two public halves so that another
engine can run attention its own way (a preallocated cache here, a paged cache in
``inferlab.paged``):

    q, k, v = layer.qkv(h, positions)      # projections with rotary applied; k, v have kv heads
    out = <any attention over the keys/values you keep>
    h = layer.finish(h, out)               # output projection, residual, MLP, residual

Every layer counts the key projections ``W_K h_t`` it computes (``keys_computed``), which is the
quantity the KV-cache guide is about.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

SUPPORTED_MODEL_TYPES = ("llama",)
REQUIRED_HF_FIELDS = (
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "max_position_embeddings",
    "rms_norm_eps",
)


# --8<-- [start:config]
@dataclass(frozen=True)
class DecoderConfig:
    """The handful of numbers that define a Llama decoder."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int  # query heads
    num_kv_heads: int  # key/value heads: = num_heads is MHA, 1 is MQA, in between is GQA
    head_dim: int
    max_positions: int
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6
    tie_embeddings: bool = False
    attention_bias: bool = False
    mlp_bias: bool = False
    # --8<-- [end:config]

    def __post_init__(self) -> None:
        for name in (
            "vocab_size",
            "hidden_size",
            "intermediate_size",
            "num_layers",
            "num_heads",
            "num_kv_heads",
            "head_dim",
            "max_positions",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        for name in ("rope_theta", "rms_norm_eps"):  # 0 or a negative value gives NaN, not an error
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
        for name in ("tie_embeddings", "attention_bias", "mlp_bias"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if self.num_heads % self.num_kv_heads != 0:
            raise ValueError(
                f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads ({self.num_kv_heads}): "
                "each key/value head serves an equal group of query heads"
            )
        if self.head_dim % 2 != 0:
            raise ValueError(f"head_dim must be even for rotary embeddings, got {self.head_dim}")

    @classmethod
    def from_hf(cls, config: Any, source: str = "config") -> DecoderConfig:
        """Return the DecoderConfig of a Hugging Face LlamaConfig (or raise for what we do not implement).

        ``source`` names where the config came from (a config.json path) in error messages.
        """
        missing = [name for name in REQUIRED_HF_FIELDS if getattr(config, name, None) is None]
        if missing:
            raise ValueError(
                f"{source} must give {', '.join(missing)} (a Llama config.json's fields), they are missing"
            )
        model_type = getattr(config, "model_type", None)
        if model_type not in SUPPORTED_MODEL_TYPES:
            raise ValueError(f"{source} model_type must be one of {SUPPORTED_MODEL_TYPES}, got {model_type!r}")
        if getattr(config, "hidden_act", "silu") != "silu":
            raise ValueError(f"config.hidden_act must be 'silu' (Llama's MLP), got {config.hidden_act!r}")
        rope = dict(getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {})
        rope_type = rope.get("rope_type", rope.get("type", "default"))
        if rope_type != "default":
            raise ValueError(
                f"rope_type must be 'default' (plain rotary embeddings), got {rope_type!r}; "
                "scaled rotary variants are not implemented in this readable decoder"
            )
        rope_theta = rope.get("rope_theta", getattr(config, "rope_theta", 10000.0))
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        return cls(
            vocab_size=config.vocab_size,
            hidden_size=config.hidden_size,
            intermediate_size=config.intermediate_size,
            num_layers=config.num_hidden_layers,
            num_heads=config.num_attention_heads,
            num_kv_heads=getattr(config, "num_key_value_heads", None) or config.num_attention_heads,
            head_dim=head_dim,
            max_positions=config.max_position_embeddings,
            rope_theta=float(rope_theta),
            rms_norm_eps=float(config.rms_norm_eps),
            tie_embeddings=bool(getattr(config, "tie_word_embeddings", False)),
            attention_bias=bool(getattr(config, "attention_bias", False)),
            mlp_bias=bool(getattr(config, "mlp_bias", False)),
        )


# --8<-- [start:rmsnorm]
class RMSNorm(nn.Module):
    """Scale each vector to unit root-mean-square, then by a learned gain (Zhang & Sennrich, 2019)."""

    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Normalise in fp32 even for fp16/bf16 weights: a mean of squares overflows easily in fp16.
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(x.dtype)


# --8<-- [end:rmsnorm]


# --8<-- [start:rotary]
class Rotary(nn.Module):
    """Rotary position embeddings (Su et al., 2021): rotate pairs of q/k features by position x frequency."""

    def __init__(self, head_dim: int, theta: float) -> None:
        super().__init__()
        # One frequency per feature pair, from 1 down to 1/theta: low pairs turn fast, high pairs slowly.
        inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

        self._last = None  # (positions, dtype, cos, sin) of the previous call

    def cos_sin(self, positions: torch.Tensor, dtype: torch.dtype):
        """Return cos and sin of the rotation angles of ``positions`` (T,) or (batch, T)."""
        # Every layer (and q and k) rotates by the same positions in one step: compute them once.
        if self._last is not None and self._last[0] is positions and self._last[1] == dtype:
            return self._last[2], self._last[3]
        angles = positions.to(self.inv_freq.device).float()[..., None] * self.inv_freq  # (..., T, head_dim/2)
        angles = torch.cat([angles, angles], dim=-1)  # Llama pairs feature i with feature i + head_dim/2
        if angles.dim() == 3:  # per-sequence positions: add the heads axis
            angles = angles[:, None]
        cos, sin = angles.cos().to(dtype), angles.sin().to(dtype)
        self._last = (positions, dtype, cos, sin)
        return cos, sin

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Return x (batch, heads, T, head_dim) rotated by the angles of ``positions`` (T,) or (batch, T)."""
        cos, sin = self.cos_sin(positions, x.dtype)
        first, second = x.chunk(2, dim=-1)
        rotated_half = torch.cat([-second, first], dim=-1)
        return x * cos + rotated_half * sin


# --8<-- [end:rotary]


def check_cached_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q_start: int, causal: bool) -> None:
    """Raise unless q (batch, heads, Tq, d) and k, v (batch, kv_heads, Tk, d) fit together and kv_heads divides heads."""
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        if not isinstance(tensor, torch.Tensor) or tensor.dim() != 4:
            raise TypeError(f"{name} must be a 4-dim tensor (batch, heads, T, head_dim), got {type(tensor).__name__}")
    if k.shape != v.shape or q.shape[0] != k.shape[0] or q.shape[3] != k.shape[3] or q.shape[1] % k.shape[1]:
        raise ValueError(
            f"q, k and v must share batch and head_dim, k and v one shape, and kv_heads must divide heads; "
            f"got q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    if isinstance(q_start, bool) or not isinstance(q_start, int) or q_start < 0:
        raise ValueError(f"q_start must be an integer >= 0, got {q_start!r}")
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be True or False, got {causal!r}")


# --8<-- [start:attention]
def causal_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q_start: int = 0, causal: bool = True
) -> torch.Tensor:
    """Return softmax(q k^T / sqrt(d)) v, where query i (at position q_start + i) sees keys 0..q_start + i.

    q is (batch, heads, Tq, head_dim); k and v are (batch, kv_heads, Tk, head_dim) and hold the keys
    and values of positions 0..Tk-1. ``causal=False`` lets every query see every key (bidirectional,
    as in BERT): the experiment that shows why only causal attention can be cached.
    """
    check_cached_attention(q, k, v, q_start, causal)
    batch, heads, q_len, head_dim = q.shape
    kv_heads, k_len = k.shape[1], k.shape[2]
    # Grouped-query attention: query heads g*group .. g*group + group-1 share key/value head g.
    # Viewing the query heads as (kv_heads, group) lets one k/v head broadcast over its group
    # without copying the cache.
    group = heads // kv_heads
    q = q.reshape(batch, kv_heads, group, q_len, head_dim)
    k, v = k.unsqueeze(2), v.unsqueeze(2)  # (batch, kv_heads, 1, Tk, head_dim)
    scores = (q @ k.transpose(-1, -2)) * head_dim**-0.5  # (batch, kv_heads, group, Tq, Tk)
    if causal and not (q_len == 1 and q_start == k_len - 1):  # a last query sees every key anyway
        query_pos = torch.arange(q_start, q_start + q_len, device=q.device)[:, None]
        key_pos = torch.arange(k_len, device=q.device)[None, :]
        scores = scores.masked_fill(key_pos > query_pos, float("-inf"))  # the future gets weight 0
    weights = torch.softmax(scores.float(), dim=-1).to(v.dtype)  # softmax in fp32, as Llama does
    return (weights @ v).reshape(batch, heads, q_len, head_dim)


# --8<-- [end:attention]


def fused_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    q_start: int = 0,
    allowed: torch.Tensor | None = None,
    causal: bool = True,
) -> torch.Tensor:
    """Return what causal_attention returns (or attention under an explicit mask), via PyTorch's fused SDPA.

    ``allowed`` is an optional (Tq, Tk) boolean mask, True where a query may read a key (a token
    tree's mask); without it query i sees keys 0..q_start + i (every key if ``causal=False``). The
    arithmetic is the same as in :func:`causal_attention`, but one fused kernel replaces five
    separate tensor operations and never stores the (Tq, Tk) score matrix, which is what a long
    prefill or a many-token verification step spends its time on.
    """
    check_cached_attention(q, k, v, q_start, causal)
    q_len, k_len = q.shape[2], k.shape[2]
    grouped = q.shape[1] != k.shape[1]
    # Only a lone query at the last key may skip the mask: it reads every key. Any other query must not.
    if allowed is None and causal and not (q_len == 1 and q_start == k_len - 1):
        if q_start == 0 and q_len == k_len:  # a whole prompt: the kernel's own causal mask, no mask tensor
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=grouped)
        query_pos = torch.arange(q_start, q_start + q_len, device=q.device)[:, None]
        allowed = torch.arange(k_len, device=q.device)[None, :] <= query_pos
    return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, enable_gqa=grouped)


# --8<-- [start:layer]
class DecoderLayer(nn.Module):
    """One Llama block, split into qkv() and finish() so that any engine can do attention in between."""

    def __init__(self, config: DecoderConfig, rotary: Rotary) -> None:
        super().__init__()
        c = config
        self.num_heads, self.num_kv_heads, self.head_dim = c.num_heads, c.num_kv_heads, c.head_dim
        self.attn_norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.q_proj = nn.Linear(c.hidden_size, c.num_heads * c.head_dim, bias=c.attention_bias)
        self.k_proj = nn.Linear(c.hidden_size, c.num_kv_heads * c.head_dim, bias=c.attention_bias)
        self.v_proj = nn.Linear(c.hidden_size, c.num_kv_heads * c.head_dim, bias=c.attention_bias)
        self.o_proj = nn.Linear(c.num_heads * c.head_dim, c.hidden_size, bias=c.attention_bias)
        self.mlp_norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.gate_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=c.mlp_bias)
        self.up_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=c.mlp_bias)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=c.mlp_bias)
        self.rotary = rotary  # shared by all layers
        self.keys_computed = 0  # how many key vectors W_K h_t this layer has produced

    def split_heads(self, x: torch.Tensor, heads: int) -> torch.Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, heads, self.head_dim).transpose(1, 2)  # (batch, heads, T, head_dim)

    def qkv(self, h: torch.Tensor, positions: torch.Tensor):
        """Return (q, k, v) for hidden states h (batch, T, hidden): q has num_heads, k and v num_kv_heads."""
        x = self.attn_norm(h)
        q = self.rotary(self.split_heads(self.q_proj(x), self.num_heads), positions)
        k = self.rotary(self.split_heads(self.k_proj(x), self.num_kv_heads), positions)
        v = self.split_heads(self.v_proj(x), self.num_kv_heads)
        self.keys_computed += h.shape[0] * h.shape[1]
        return q, k, v

    def finish(self, h: torch.Tensor, attn_out: torch.Tensor) -> torch.Tensor:
        """Return the layer's output: h + o_proj(attention), then + MLP of that (both pre-normed)."""
        batch, _, length, _ = attn_out.shape
        merged = attn_out.transpose(1, 2).reshape(batch, length, self.num_heads * self.head_dim)
        h = h + self.o_proj(merged)
        x = self.mlp_norm(h)
        return h + self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    def forward(self, h: torch.Tensor, positions: torch.Tensor, causal: bool = True) -> torch.Tensor:
        q, k, v = self.qkv(h, positions)
        return self.finish(h, causal_attention(q, k, v, causal=causal))


# --8<-- [end:layer]


class LlamaDecoder(nn.Module):
    """A readable Llama decoder; call it on (batch, T) ids to get (batch, T, vocab) logits."""

    def __init__(self, config: DecoderConfig) -> None:
        if not isinstance(config, DecoderConfig):
            raise TypeError(
                f"config must be a DecoderConfig (DecoderConfig.from_hf turns a Hugging Face config into one), "
                f"got {type(config).__name__}"
            )
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.hidden_size)
        self.rotary = Rotary(config.head_dim, config.rope_theta)
        self.layers = nn.ModuleList(DecoderLayer(config, self.rotary) for _ in range(config.num_layers))
        self.final_norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.lm_head.weight = self.embed.weight  # one matrix reads tokens in and writes logits out

    # Config values another engine needs, as plain attributes.
    @property
    def num_layers(self) -> int:
        return self.config.num_layers

    @property
    def num_heads(self) -> int:
        return self.config.num_heads

    @property
    def num_kv_heads(self) -> int:
        return self.config.num_kv_heads

    @property
    def head_dim(self) -> int:
        return self.config.head_dim

    @property
    def vocab_size(self) -> int:
        return self.config.vocab_size

    @property
    def max_positions(self) -> int:
        return self.config.max_positions

    @property
    def device(self) -> torch.device:
        return self.embed.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.embed.weight.dtype

    @property
    def keys_computed(self) -> int:
        """Return the number of key projections W_K h_t computed so far, summed over layers."""
        return sum(layer.keys_computed for layer in self.layers)

    def reset_counts(self) -> None:
        """Set every layer's key counter back to zero."""
        for layer in self.layers:
            layer.keys_computed = 0

    def check_ids(self, ids: torch.Tensor, first_position: int = 0, name: str = "ids") -> None:
        """Raise a ValueError/TypeError unless ids is a (batch, T >= 1) integer tensor that fits the positions."""
        if not isinstance(ids, torch.Tensor) or ids.dtype not in (torch.int64, torch.int32):
            raise TypeError(
                f"{name} must be an integer torch.Tensor of shape (batch, T), got {type(ids).__name__}"
                + (f" of {ids.dtype}" if isinstance(ids, torch.Tensor) else "")
            )
        if ids.dim() != 2 or ids.shape[0] < 1 or ids.shape[1] < 1:
            raise ValueError(f"{name} must have shape (batch >= 1, T >= 1), got {tuple(ids.shape)}")
        if ids.min() < 0 or ids.max() >= self.vocab_size:  # the embedding would fail with a bare IndexError
            bad = ids[(ids < 0) | (ids >= self.vocab_size)][0].item()
            raise ValueError(f"{name} must be token ids in 0..{self.vocab_size - 1} (the vocabulary), got {bad}")
        if isinstance(first_position, bool) or not isinstance(first_position, int) or first_position < 0:
            raise ValueError(f"first_position must be an integer >= 0, got {first_position!r}")
        if first_position + ids.shape[1] > self.max_positions:
            raise ValueError(
                f"positions {first_position}..{first_position + ids.shape[1] - 1} exceed the model's "
                f"maximum of {self.max_positions} positions (0..{self.max_positions - 1})"
            )

    # --8<-- [start:forward]
    def embed_ids(self, ids: torch.Tensor) -> torch.Tensor:
        """Return the token embeddings (batch, T, hidden) of ids (batch, T)."""
        return self.embed(ids)

    def final_logits(self, h: torch.Tensor) -> torch.Tensor:
        """Return logits (batch, T, vocab) from the last layer's hidden states."""
        return self.lm_head(self.final_norm(h))

    def forward(self, ids: torch.Tensor, causal: bool = True) -> torch.Tensor:
        """Return logits (batch, T, vocab) for ids (batch, T), recomputing every position (no cache)."""
        self.check_ids(ids)
        positions = torch.arange(ids.shape[1], device=ids.device)
        h = self.embed_ids(ids)
        for layer in self.layers:
            h = layer(h, positions, causal=causal)
        return self.final_logits(h)

    # --8<-- [end:forward]

    embed_tokens = embed_ids  # alias: the name Hugging Face uses

    # --8<-- [start:layer_keys]
    def layer_keys(self, ids: torch.Tensor, causal: bool = True) -> list[torch.Tensor]:
        """Return every layer's keys (batch, kv_heads, T, head_dim) for ids, with or without the causal mask."""
        self.check_ids(ids)
        positions = torch.arange(ids.shape[1], device=ids.device)
        h, keys = self.embed_ids(ids), []
        for layer in self.layers:
            q, k, v = layer.qkv(h, positions)
            keys.append(k)
            h = layer.finish(h, causal_attention(q, k, v, causal=causal))
        return keys

    # --8<-- [end:layer_keys]

    @classmethod
    def from_pretrained(
        cls, path_or_model: Any, dtype: torch.dtype | None = None, device: str | torch.device | None = None
    ) -> LlamaDecoder:
        """Return a LlamaDecoder holding the weights of a local path, hub id or loaded LlamaForCausalLM."""
        if isinstance(path_or_model, (str, Path)) and str(path_or_model).startswith("~"):
            path_or_model = Path(os.path.expanduser(path_or_model))  # "~/ckpt" lives in the home folder
        hf_model = path_or_model
        if isinstance(path_or_model, (str, Path)) and _is_safetensors_folder(Path(path_or_model)):
            return cls.from_safetensors_folder(Path(path_or_model), dtype, device)
        if isinstance(path_or_model, (str, Path)) and _looks_local(path_or_model) and not Path(path_or_model).exists():
            # Otherwise the hub would answer "Repo id must be in the form 'repo_name'...", which misleads.
            raise FileNotFoundError(f"path_or_model {str(path_or_model)!r} is not a folder on this machine")
        if isinstance(path_or_model, (str, Path)):
            from transformers import AutoModelForCausalLM

            hf_model = AutoModelForCausalLM.from_pretrained(str(path_or_model), dtype=dtype or torch.float32)
        if not (hasattr(hf_model, "config") and hasattr(hf_model, "state_dict")):
            raise TypeError(
                "path_or_model must be a local path, a Hugging Face id or a loaded LlamaForCausalLM, "
                f"got {type(path_or_model).__name__}"
            )
        config = DecoderConfig.from_hf(hf_model.config)
        decoder = cls(config)
        _load_weights(decoder, hf_model.state_dict(), config, f"{type(hf_model).__name__}'s weights")
        source = next(hf_model.parameters())
        decoder = decoder.to(device=device or source.device, dtype=dtype or source.dtype)
        return decoder.eval()

    @classmethod
    def from_safetensors_folder(
        cls, folder: str | Path, dtype: torch.dtype | None = None, device: str | torch.device | None = None
    ) -> LlamaDecoder:
        """Return a LlamaDecoder read straight from a checkpoint folder (config.json + model.safetensors).

        No transformers import: reading two files is all a local checkpoint needs, and importing
        transformers takes longer than loading and running the whole bundled model.
        """
        from types import SimpleNamespace

        from safetensors.torch import load_file

        folder = Path(folder)
        config_file, weights_file = folder / "config.json", folder / "model.safetensors"
        for path in (config_file, weights_file):
            if not path.is_file():
                raise FileNotFoundError(f"folder {str(folder)!r} must hold {path.name}, but {path} does not exist")
        config = DecoderConfig.from_hf(SimpleNamespace(**_read_json_object(config_file)), source=str(config_file))
        decoder = cls(config)
        try:
            weights = load_file(weights_file)
        except Exception as error:  # safetensors raises its own SafetensorError, which names no file
            raise ValueError(
                f"{weights_file} is not a readable safetensors file (truncated or corrupt?): {error}"
            ) from None
        _load_weights(decoder, weights, config, str(weights_file))
        return decoder.to(device=device or "cpu", dtype=dtype or torch.float32).eval()


def _looks_local(path: str | Path) -> bool:
    """Return True for what can only be a local path: a Path, or a string no hub id could be ('./x', 'a/b/c')."""
    text = str(path)
    return isinstance(path, Path) or text.startswith(("/", ".", "~")) or text.count("/") > 1 or "\\" in text


def _read_json_object(path: Path) -> dict:
    """Return a JSON file's object, or raise ValueError naming the file."""
    import json

    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path} is not valid UTF-8 JSON: {error}") from None
    if not isinstance(record, dict):
        raise ValueError(f"{path} must hold a JSON object of config fields, got {type(record).__name__}")
    return record


def _load_weights(decoder: LlamaDecoder, hf_state: dict[str, torch.Tensor], config: DecoderConfig, source: str) -> None:
    """Load Hugging Face weights into a decoder, or raise ValueError naming the source and the tensor."""
    try:
        decoder.load_state_dict(hf_to_decoder_state(hf_state, config, source), strict=True)
    except RuntimeError as error:  # missing tensors or wrong shapes: name the checkpoint they came from
        raise ValueError(f"{source} does not fit the config: {error}") from None


def _is_safetensors_folder(path: Path) -> bool:
    """Return True for a local folder holding a single-file checkpoint we can read without transformers."""
    return (path / "config.json").is_file() and (path / "model.safetensors").is_file()


def hf_to_decoder_state(
    hf_state: dict[str, torch.Tensor], config: DecoderConfig, source: str = "the checkpoint"
) -> dict[str, torch.Tensor]:
    """Return the Hugging Face Llama state dict renamed to this decoder's parameter names.

    Raises ValueError naming ``source`` when a required tensor is missing, or when the checkpoint
    holds tensors the config has no place for (a 9-layer checkpoint under a 3-layer config).
    """
    for key in ("model.embed_tokens.weight", "model.norm.weight"):
        if key not in hf_state:
            raise ValueError(f"{source} has no tensor {key!r}: it is not a Llama checkpoint")
    renames = {
        "input_layernorm": "attn_norm",
        "post_attention_layernorm": "mlp_norm",
        "self_attn.q_proj": "q_proj",
        "self_attn.k_proj": "k_proj",
        "self_attn.v_proj": "v_proj",
        "self_attn.o_proj": "o_proj",
        "mlp.gate_proj": "gate_proj",
        "mlp.up_proj": "up_proj",
        "mlp.down_proj": "down_proj",
    }
    state = {"embed.weight": hf_state["model.embed_tokens.weight"], "final_norm.weight": hf_state["model.norm.weight"]}
    state["lm_head.weight"] = hf_state.get("lm_head.weight", state["embed.weight"])
    for i in range(config.num_layers):
        for hf_name, our_name in renames.items():
            for kind in ("weight", "bias"):
                key = f"model.layers.{i}.{hf_name}.{kind}"
                if key in hf_state:
                    state[f"layers.{i}.{our_name}.{kind}"] = hf_state[key]
    used = {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"}
    used |= {
        f"model.layers.{i}.{hf}.{kind}"
        for i in range(config.num_layers)
        for hf in renames
        for kind in ("weight", "bias")
    }
    unused = sorted(key for key in hf_state if key not in used and not key.endswith("rotary_emb.inv_freq"))
    if unused:
        raise ValueError(
            f"{source} holds {len(unused)} tensors its config has no place for (config: num_hidden_layers="
            f"{config.num_layers}), e.g. {unused[:3]}; the config and the weights do not belong together"
        )
    return state
