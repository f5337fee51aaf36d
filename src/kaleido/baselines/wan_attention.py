"""A Wan self-attention processor with a pluggable attention core.

It computes q, k, v exactly as diffusers' ``WanAttnProcessor`` does (projections,
RMS norms, head split, RoPE on adjacent channel pairs) and hands them to
``attention_fn(q, k, v, ctx)`` with layout ``(B, S, heads, head_dim)``; the result,
same layout, goes through ``to_out``.  Used for ``attn1`` (self-attention) only;
image-conditioned (I2V, ``add_k_proj``) blocks are refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from .base import CallInfo, MethodHandle


@dataclass
class AttnContext:
    """What an attention core may need besides q, k, v."""

    layer: int
    call: CallInfo
    hidden_states: torch.Tensor  # (B, S, dim): the attention's input (after norm1 / modulation)
    handle: MethodHandle


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Wan's RoPE on adjacent channel pairs; ``x``: (B, S, heads, d)."""
    x1, x2 = x.unflatten(-1, (-1, 2)).unbind(-1)
    c = cos[..., 0::2]
    s = sin[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x1 * c - x2 * s
    out[..., 1::2] = x1 * s + x2 * c
    return out.type_as(x)


def dense_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Plain softmax attention; (B, S, H, d) in and out."""
    o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
    return o.transpose(1, 2)


def masked_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor,
                     key_bias: torch.Tensor | None = None) -> torch.Tensor:
    """Attention restricted to ``keep`` (bool, broadcastable to (B, H, Sq, Sk)); (B, S, H, d) layout.

    ``key_bias`` (B, H or 1, 1, Sk) is added to the logits (ToMe's log-size term).  Every
    query row must keep at least one key.
    """
    qh, kh, vh = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    logits = (qh @ kh.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if key_bias is not None:
        logits = logits + key_bias
    logits = logits.masked_fill(~keep, float("-inf"))
    return (logits.softmax(-1) @ vh).transpose(1, 2)


class CoreSelfAttnProcessor:
    """Wan ``attn1`` processor calling ``attention_fn(q, k, v, ctx)`` for the attention core."""

    def __init__(self, attention_fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, AttnContext], torch.Tensor],
                 handle: MethodHandle, layer: int) -> None:
        self.attention_fn = attention_fn
        self.handle = handle
        self.layer = layer

    def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None, rotary_emb=None):
        if encoder_hidden_states is not None or attention_mask is not None:
            raise ValueError("CoreSelfAttnProcessor serves self-attention (attn1) without masks only")
        q = attn.norm_q(attn.to_q(hidden_states))
        k = attn.norm_k(attn.to_k(hidden_states))
        v = attn.to_v(hidden_states)
        q = q.unflatten(2, (attn.heads, -1))
        k = k.unflatten(2, (attn.heads, -1))
        v = v.unflatten(2, (attn.heads, -1))
        if rotary_emb is not None:
            q = apply_rope(q, *rotary_emb)
            k = apply_rope(k, *rotary_emb)
        ctx = AttnContext(self.layer, self.handle.call, hidden_states, self.handle)
        out = self.attention_fn(q, k, v, ctx)
        out = out.flatten(2, 3).type_as(q)
        out = attn.to_out[0](out)
        return attn.to_out[1](out)


def install_self_attention(handle: MethodHandle, attention_fn, dense_steps: int = 0) -> None:
    """Give every block's ``attn1`` a :class:`CoreSelfAttnProcessor`; undo restores the originals.

    The first ``dense_steps`` denoising steps (a warm-up every method shares) run dense
    attention and are charged as dense; later steps call ``attention_fn``.
    """
    if dense_steps > 0:
        core = attention_fn

        def attention_fn(q, k, v, ctx: AttnContext):
            if ctx.call.step < dense_steps:
                B, S, H, d = q.shape
                record_pairs(handle, B * H * S * S, B * H * S * S, d)
                return dense_attention(q, k, v)
            return core(q, k, v, ctx)

    for i, block in enumerate(handle.transformer.blocks):
        attn = block.attn1
        if getattr(attn, "add_k_proj", None) is not None or getattr(attn, "fused_projections", False):
            raise ValueError(f"blocks.{i}.attn1 has fused or image projections; baselines support plain T2V Wan attn1")
        old = attn.processor
        attn.processor = CoreSelfAttnProcessor(attention_fn, handle, i)
        handle.add_undo(lambda attn=attn, old=old: setattr(attn, "processor", old))


def record_pairs(handle: MethodHandle, kept_pairs: int, total_pairs: int, head_dim: int) -> None:
    """Charge self_qk and self_pv for ``kept_pairs`` of ``total_pairs`` (query, key) pairs."""
    kept = int(kept_pairs) * head_dim
    skipped = (int(total_pairs) - int(kept_pairs)) * head_dim
    handle.ledger.add("self_qk", mac8=kept, skipped=skipped)
    handle.ledger.add("self_pv", mac8=kept, skipped=skipped)
