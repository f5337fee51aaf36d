"""Kaleido for ``CogVideoXTransformer3DModel`` (CogVideoX 2B/5B and 1.5).

Facts read from the model object:

* token grid: ``hidden_states`` ``(B, F, C, H, W)`` (frames before channels),
  ``config.patch_size`` and ``config.patch_size_t`` (``None`` = 1, CogVideoX 1.0);
* RoPE: ``config.use_rotary_positional_embeddings`` (5B: yes, 2B: no).  The pipeline
  builds the embedding with diffusers' ``get_3d_rotary_pos_embed(attention_head_dim)``,
  whose blocks are ``[t | h | w]`` of ``D/4, 3D/8, 3D/8`` channels (16/24/24 for
  ``D = 64``); that rule is applied to the model's ``attention_head_dim``.  Without RoPE
  (2B: absolute sin-cos embeddings) ``self_qk`` uses chunk groups;
* joint sequences are ``[text; video]``: text tokens come first (``prefix``) and always
  compute.  ``attn1.to_q/k/v``, ``to_out.0`` and ``ff`` run on the joint sequence.

The pipeline batches classifier-free guidance (``cache_context("cond_uncond")``, batch
``2B``); decisions and quantisation scales are per batch element, so each half is
computed as it would be alone.
"""

from __future__ import annotations


import torch
import torch.nn.functional as F

from kaleido.families import COGVIDEOX
from kaleido.models.attention import CoreAttnProcessor, project_heads, rotate_video_rows
from kaleido.models.adapter import (JOINT, AttentionSite, LinearSite, ModelAdapter, attention_linears, block_linear_sites,
                       ffn_linears, register_adapter)


SELF_ATTN_FFN_LINEARS = (*attention_linears("attn1"), *ffn_linears("ff"))


class CogVideoXCoreAttnProcessor(CoreAttnProcessor):
    """``CogVideoXAttnProcessor2_0`` with the attention kernel replaced by the site's attention core."""

    def __call__(
        self,
        attn: torch.nn.Module,
        hidden_states: torch.Tensor,
        encoder_hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        image_rotary_emb: torch.Tensor | None = None,
    ) -> torch.Tensor:
        from diffusers.models.embeddings import apply_rotary_emb

        text_seq_length = encoder_hidden_states.size(1)
        video_input = hidden_states
        hidden_states = torch.cat([encoder_hidden_states, hidden_states], dim=1)
        batch_size, sequence_length, _ = hidden_states.shape

        if attention_mask is not None:
            attention_mask = attn.prepare_attention_mask(attention_mask, sequence_length, batch_size)
            attention_mask = attention_mask.view(batch_size, attn.heads, -1, attention_mask.shape[-1])

        query, key, value = project_heads(attn, hidden_states)  # (B, S, H, D)
        head_dim = query.shape[-1]

        if image_rotary_emb is not None:
            def rotate(x: torch.Tensor) -> torch.Tensor:
                return apply_rotary_emb(x, image_rotary_emb, sequence_dim=1)

            query = rotate_video_rows(query, rotate, text_seq_length, "prefix")
            if not attn.is_cross_attention:
                key = rotate_video_rows(key, rotate, text_seq_length, "prefix")

        def dense(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            out = F.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                attn_mask=attention_mask, dropout_p=0.0, is_causal=False,
            )
            return out.transpose(1, 2)

        out = self.core.attend(query, key, value, self.make_call(dense, attention_mask, video_input))
        hidden_states = out.reshape(batch_size, -1, attn.heads * head_dim)

        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)

        encoder_hidden_states, hidden_states = hidden_states.split(
            [text_seq_length, hidden_states.size(1) - text_seq_length], dim=1
        )
        return hidden_states, encoder_hidden_states


@register_adapter
class CogVideoXAdapter(ModelAdapter):
    block_lists = ("transformer_blocks",)
    model_classes = (COGVIDEOX.class_name,)
    shapes = COGVIDEOX
    text_position = "prefix"
    stock_processors = ("CogVideoXAttnProcessor2_0",)

    def rope_split(self, model: torch.nn.Module) -> tuple[int, int, int] | None:
        if not model.config.use_rotary_positional_embeddings:
            return None
        d = int(model.config.attention_head_dim)
        return d // 4, d // 8 * 3, d // 8 * 3

    def patch_sizes(self, model: torch.nn.Module) -> tuple[int, int, int]:
        p = int(model.config.patch_size)
        pt = model.config.patch_size_t
        return (1 if pt is None else int(pt)), p, p

    def latent_thw(self, hidden_states: torch.Tensor) -> tuple[int, int, int]:
        return int(hidden_states.shape[1]), int(hidden_states.shape[3]), int(hidden_states.shape[4])

    def num_layers(self, model: torch.nn.Module) -> int:
        return len(model.transformer_blocks)

    def check_model(self, model: torch.nn.Module) -> None:
        split = self.rope_split(model)
        if split is not None and sum(split) != self.head_dim(model):
            raise ValueError(
                f"Kaleido: CogVideoX attention_head_dim {self.head_dim(model)} is not a multiple of 8, so its 3D RoPE "
                f"blocks {split} do not cover the head; RoPE groups cannot be formed"
            )

    def attention_sites(self, model: torch.nn.Module) -> list[AttentionSite]:
        return [
            AttentionSite(f"transformer_blocks.{i}.attn1", b.attn1, i, "self", CogVideoXCoreAttnProcessor, JOINT, JOINT)
            for i, b in enumerate(model.transformer_blocks)
        ]

    def linear_sites(self, model: torch.nn.Module) -> list[LinearSite]:
        return [s for i, b in enumerate(model.transformer_blocks)
                for s in block_linear_sites(f"transformer_blocks.{i}", b, i, SELF_ATTN_FFN_LINEARS, JOINT)]
