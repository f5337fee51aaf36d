"""Kaleido for ``WanTransformer3DModel`` (Wan 2.1 / 2.2, diffusers >= 0.35).

Facts read from the model object:

* token grid: ``hidden_states`` ``(B, C, F, H, W)`` and ``config.patch_size`` ``(p_t, p_h, p_w)``;
  tokens in raster order ``t*H*W + h*W + w`` (``patch_embedding(...).flatten(2)``);
* RoPE: ``model.rope.t_dim / h_dim / w_dim``, contiguous ``[t | h | w]`` per head,
  applied in the processor after ``norm_q``/``norm_k``;
* ``blocks[i].attn1``: self-attention (RoPE), ``blocks[i].attn2``: cross-attention over
  text (keys never reuse: they are text tokens); ``blocks[i].ffn`` on video tokens.

Wan's pipeline calls the transformer separately for "cond" and "uncond" inside
``cache_context`` with ``step_index``; each call is recorded under its context.
"""

from __future__ import annotations

import torch

from kaleido.families import WAN
from kaleido.ops import OpKind

from kaleido.models.attention import CoreAttnProcessor, project_heads
from kaleido.models.adapter import (TEXT, AttentionSite, LinearSite, ModelAdapter, attention_linears, block_linear_sites,
                       ffn_linears, register_adapter)


def _apply_rotary(x: torch.Tensor, freqs_cos: torch.Tensor, freqs_sin: torch.Tensor) -> torch.Tensor:
    # the same arithmetic as WanAttnProcessor's inner apply_rotary_emb (adjacent channel pairs)
    x1, x2 = x.unflatten(-1, (-1, 2)).unbind(-1)
    cos = freqs_cos[..., 0::2]
    sin = freqs_sin[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x1 * cos - x2 * sin
    out[..., 1::2] = x1 * sin + x2 * cos
    return out.type_as(x)


#: reused linears of a Wan block; cross-attention: queries and output are video tokens, keys/values are
#: text (never reused)
WAN_LINEARS = (*attention_linears("attn1"), ("attn2.to_q", "cross_proj_q"), ("attn2.to_out.0", "cross_proj_out"),
               *ffn_linears("ffn"))


class WanCoreAttnProcessor(CoreAttnProcessor):
    """``WanAttnProcessor`` with the attention kernel replaced by the site's attention core."""

    def __call__(
        self,
        attn: torch.nn.Module,
        hidden_states: torch.Tensor,
        encoder_hidden_states: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        rotary_emb: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        from diffusers.models.attention_dispatch import dispatch_attention_fn

        encoder_hidden_states_img = None
        if attn.add_k_proj is not None:
            # 512 is the text encoder's context length, as in WanAttnProcessor
            image_context_length = encoder_hidden_states.shape[1] - 512
            encoder_hidden_states_img = encoder_hidden_states[:, :image_context_length]
            encoder_hidden_states = encoder_hidden_states[:, image_context_length:]

        parallel = self._parallel_config if encoder_hidden_states is None else None

        def dense(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            return dispatch_attention_fn(
                q, k, v, attn_mask=attention_mask, dropout_p=0.0, is_causal=False,
                backend=self._attention_backend, parallel_config=parallel,
            )

        call = self.make_call(dense, attention_mask, hidden_states)
        kv_source = hidden_states if encoder_hidden_states is None else encoder_hidden_states
        query, key, value = project_heads(attn, hidden_states, kv_source, norm_before_split=True)

        if rotary_emb is not None:
            query = _apply_rotary(query, *rotary_emb)
            key = _apply_rotary(key, *rotary_emb)

        hidden_states_img = None
        if encoder_hidden_states_img is not None:
            key_img = attn.add_k_proj(encoder_hidden_states_img)
            value_img = attn.add_v_proj(encoder_hidden_states_img)
            key_img = attn.norm_added_k(key_img)
            key_img = key_img.unflatten(2, (attn.heads, -1))
            value_img = value_img.unflatten(2, (attn.heads, -1))
            hidden_states_img = dispatch_attention_fn(
                query, key_img, value_img, attn_mask=None, dropout_p=0.0, is_causal=False,
                backend=self._attention_backend, parallel_config=None,
            )
            self.core.note_side_attention(call, query, key_img, value_img, "img")
            hidden_states_img = hidden_states_img.flatten(2, 3).type_as(query)

        hidden_states = self.core.attend(query, key, value, call)
        hidden_states = hidden_states.flatten(2, 3)
        hidden_states = hidden_states.type_as(query)

        if hidden_states_img is not None:
            hidden_states = hidden_states + hidden_states_img

        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)
        return hidden_states


@register_adapter
class WanAdapter(ModelAdapter):
    block_lists = ("blocks",)
    model_classes = (WAN.class_name,)
    shapes = WAN
    text_position = "none"
    stock_processors = ("WanAttnProcessor", "WanAttnProcessor2_0")
    # cross-attention keys and values are projections of the text: dense, named for the ledgers
    dense_linears = (("attn2.to_k", OpKind.CROSS_PROJ_KV.value, TEXT), ("attn2.to_v", OpKind.CROSS_PROJ_KV.value, TEXT))

    def rope_split(self, model: torch.nn.Module) -> tuple[int, int, int]:
        rope = model.rope
        return int(rope.t_dim), int(rope.h_dim), int(rope.w_dim)

    def patch_sizes(self, model: torch.nn.Module) -> tuple[int, int, int]:
        pt, ph, pw = model.config.patch_size
        return int(pt), int(ph), int(pw)

    def num_layers(self, model: torch.nn.Module) -> int:
        return len(model.blocks)

    def check_model(self, model: torch.nn.Module) -> None:
        for i, block in enumerate(model.blocks):
            for attn in (block.attn1, block.attn2):
                if getattr(attn, "fused_projections", False):
                    raise ValueError(
                        f"Kaleido: blocks.{i} has fused q/k/v projections; call transformer.unfuse_qkv_projections() "
                        "before kaleido.apply (activation reuse works on the separate to_q/to_k/to_v layers)"
                    )

    def attention_sites(self, model: torch.nn.Module) -> list[AttentionSite]:
        sites = []
        for i, block in enumerate(model.blocks):
            sites.append(AttentionSite(f"blocks.{i}.attn1", block.attn1, i, "self", WanCoreAttnProcessor))
            sites.append(AttentionSite(f"blocks.{i}.attn2", block.attn2, i, "cross", WanCoreAttnProcessor,
                                       keys=TEXT))
        return sites

    def linear_sites(self, model: torch.nn.Module) -> list[LinearSite]:
        return [s for i, b in enumerate(model.blocks) for s in block_linear_sites(f"blocks.{i}", b, i, WAN_LINEARS)]
