"""inferlab.kvcache at its edges: config translation, every way to load a checkpoint, attention
shapes and masks, rotary angles, the cache helpers and their exact error messages.

References: transformers' own LlamaForCausalLM / LlamaConfig / LlamaRMSNorm / LlamaRotaryEmbedding on
the same random weights, softmax(q k^T / sqrt(d)) v written out below, closed forms for counts and
sizes, and the documented message shape "<name> must be <what is allowed>, got <value>".
The "meta" device stands in for a GPU, so device mix-ups show on a CPU-only machine.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.models.llama.modeling_llama import LlamaRMSNorm, LlamaRotaryEmbedding, apply_rotary_pos_emb

from conftest import exactly
from inferlab.kvcache import (
    DecoderConfig,
    KVCache,
    LlamaDecoder,
    attention_variants,
    causal_attention,
    forward_with_cache,
    generate_cached,
    generate_naive,
    kv_cache_bytes,
)
from inferlab.kvcache.decoder import RMSNorm, Rotary, fused_attention, hf_to_decoder_state
from inferlab.kvcache.generate import check_cache_args

VOCAB = 48
# The fields a Llama config.json must give; everything else has Llama's default.
REQUIRED = (
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "max_position_embeddings",
    "rms_norm_eps",
)


def starting(message: str) -> str:
    return f"^{re.escape(message)}"


def hf_llama(heads=4, kv_heads=2, layers=1, max_positions=32, seed=0, **options) -> LlamaForCausalLM:
    """A tiny random Llama (hidden 8 x heads) with norm gains away from 1, so ignored gains would show."""
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=8 * heads,
        intermediate_size=24,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=max_positions,
        **options,
    )
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" in name:
                parameter.uniform_(0.5, 1.5)
    return model


def assert_logits_match(decoder, model, ids, atol=1e-4, **hf_kwargs):
    with torch.no_grad():
        ours, theirs = decoder(ids), model(ids, **hf_kwargs).logits
    assert ours.dtype == theirs.dtype
    assert (ours - theirs).abs().max().item() < atol


def rewrite_config(folder: Path, drop=(), **changes) -> None:
    """Edit a saved config.json: drop some fields, set others."""
    path = folder / "config.json"
    record = json.loads(path.read_text())
    for name in drop:
        record.pop(name, None)
    record.update(changes)
    path.write_text(json.dumps(record))


def llama_fields(**changes) -> SimpleNamespace:
    """A config as from_safetensors_folder reads a config.json: its fields as attributes."""
    fields = dict(
        model_type="llama",
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=24,
        num_hidden_layers=1,
        num_attention_heads=4,
        max_position_embeddings=32,
        rms_norm_eps=1e-6,
    )
    fields.update(changes)
    return SimpleNamespace(**{name: value for name, value in fields.items() if value is not None})


# ------------------------------------------------------------------ config translation (from_hf)


def test_an_old_style_config_json_gives_transformers_logits(tmp_path):
    # transformers 4.x wrote rope_theta at the top level and rope_scaling: null, no rope_parameters.
    model = hf_llama(rope_theta=500000.0)
    model.save_pretrained(tmp_path)
    rewrite_config(tmp_path, drop=["rope_parameters"], rope_theta=500000.0, rope_scaling=None)
    decoder = LlamaDecoder.from_pretrained(tmp_path)
    assert decoder.config.rope_theta == 500000.0
    assert_logits_match(decoder, model, torch.randint(0, VOCAB, (1, 20)))


def test_a_minimal_config_json_takes_llamas_defaults(tmp_path):
    # Only the required fields: no kv heads (MHA), head_dim, tying, biases, activation or rotary fields.
    model = hf_llama(heads=4, kv_heads=4, layers=2)
    model.save_pretrained(tmp_path)
    record = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", **{f: record[f] for f in REQUIRED}}))
    decoder = LlamaDecoder.from_pretrained(tmp_path)
    defaults = LlamaConfig()
    assert decoder.config.rope_theta == defaults.rope_parameters["rope_theta"] == 10000.0
    assert decoder.config.tie_embeddings is defaults.tie_word_embeddings is False
    assert (decoder.num_kv_heads, decoder.head_dim) == (4, 8)
    assert type(decoder.head_dim) is int
    assert_logits_match(decoder, model, torch.randint(0, VOCAB, (2, 12)))


def test_an_explicit_head_dim_wider_than_hidden_over_heads_is_honoured():
    model = hf_llama(heads=4, kv_heads=2, head_dim=16)  # hidden 32, but 4 heads of 16 features
    decoder = LlamaDecoder.from_pretrained(model)
    assert decoder.head_dim == 16
    assert_logits_match(decoder, model, torch.randint(0, VOCAB, (1, 10)))


@pytest.mark.parametrize("tie", [True, False], ids=["tied", "untied"])
def test_from_hf_translates_every_field(tie):
    config = hf_llama(heads=4, kv_heads=1, layers=2, tie_word_embeddings=tie, rms_norm_eps=1e-5).config
    ours = DecoderConfig.from_hf(config)
    assert (ours.vocab_size, ours.hidden_size, ours.intermediate_size) == (VOCAB, 32, 24)
    assert (ours.num_layers, ours.num_heads, ours.num_kv_heads, ours.head_dim) == (2, 4, 1, 8)
    assert (ours.max_positions, ours.rms_norm_eps, ours.rope_theta) == (32, 1e-5, 10000.0)
    assert ours.tie_embeddings is tie
    assert (ours.attention_bias, ours.mlp_bias) == (False, False)


@pytest.mark.parametrize("tie", [True, False], ids=["tied", "untied"])
def test_tied_embeddings_are_one_matrix_as_in_transformers(tie):
    model = hf_llama(tie_word_embeddings=tie)
    decoder = LlamaDecoder.from_pretrained(model)
    assert (decoder.lm_head.weight is decoder.embed.weight) is tie
    assert sum(p.numel() for p in decoder.parameters()) == model.num_parameters()
    assert_logits_match(decoder, model, torch.randint(0, VOCAB, (1, 6)))


@pytest.mark.parametrize(
    ("fields", "rope_type"),
    [
        (dict(rope_scaling={"type": "linear", "factor": 2.0}), "linear"),  # transformers 4.x's old key
        (dict(rope_scaling={"rope_type": "dynamic", "factor": 2.0}), "dynamic"),
        (dict(rope_parameters={"rope_type": "yarn", "factor": 2.0, "rope_theta": 1e4}), "yarn"),  # transformers 5
        (dict(rope_parameters={"rope_type": "llama3", "rope_theta": 1e4}, rope_scaling=None), "llama3"),
    ],
    ids=["old-type", "rope-scaling", "rope-parameters", "parameters-not-scaling"],
)
def test_scaled_rotary_is_refused_in_every_spelling(fields, rope_type):
    message = (
        f"rope_type must be 'default' (plain rotary embeddings), got {rope_type!r}; "
        "scaled rotary variants are not implemented in this readable decoder"
    )
    with pytest.raises(ValueError, match=exactly(message)):
        DecoderConfig.from_hf(llama_fields(**fields))


def test_from_hf_refuses_what_it_does_not_implement_by_name():
    with pytest.raises(ValueError, match=exactly("config.hidden_act must be 'silu' (Llama's MLP), got 'gelu'")):
        DecoderConfig.from_hf(llama_fields(hidden_act="gelu"))
    with pytest.raises(ValueError, match=exactly("config model_type must be one of ('llama',), got None")):
        DecoderConfig.from_hf(llama_fields(model_type=None))  # no model_type field at all
    with pytest.raises(ValueError, match=starting("config must give vocab_size, hidden_size, intermediate_size")):
        DecoderConfig.from_hf(SimpleNamespace(model_type="llama"))


# ------------------------------------------------------------------ loading


HOW = ["str", "Path", "hub-id-like local folder", "home folder str", "home folder Path", "loaded model"]


@pytest.mark.parametrize("how", HOW)
def test_a_saved_checkpoint_loads_every_documented_way(tmp_path, monkeypatch, how):
    model = hf_llama(tie_word_embeddings=True)
    folder = tmp_path / "org" / "tiny"
    model.save_pretrained(folder)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))  # "~" once meant a folder literally named "~" here
    sources = [str(folder), folder, "org/tiny", "~/org/tiny", Path("~/org/tiny"), model]
    source = dict(zip(HOW, sources, strict=True))[how]
    decoder = LlamaDecoder.from_pretrained(source)
    assert decoder.dtype == torch.float32 and not decoder.training
    assert_logits_match(decoder, model, torch.randint(0, VOCAB, (2, 9)))


def test_every_loader_honours_dtype_and_device(tmp_path):
    model = hf_llama()
    model.save_pretrained(tmp_path)
    ids = torch.randint(0, VOCAB, (1, 8))
    from_folder = LlamaDecoder.from_pretrained(tmp_path, dtype=torch.float64)
    assert from_folder.dtype == torch.float64
    assert LlamaDecoder.from_pretrained(tmp_path, device="meta").device.type == "meta"
    assert LlamaDecoder.from_pretrained(model, dtype=torch.float64).dtype == torch.float64
    assert LlamaDecoder.from_pretrained(model, device="meta").device.type == "meta"
    model.double()  # a float64 model gives a float64 decoder unless asked otherwise
    from_model = LlamaDecoder.from_pretrained(model)
    assert from_model.dtype == torch.float64
    assert_logits_match(from_model, model, ids, atol=1e-6)
    assert_logits_match(from_folder, model, ids, atol=1e-6)


def test_a_sharded_checkpoint_loads_through_transformers_in_float32(tmp_path):
    model = hf_llama().to(torch.bfloat16)
    model.save_pretrained(tmp_path, max_shard_size="2KB")  # no model.safetensors: shards and an index
    assert not (tmp_path / "model.safetensors").exists()
    decoder = LlamaDecoder.from_pretrained(str(tmp_path))
    assert decoder.dtype == torch.float32  # as from a single-file checkpoint, whatever the file holds
    assert_logits_match(decoder, model.float(), torch.randint(0, VOCAB, (1, 8)))
    assert LlamaDecoder.from_pretrained(tmp_path, dtype=torch.float64).dtype == torch.float64


def test_a_checkpoint_with_non_ascii_config_loads_under_an_ascii_locale(tmp_path, ascii_locale):
    model = hf_llama()
    model.save_pretrained(tmp_path)
    record = json.loads((tmp_path / "config.json").read_text(encoding="utf-8"))
    record["_name_or_path"] = "模型/詞元"  # config.json is UTF-8 JSON, whatever the machine's locale
    (tmp_path / "config.json").write_bytes(json.dumps(record, ensure_ascii=False).encode("utf-8"))
    assert_logits_match(LlamaDecoder.from_pretrained(tmp_path), model, torch.randint(0, VOCAB, (1, 8)))


@pytest.mark.parametrize(
    "path",
    [Path("no_such_model"), "/no_such_model", "./no_such_model", "~no_such_model", "a/b/c", "models\\tiny"],
    ids=["Path", "absolute", "dot", "tilde", "two-slashes", "backslash"],
)
def test_a_missing_local_path_is_refused_before_the_hub(tmp_path, monkeypatch, path):
    monkeypatch.chdir(tmp_path)
    message = f"path_or_model {str(path)!r} is not a folder on this machine"
    with pytest.raises(FileNotFoundError, match=exactly(message)):
        LlamaDecoder.from_pretrained(path)


@pytest.mark.parametrize("hub_id", ["inferlab-tests/no-such-model", "no-such-model"])
def test_a_hub_id_goes_to_the_hub_not_to_the_missing_folder_error(tmp_path, monkeypatch, hub_id):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(OSError) as info:  # offline in the tests: transformers cannot fetch it
        LlamaDecoder.from_pretrained(hub_id)
    assert "is not a folder on this machine" not in str(info.value)


def test_an_object_without_config_and_weights_is_refused():
    message = "path_or_model must be a local path, a Hugging Face id or a loaded LlamaForCausalLM, got Linear"
    with pytest.raises(TypeError, match=exactly(message)):
        LlamaDecoder.from_pretrained(torch.nn.Linear(2, 2))  # has state_dict, but no config


def break_config_not_an_object(folder):
    (folder / "config.json").write_text("[1, 2]")
    return ValueError, exactly(f"{folder / 'config.json'} must hold a JSON object of config fields, got list")


def break_config_not_json(folder):
    (folder / "config.json").write_text("{not json")
    return ValueError, starting(f"{folder / 'config.json'} is not valid UTF-8 JSON: ")


def break_config_missing_field(folder):
    rewrite_config(folder, drop=["vocab_size"])
    message = f"{folder / 'config.json'} must give vocab_size (a Llama config.json's fields), they are missing"
    return ValueError, exactly(message)


def break_weights_missing_tensor(folder):
    weights = load_file(folder / "model.safetensors")
    del weights["model.layers.0.mlp.up_proj.weight"]
    save_file(weights, folder / "model.safetensors")
    return ValueError, starting(f"{folder / 'model.safetensors'} does not fit the config: ")


def break_weights_truncated(folder):
    path = folder / "model.safetensors"
    path.write_bytes(path.read_bytes()[:100])
    return ValueError, starting(f"{path} is not a readable safetensors file (truncated or corrupt?): ")


@pytest.mark.parametrize(
    "breakage",
    [
        break_config_not_an_object,
        break_config_not_json,
        break_config_missing_field,
        break_weights_missing_tensor,
        break_weights_truncated,
    ],
)
def test_a_broken_checkpoint_folder_is_refused_naming_the_file(tmp_path, breakage):
    hf_llama().save_pretrained(tmp_path)
    error, pattern = breakage(tmp_path)
    with pytest.raises(error, match=pattern):
        LlamaDecoder.from_pretrained(tmp_path)


@pytest.mark.parametrize("missing", ["config.json", "model.safetensors"])
def test_a_folder_missing_a_file_is_refused_naming_it(tmp_path, missing):
    hf_llama().save_pretrained(tmp_path)
    (tmp_path / missing).unlink()
    message = f"folder {str(tmp_path)!r} must hold {missing}, but {tmp_path / missing} does not exist"
    with pytest.raises(FileNotFoundError, match=exactly(message)):
        LlamaDecoder.from_safetensors_folder(tmp_path)


def test_weights_that_do_not_fit_a_loaded_model_are_refused_naming_it():
    model = hf_llama()
    attention = model.model.layers[0].self_attn
    attention.q_proj = torch.nn.Linear(32, 32, bias=True)  # a bias the config (attention_bias=False) has no place for
    with pytest.raises(ValueError, match=starting("LlamaForCausalLM's weights does not fit the config: ")):
        LlamaDecoder.from_pretrained(model)


def test_old_checkpoints_rotary_inv_freq_tensors_are_ignored():
    model = hf_llama()
    state = dict(model.state_dict())
    state["model.layers.0.self_attn.rotary_emb.inv_freq"] = torch.ones(4)  # transformers < 4.31 saved these
    config = DecoderConfig.from_hf(model.config)
    decoder = LlamaDecoder(config).eval()
    decoder.load_state_dict(hf_to_decoder_state(state, config), strict=True)
    assert_logits_match(decoder, model, torch.randint(0, VOCAB, (1, 7)))
    message = "the checkpoint has no tensor 'model.embed_tokens.weight': it is not a Llama checkpoint"
    with pytest.raises(ValueError, match=exactly(message)):
        hf_to_decoder_state({}, config)


# ------------------------------------------------------------------ attention


def reference_attention(q, k, v, allowed):
    """softmax(q k^T / sqrt(d)) v in float64, each key/value head copied for its group of query heads."""
    group = q.shape[1] // k.shape[1]
    k, v = (t.repeat_interleave(group, dim=1).double() for t in (k, v))
    scores = (q.double() @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    return (torch.softmax(scores.masked_fill(~allowed, -math.inf), dim=-1) @ v).to(q.dtype)


def causal_mask(q_start, q_len, k_len):
    """Query i sits at position q_start + i and reads keys 0..q_start + i."""
    return torch.arange(k_len)[None, :] <= torch.arange(q_start, q_start + q_len)[:, None]


def random_qkv(heads, kv_heads, q_len, k_len, batch=2, head_dim=8, seed=0):
    torch.manual_seed(seed)
    q = torch.randn(batch, heads, q_len, head_dim)
    return q, torch.randn(batch, kv_heads, k_len, head_dim), torch.randn(batch, kv_heads, k_len, head_dim)


HEADS = pytest.mark.parametrize(("heads", "kv_heads"), [(4, 4), (4, 2), (4, 1)], ids=["mha", "gqa", "mqa"])
# (q_start, q_len, k_len): a whole prompt, after a cached prefix, the start of longer keys, a square
# shifted by one, Tq = kv_heads with Tk = heads, two queries, and a last decode query.
SPANS = [(0, 6, 6), (3, 3, 6), (0, 3, 6), (1, 5, 5), (2, 2, 4), (0, 2, 5), (5, 1, 6)]
SINGLE_QUERIES = [(0, 1, 6), (2, 1, 6), (4, 1, 6)]  # one query that is not the last: later keys are its future


# A lone query before the last key once read every key in fused_attention (its no-mask shortcut ignored q_start).
@HEADS
@pytest.mark.parametrize("attention", [causal_attention, fused_attention])
@pytest.mark.parametrize(("q_start", "q_len", "k_len"), SPANS + SINGLE_QUERIES)
def test_attention_equals_the_reference(attention, heads, kv_heads, q_start, q_len, k_len):
    q, k, v = random_qkv(heads, kv_heads, q_len, k_len)
    expected = reference_attention(q, k, v, causal_mask(q_start, q_len, k_len))
    torch.testing.assert_close(attention(q, k, v, q_start=q_start), expected, atol=1e-5, rtol=1e-5)


@HEADS
def test_attention_defaults_are_causal_from_position_zero(heads, kv_heads):
    q, k, v = random_qkv(heads, kv_heads, 5, 5)
    expected = reference_attention(q, k, v, causal_mask(0, 5, 5))
    torch.testing.assert_close(fused_attention(q, k, v), expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(causal_attention(q, k, v), expected, atol=1e-5, rtol=1e-5)


@HEADS
def test_bidirectional_and_masked_attention_equal_the_reference(heads, kv_heads):
    q, k, v = random_qkv(heads, kv_heads, 3, 5)
    everything = torch.ones(3, 5, dtype=torch.bool)
    for attention in (causal_attention, fused_attention):
        torch.testing.assert_close(
            attention(q, k, v, q_start=2, causal=False), reference_attention(q, k, v, everything), atol=1e-5, rtol=1e-5
        )
    allowed = torch.tensor([[1, 0, 1, 0, 0], [1, 1, 0, 0, 1], [0, 0, 0, 1, 1]], dtype=torch.bool)  # a token tree
    torch.testing.assert_close(
        fused_attention(q, k, v, q_start=2, allowed=allowed),
        reference_attention(q, k, v, allowed),
        atol=1e-5,
        rtol=1e-5,
    )


def test_attention_in_bfloat16_returns_bfloat16():
    q, k, v = (t.to(torch.bfloat16) for t in random_qkv(4, 2, 3, 6))
    expected = reference_attention(q, k, v, causal_mask(3, 3, 6))
    for attention in (causal_attention, fused_attention):
        out = attention(q, k, v, q_start=3)
        assert out.dtype == torch.bfloat16
        torch.testing.assert_close(out, expected, atol=2e-2, rtol=2e-2)


# The meta device stands in for a GPU: mixing it with CPU tensors fails as mixing CUDA and CPU would.


@pytest.mark.parametrize("attention", [causal_attention, fused_attention])
def test_attention_builds_its_mask_on_the_inputs_device(attention):
    q, k, v = (t.to("meta") for t in random_qkv(4, 2, 3, 6))
    out = attention(q, k, v, q_start=1)  # queries after a prefix: the explicit mask is built
    assert out.device.type == "meta" and out.shape == (2, 4, 3, 8)


def test_rotary_angles_are_made_where_inv_freq_lives():
    rotary = Rotary(8, 10000.0).to("meta")
    cos, sin = rotary.cos_sin(torch.arange(5), torch.float32)  # positions on the CPU
    assert cos.device.type == sin.device.type == "meta"


def test_the_cache_is_allocated_on_the_decoders_device():
    decoder = LlamaDecoder(DecoderConfig.from_hf(hf_llama().config)).to("meta")
    cache = KVCache(decoder, batch=2, max_tokens=4)
    assert cache.keys.device.type == cache.values.device.type == "meta"


Q, K, V = random_qkv(4, 2, 3, 5)
MISMATCH = "q, k and v must share batch and head_dim, k and v one shape, and kv_heads must divide heads; got "


@pytest.mark.parametrize("attention", [causal_attention, fused_attention])
@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        (([1.0], K, V), TypeError, "q must be a 4-dim tensor (batch, heads, T, head_dim), got list"),
        ((Q, K[0], V), TypeError, "k must be a 4-dim tensor (batch, heads, T, head_dim), got Tensor"),
        ((Q, K, None), TypeError, "v must be a 4-dim tensor (batch, heads, T, head_dim), got NoneType"),
        ((Q, K[:1], V[:1]), ValueError, MISMATCH + "q (2, 4, 3, 8), k (1, 2, 5, 8), v (1, 2, 5, 8)"),
        ((Q[..., :4], K, V), ValueError, MISMATCH + "q (2, 4, 3, 4), k (2, 2, 5, 8), v (2, 2, 5, 8)"),
        ((Q[:, :3], K, V), ValueError, MISMATCH + "q (2, 3, 3, 8), k (2, 2, 5, 8), v (2, 2, 5, 8)"),
        ((Q, K, V[:, :, :4]), ValueError, MISMATCH + "q (2, 4, 3, 8), k (2, 2, 5, 8), v (2, 2, 4, 8)"),
    ],
    ids=["q-list", "k-3dim", "v-none", "batch", "head-dim", "heads-not-multiple", "v-length"],
)
def test_refused_shapes_get_the_documented_error(attention, arguments, error, message):
    with pytest.raises(error, match=exactly(message)):
        attention(*arguments, q_start=2)


# ------------------------------------------------------------------ rotary, RMSNorm, the layers


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("batched", [False, True], ids=["shared-positions", "per-sequence-positions"])
def test_rotary_matches_transformers(dtype, batched):
    head_dim, theta = 8, 500.0
    hf_rotary = LlamaRotaryEmbedding(LlamaConfig(hidden_size=16, num_attention_heads=2, rope_theta=theta))
    torch.manual_seed(0)
    x = torch.randn(3, 2, 5, head_dim).to(dtype)
    if batched:
        positions = torch.tensor([[0, 1, 2, 3, 4], [7, 8, 9, 10, 11], [20, 21, 22, 23, 24]])
        position_ids = positions
    else:
        positions = torch.arange(3, 8)
        position_ids = positions[None].expand(3, -1)
    cos, sin = hf_rotary(x, position_ids)
    expected, _ = apply_rotary_pos_emb(x, x, cos, sin)
    ours = Rotary(head_dim, theta)(x, positions)
    assert ours.dtype == dtype
    torch.testing.assert_close(ours, expected)


def closed_form_cos_sin(positions, head_dim, theta):
    """Angle of pair i at position p: p / theta^(2i / head_dim), features i and i + head_dim/2 alike."""
    pairs = torch.arange(head_dim // 2, dtype=torch.float64)
    angles = positions.double()[:, None] / theta ** (2 * pairs / head_dim)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def test_rotary_memo_never_returns_stale_angles():
    rotary = Rotary(8, 100.0)
    positions = torch.arange(6)
    for dtype in (torch.float32, torch.bfloat16, torch.float64, torch.float32):  # the same positions object
        cos, sin = rotary.cos_sin(positions, dtype)
        assert cos.dtype == sin.dtype == dtype
        expected = closed_form_cos_sin(positions, 8, 100.0)
        torch.testing.assert_close((cos.double(), sin.double()), expected, atol=1e-2, rtol=1e-2)
    shifted = torch.arange(6) + 9  # new positions of the same shape
    cos, sin = rotary.cos_sin(shifted, torch.float32)
    torch.testing.assert_close((cos.double(), sin.double()), closed_form_cos_sin(shifted, 8, 100.0), atol=1e-6, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_rmsnorm_matches_transformers_in_every_dtype(dtype):
    torch.manual_seed(0)
    ours, theirs = RMSNorm(16, 1e-5), LlamaRMSNorm(16, eps=1e-5)
    with torch.no_grad():
        theirs.weight.uniform_(0.5, 1.5)
        ours.weight.copy_(theirs.weight)
    ours, theirs = ours.to(dtype), theirs.to(dtype)
    x = (torch.randn(2, 3, 16) * 4).to(dtype)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), theirs(x))


def test_bidirectional_logits_match_transformers_with_a_full_mask():
    model = hf_llama(layers=2)
    decoder = LlamaDecoder.from_pretrained(model)
    ids = torch.randint(0, VOCAB, (1, 9))
    everything = torch.ones(1, 1, 9, 9, dtype=torch.bool)  # every query reads every key
    with torch.no_grad():
        assert (decoder(ids, causal=False) - model(ids, attention_mask=everything).logits).abs().max() < 1e-4


def test_a_layer_called_on_its_own_is_causal_like_transformers_layer():
    model = hf_llama()
    decoder = LlamaDecoder.from_pretrained(model)
    torch.manual_seed(1)
    h = torch.randn(1, 7, 32)
    positions = torch.arange(7)
    with torch.no_grad():
        embeddings = model.model.rotary_emb(h, positions[None])
        causal = torch.ones(7, 7, dtype=torch.bool).tril()[None, None]
        expected = model.model.layers[0](h, attention_mask=causal, position_embeddings=embeddings)
        torch.testing.assert_close(decoder.layers[0](h, positions), expected, atol=1e-5, rtol=1e-5)


def test_ids_filling_every_position_are_accepted():
    model = hf_llama(max_positions=16)
    assert_logits_match(LlamaDecoder.from_pretrained(model), model, torch.randint(0, VOCAB, (1, 16)))


# ------------------------------------------------------------------ check_ids and the loops' checks


@pytest.fixture(scope="module")
def small():
    """A decoder with 16 positions, and its transformers model."""
    model = hf_llama(max_positions=16, seed=3)
    with torch.no_grad():
        model.lm_head.weight.mul_(20.0)  # peaked logits, like a trained model's: no greedy near-ties
    return LlamaDecoder.from_pretrained(model), model


@pytest.mark.parametrize(
    ("ids", "error", "message"),
    [
        (
            torch.zeros((1, 4)),
            TypeError,
            "ids must be an integer torch.Tensor of shape (batch, T), got Tensor of torch.float32",
        ),
        (torch.zeros(5, dtype=torch.long), ValueError, "ids must have shape (batch >= 1, T >= 1), got (5,)"),
        (torch.zeros((0, 3), dtype=torch.long), ValueError, "ids must have shape (batch >= 1, T >= 1), got (0, 3)"),
        (
            torch.tensor([[0, 5, VOCAB]]),
            ValueError,
            f"ids must be token ids in 0..{VOCAB - 1} (the vocabulary), got {VOCAB}",
        ),
        (torch.tensor([[3, -1, 0]]), ValueError, f"ids must be token ids in 0..{VOCAB - 1} (the vocabulary), got -1"),
    ],
    ids=["float", "one-dim", "empty-batch", "vocab-size", "negative"],
)
def test_bad_ids_are_refused_by_name(small, ids, error, message):
    decoder, _ = small
    with pytest.raises(error, match=exactly(message)):
        decoder(ids)


@pytest.mark.parametrize("first_position", [-1, 1.5, True, "3"])
def test_a_bad_first_position_is_refused(small, first_position):
    decoder, _ = small
    with pytest.raises(ValueError, match=exactly(f"first_position must be an integer >= 0, got {first_position!r}")):
        decoder.check_ids(torch.zeros((1, 2), dtype=torch.long), first_position=first_position)


def test_a_step_past_the_last_position_is_refused_by_position_not_by_room(small):
    decoder, _ = small
    cache = KVCache(decoder, batch=1, max_tokens=16)
    with torch.no_grad():
        forward_with_cache(decoder, cache, torch.randint(0, VOCAB, (1, 15)))
    with pytest.raises(
        ValueError, match=exactly("positions 15..16 exceed the model's maximum of 16 positions (0..15)")
    ):
        forward_with_cache(decoder, cache, torch.zeros((1, 2), dtype=torch.long))
    assert cache.length == 15


def hf_greedy(model, ids, k):
    model.generation_config.eos_token_id = None
    with torch.no_grad():
        return model.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=k, do_sample=False, pad_token_id=0
        )


@pytest.mark.parametrize("generate", [generate_naive, generate_cached])
def test_a_generation_may_fill_every_position_and_reports_each_token(small, generate):
    decoder, model = small
    prompt = torch.randint(0, VOCAB, (2, 4))
    seen = []
    result = generate(decoder, prompt, 12, on_token=seen.append)  # 4 + 12 = all 16 positions
    assert torch.equal(result.tokens, hf_greedy(model, prompt, 12))
    assert seen == list(range(1, 13))


def test_generation_argument_errors_name_the_argument(small):
    decoder, _ = small
    with pytest.raises(ValueError, match=exactly("input_ids must hold a prompt of T >= 1 tokens, got shape (1, 0)")):
        generate_cached(decoder, torch.zeros((1, 0), dtype=torch.long), 2)
    with pytest.raises(TypeError, match=starting("input_ids must be an integer torch.Tensor of shape (batch, T)")):
        generate_naive(decoder, torch.zeros((1, 3)), 2)
    with pytest.raises(
        TypeError, match=exactly("on_token must be a function of the number of new tokens, or None, got 5")
    ):
        generate_cached(decoder, torch.zeros((1, 3), dtype=torch.long), 2, on_token=5)


def test_a_one_layer_model_counts_its_keys_by_the_closed_forms():
    decoder = LlamaDecoder.from_pretrained(hf_llama(layers=1))
    prompt = torch.randint(0, VOCAB, (2, 3))
    naive, cached = generate_naive(decoder, prompt, 4), generate_cached(decoder, prompt, 4)
    assert naive.keys_per_layer == 3 + 4 + 5 + 6 and type(naive.keys_per_layer) is int  # T + i for step i
    assert cached.keys_per_layer == 3 + 3 and type(cached.keys_per_layer) is int  # the prompt, then k - 1 tokens
    assert (naive.keys_computed, cached.keys_computed) == (2 * 18, 2 * 6)  # x batch of 2


# ------------------------------------------------------------------ KVCache sizes and limits


@pytest.fixture(scope="module")
def sized():
    """2 layers x 2 kv heads x 8 dims x 64 positions: 2 x 2 x 2 x 64 x 8 = 4096 cached numbers per row."""
    config = DecoderConfig(
        vocab_size=8,
        hidden_size=16,
        intermediate_size=8,
        num_layers=2,
        num_heads=2,
        num_kv_heads=2,
        head_dim=8,
        max_positions=64,
    )
    return LlamaDecoder(config)


def test_the_cache_refuses_bad_sizes_by_name(sized):
    with pytest.raises(ValueError, match=exactly("batch must be an integer >= 1, got 0")):
        KVCache(sized, batch=0, max_tokens=4)
    with pytest.raises(ValueError, match=exactly("max_tokens must be an integer in [1, 64], got 65")):
        KVCache(sized, batch=1, max_tokens=65)
    cache = KVCache(sized, batch=1, max_tokens=1)  # one position is a cache too
    assert cache.keys.shape == cache.values.shape == (2, 1, 2, 1, 8)


def test_the_cache_element_limit_is_the_closed_form(sized):
    limit = 2**31  # 8 GiB of float32 keys and values
    fits = limit // (2 * 2 * 2 * 64 * 8)  # 524288 rows of 64 positions: exactly the limit
    check_cache_args(sized, fits, 64)  # no allocation: the check alone
    count = 2 * 2 * (fits + 1) * 2 * 64 * 8
    message = (
        f"batch would need {count:,} cached numbers for max_tokens=64, over the limit of {limit:,}; "
        "choose a smaller batch"
    )
    with pytest.raises(ValueError, match=exactly(message)):
        check_cache_args(sized, fits + 1, 64)


# ------------------------------------------------------------------ size


def test_kv_heads_must_divide_heads_in_a_sized_config():
    config = {"num_hidden_layers": 2, "num_attention_heads": 6, "num_key_value_heads": 4, "head_dim": 8}
    message = (
        "config num_attention_heads (6) must be a multiple of num_key_value_heads (4): "
        "each key/value head serves an equal group of query heads"
    )
    with pytest.raises(ValueError, match=exactly(message)):
        kv_cache_bytes(config, tokens=1)


def test_attention_variants_of_a_model_a_decoder_and_a_dict_with_the_decoders_names():
    model = hf_llama(heads=4, kv_heads=2)
    expected = {"MHA": model.config.num_attention_heads, "GQA": model.config.num_key_value_heads, "MQA": 1}
    assert attention_variants(model) == expected == {"MHA": 4, "GQA": 2, "MQA": 1}
    assert attention_variants(LlamaDecoder.from_pretrained(model)) == expected
    assert attention_variants({"num_layers": 5, "num_heads": 8, "num_kv_heads": 2, "hidden_size": 256}) == {
        "MHA": 8,
        "GQA": 2,
        "MQA": 1,
    }
