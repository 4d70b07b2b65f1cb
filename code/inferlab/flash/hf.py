"""Run a Hugging Face model with this package's tiled attention, to check it inside a real model.

Transformers lets a model call any registered attention function (``AttentionInterface``). We
register :class:`inferlab.flash.FlashAttention` under the name ``"inferlab_tiled"``; the logits
must then match the model's own attention, in a forward pass and in cached generation (where a
decode step has one query and N keys: the query is the *last* position, as our causal mask assumes).
"""

from __future__ import annotations

import torch

from .reference import causal_mask
from .tiled import FlashAttention

IMPLEMENTATION = "inferlab_tiled"  # a name with "flash" in it would send Transformers to flash-attn


# --8<-- [start:hf_attention]
def flash_attention_for_transformers(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Return (output (batch, N, heads, d), None) for Transformers' attention interface."""
    if dropout:
        raise ValueError(f"dropout must be 0 (this attention is for inference and tests), got {dropout}")
    causal = bool(getattr(module, "is_causal", True))
    n_q, n_k = query.shape[-2], key.shape[-2]
    if attention_mask is not None:  # Transformers passes a mask only when there is padding
        allowed = (
            causal_mask(n_q, n_k, query.device)
            if causal
            else torch.ones(n_q, n_k, dtype=torch.bool, device=query.device)
        )
        mask = attention_mask if attention_mask.dtype == torch.bool else attention_mask == 0
        if not torch.equal(mask, allowed.expand_as(mask)):
            raise ValueError(
                "attention_mask hides keys beyond the causal mask (padding); this adapter supports unpadded batches only"
            )
    # Grouped-query attention: each key/value head serves several query heads.
    groups = query.shape[1] // key.shape[1]
    key, value = key.repeat_interleave(groups, dim=1), value.repeat_interleave(groups, dim=1)
    out = FlashAttention.apply(query, key, value, causal, 64, 64, scaling)
    return out.transpose(1, 2).contiguous(), None


# --8<-- [end:hf_attention]


def use_flash_attention(model):
    """Switch a Hugging Face model to the tiled attention and return it."""
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import sdpa_mask

    AttentionInterface.register(IMPLEMENTATION, flash_attention_for_transformers)
    AttentionMaskInterface.register(IMPLEMENTATION, sdpa_mask)  # boolean masks, None when purely causal
    model.set_attn_implementation(IMPLEMENTATION)
    return model
