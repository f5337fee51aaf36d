"""Kaleido for ``HunyuanVideoTransformer3DModel`` (dual- and single-stream blocks).

Facts read from the model object:

* token grid: ``hidden_states`` ``(B, C, F, H, W)``, ``config.patch_size_t`` and
  ``config.patch_size``; video tokens in raster order;
* RoPE: ``model.rope.rope_dim`` (``(16, 56, 56)`` for the released model), contiguous
  ``[t | h | w]`` per head, applied to the video tokens only;
* joint sequences are ``[video; text]``: text tokens sit after the grid (``suffix``)
  and always compute; the attention mask over padded text is passed through.

Dual-stream blocks (``transformer_blocks[i]``, layer ``i``): video-side ``to_q/k/v``,
``to_out.0`` and ``ff`` reuse; text-side ``add_*_proj``, ``to_add_out`` and
``ff_context`` are dense.  Single-stream blocks (``single_transformer_blocks[j]``,
layer ``n_dual + j``) run ``to_q/k/v`` and ``proj_mlp`` on the joint sequence and fuse
the attention output projection with the MLP's down projection:
``proj_out(cat[attn, gelu(proj_mlp(x))])``.  Kaleido reuses that fused GEMM's input as
one op, ``fused_out`` (``C_in = hidden + mlp_dim``, chunk groups that do not straddle the
attention/MLP boundary when the chunk size divides ``hidden``), under the ``ffn`` switch.
"""

from __future__ import annotations

from typing import Any

import torch

from kaleido.families import HUNYUAN_VIDEO
from kaleido.models.attention import CoreAttnProcessor, project_heads, rotate_video_rows
from kaleido.models.adapter import (JOINT, AttentionSite, LinearSite, ModelAdapter, attention_linears, block_linear_sites,
                       ffn_linears, register_adapter)


DUAL_STREAM_LINEARS = (*attention_linears("attn"), *ffn_linears("ff"))
#: single-stream blocks: q/k/v, the MLP input, and proj_out fused over [attention output, MLP hidden]
SINGLE_STREAM_LINEARS = (*attention_linears("attn")[:3], ("proj_mlp", "ffn_in"), ("proj_out", "fused_out"))


class HunyuanVideoCoreAttnProcessor(CoreAttnProcessor):
    """``HunyuanVideoAttnProcessor2_0`` with the attention kernel replaced by the site's attention core."""

    def __call__(
        self,
        attn: torch.nn.Module,
        hidden_states: torch.Tensor,
        encoder_hidden_states: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        image_rotary_emb: torch.Tensor | None = None,
    ) -> torch.Tensor:
        from diffusers.models.attention_dispatch import dispatch_attention_fn
        from diffusers.models.embeddings import apply_rotary_emb

        joint_input = attn.add_q_proj is None and encoder_hidden_states is not None
        video_input = hidden_states
        if joint_input:
            hidden_states = torch.cat([hidden_states, encoder_hidden_states], dim=1)

        query, key, value = project_heads(attn, hidden_states)

        if image_rotary_emb is not None:
            def rotate(x: torch.Tensor) -> torch.Tensor:
                return apply_rotary_emb(x, image_rotary_emb, sequence_dim=1)

            n_text = encoder_hidden_states.shape[1] if joint_input else 0
            query = rotate_video_rows(query, rotate, n_text, "suffix")
            key = rotate_video_rows(key, rotate, n_text, "suffix")

        if attn.add_q_proj is not None and encoder_hidden_states is not None:
            encoder_query, encoder_key, encoder_value = project_heads(
                attn, encoder_hidden_states, projections=("add_q_proj", "add_k_proj", "add_v_proj"),
                norms=("norm_added_q", "norm_added_k"))
            query = torch.cat([query, encoder_query], dim=1)
            key = torch.cat([key, encoder_key], dim=1)
            value = torch.cat([value, encoder_value], dim=1)

        def dense(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            return dispatch_attention_fn(
                q, k, v, attn_mask=attention_mask, dropout_p=0.0, is_causal=False,
                backend=self._attention_backend, parallel_config=self._parallel_config,
            )

        hidden_states = self.core.attend(query, key, value, self.make_call(dense, attention_mask, video_input))
        hidden_states = hidden_states.flatten(2, 3)
        hidden_states = hidden_states.to(query.dtype)

        if encoder_hidden_states is not None:
            n_text = encoder_hidden_states.shape[1]
            hidden_states, encoder_hidden_states = hidden_states[:, :-n_text], hidden_states[:, -n_text:]
            if getattr(attn, "to_out", None) is not None:
                hidden_states = attn.to_out[0](hidden_states)
                hidden_states = attn.to_out[1](hidden_states)
            if getattr(attn, "to_add_out", None) is not None:
                encoder_hidden_states = attn.to_add_out(encoder_hidden_states)

        return hidden_states, encoder_hidden_states


@register_adapter
class HunyuanVideoAdapter(ModelAdapter):
    block_lists = ("transformer_blocks", "single_transformer_blocks")
    model_classes = (HUNYUAN_VIDEO.class_name,)
    shapes = HUNYUAN_VIDEO
    text_position = "suffix"
    stock_processors = ("HunyuanVideoAttnProcessor2_0",)

    def rope_split(self, model: torch.nn.Module) -> tuple[int, int, int]:
        t, h, w = (int(x) for x in model.rope.rope_dim)
        return t, h, w

    def patch_sizes(self, model: torch.nn.Module) -> tuple[int, int, int]:
        p = int(model.config.patch_size)
        return int(model.config.patch_size_t), p, p

    def _n_dual(self, model: torch.nn.Module) -> int:
        return len(model.transformer_blocks)

    def num_layers(self, model: torch.nn.Module) -> int:
        return len(model.transformer_blocks) + len(model.single_transformer_blocks)

    def check_model(self, model: torch.nn.Module) -> None:
        t, h, w = self.rope_split(model)
        if t + h + w != self.head_dim(model):
            raise ValueError(
                f"Kaleido: HunyuanVideo rope_axes_dim {(t, h, w)} sums to {t + h + w}, not the head dim "
                f"{self.head_dim(model)}; RoPE groups must cover each head"
            )

    def attention_sites(self, model: torch.nn.Module) -> list[AttentionSite]:
        n = self._n_dual(model)
        sites = [
            AttentionSite(f"transformer_blocks.{i}.attn", b.attn, i, "self", HunyuanVideoCoreAttnProcessor,
                          JOINT, JOINT)
            for i, b in enumerate(model.transformer_blocks)
        ]
        sites += [
            AttentionSite(f"single_transformer_blocks.{j}.attn", b.attn, n + j, "self", HunyuanVideoCoreAttnProcessor,
                          JOINT, JOINT)
            for j, b in enumerate(model.single_transformer_blocks)
        ]
        return sites

    def linear_sites(self, model: torch.nn.Module) -> list[LinearSite]:
        n = self._n_dual(model)
        sites = [s for i, b in enumerate(model.transformer_blocks)
                 for s in block_linear_sites(f"transformer_blocks.{i}", b, i, DUAL_STREAM_LINEARS)]
        return sites + [s for j, b in enumerate(model.single_transformer_blocks)
                        for s in block_linear_sites(f"single_transformer_blocks.{j}", b, n + j, SINGLE_STREAM_LINEARS,
                                                        JOINT)]

    def describe(self, model: torch.nn.Module) -> dict[str, Any]:
        d = super().describe(model)
        d["dual_stream_layers"] = self._n_dual(model)
        d["single_stream_layers"] = len(model.single_transformer_blocks)
        return d
