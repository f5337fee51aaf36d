"""Tiny random diffusers video pipelines built in code (no download), for tests and smoke runs.

* :func:`tiny_random_wan_pipeline` - a complete ``WanPipeline`` (word-level tokenizer,
  small UMT5 encoder, small ``AutoencoderKLWan``, ``WanTransformer3DModel``); it can be
  saved with ``save_pretrained`` and loaded back by path.
* :func:`tiny_random_cogvideox_pipeline` / :func:`tiny_random_hunyuan_video_pipeline` -
  the real pipeline classes with a tiny VAE and transformer and no text encoder: call
  them with ``prompt_embeds`` (:func:`cogvideox_call_kwargs`, :func:`hunyuan_call_kwargs`);
* :data:`TRANSFORMER_CASES` - a tiny random transformer of every family with its forward inputs
  (:class:`TinyCase`), what the tests of every family run on.

Weights are random (seeded), so the videos are noise-like; they exercise the plumbing
(contexts, CFG batching, step counting, grids), not quality.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch


def tiny_random_wan_pipeline(seed: int = 0, num_layers: int = 2, head_dim: int = 24, heads: int = 2,
                             **transformer_overrides):
    """17 frames of 64x64 pixels -> latent 5x8x8 (4x temporal, 8x spatial) -> 5x4x4 = 80 tokens after patchify.

    ``transformer_overrides``: further ``WanTransformer3DModel`` keyword arguments (e.g. ``ffn_dim``).
    """
    from diffusers import AutoencoderKLWan, FlowMatchEulerDiscreteScheduler, WanPipeline, WanTransformer3DModel

    from kaleido.tiny.build import build_text_encoder, build_tokenizer

    tokenizer = build_tokenizer()
    text_encoder = build_text_encoder(len(tokenizer), seed=seed)
    torch.manual_seed(seed)
    vae = AutoencoderKLWan(
        base_dim=8, z_dim=4, dim_mult=[1, 1, 1, 1], num_res_blocks=1, temperal_downsample=[False, True, True],
        latents_mean=[0.0] * 4, latents_std=[1.0] * 4,
    ).eval()
    transformer = WanTransformer3DModel(**(dict(
        patch_size=(1, 2, 2), num_attention_heads=heads, attention_head_dim=head_dim, in_channels=4, out_channels=4,
        text_dim=text_encoder.config.d_model, freq_dim=16, ffn_dim=64, num_layers=num_layers, rope_max_seq_len=64,
    ) | transformer_overrides)).eval()
    scheduler = FlowMatchEulerDiscreteScheduler(shift=2.0)
    return WanPipeline(tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, transformer=transformer, scheduler=scheduler)


def tiny_random_cogvideox_pipeline(seed: int = 0, rope: bool = True):
    from diffusers import AutoencoderKLCogVideoX, CogVideoXDDIMScheduler, CogVideoXPipeline, CogVideoXTransformer3DModel

    torch.manual_seed(seed)
    vae = AutoencoderKLCogVideoX(
        in_channels=3, out_channels=3,
        down_block_types=("CogVideoXDownBlock3D",) * 4, up_block_types=("CogVideoXUpBlock3D",) * 4,
        block_out_channels=(8, 8, 8, 8), latent_channels=4, layers_per_block=1, norm_num_groups=2,
        temporal_compression_ratio=4,
    ).eval()
    transformer = CogVideoXTransformer3DModel(
        num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=4, time_embed_dim=8,
        text_embed_dim=16, num_layers=2, sample_width=8, sample_height=8, sample_frames=9, patch_size=2,
        temporal_compression_ratio=4, max_text_seq_length=6, use_rotary_positional_embeddings=rope,
    ).eval()
    return CogVideoXPipeline(tokenizer=None, text_encoder=None, vae=vae, transformer=transformer,
                             scheduler=CogVideoXDDIMScheduler())


def cogvideox_call_kwargs(seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed + 100)
    return dict(
        prompt_embeds=torch.randn(1, 6, 16, generator=g), negative_prompt_embeds=torch.randn(1, 6, 16, generator=g),
        height=64, width=64, num_frames=9, guidance_scale=6.0, max_sequence_length=6,
    )


def tiny_random_hunyuan_video_pipeline(seed: int = 0):
    from diffusers import (
        AutoencoderKLHunyuanVideo, FlowMatchEulerDiscreteScheduler, HunyuanVideoPipeline, HunyuanVideoTransformer3DModel,
    )

    torch.manual_seed(seed)
    vae = AutoencoderKLHunyuanVideo(
        in_channels=3, out_channels=3, latent_channels=4,
        down_block_types=("HunyuanVideoDownBlock3D",) * 4, up_block_types=("HunyuanVideoUpBlock3D",) * 4,
        block_out_channels=(8, 8, 8, 8), layers_per_block=1, norm_num_groups=4, spatial_compression_ratio=8,
        temporal_compression_ratio=4, mid_block_add_attention=True,
    ).eval()
    transformer = HunyuanVideoTransformer3DModel(
        in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=16, num_layers=1,
        num_single_layers=1, num_refiner_layers=1, mlp_ratio=2.0, patch_size=2, patch_size_t=1, qk_norm="rms_norm",
        guidance_embeds=True, text_embed_dim=16, pooled_projection_dim=8, rope_axes_dim=(4, 6, 6),
    ).eval()
    return HunyuanVideoPipeline(text_encoder=None, tokenizer=None, transformer=transformer, vae=vae,
                                scheduler=FlowMatchEulerDiscreteScheduler(shift=7.0), text_encoder_2=None, tokenizer_2=None)


def hunyuan_call_kwargs(seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed + 100)
    mask = torch.ones(1, 6)
    mask[:, 4:] = 0
    return dict(
        prompt_embeds=torch.randn(1, 6, 16, generator=g), pooled_prompt_embeds=torch.randn(1, 8, generator=g),
        prompt_attention_mask=mask, height=64, width=64, num_frames=9, guidance_scale=6.0,
    )


def smooth_latent(shape: tuple[int, ...], seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g)


@dataclass
class TinyCase:
    """A tiny random transformer of one family and its forward kwargs.

    ``build()`` -> the seeded transformer; ``inputs(batch=1, t=500.0, static=False, seed=0)`` -> its forward
    kwargs (``static``: every latent frame equal); ``has_rope``: whether its self-attention applies RoPE;
    ``joint``: whether its self-attention sequence holds text tokens beside the video grid (Wan keeps text in the
    cross-attention keys only).
    """

    name: str
    build: Callable[[], torch.nn.Module]
    inputs: Callable[..., dict]
    has_rope: bool
    joint: bool


def _wan():
    from diffusers import WanTransformer3DModel

    torch.manual_seed(0)
    return WanTransformer3DModel(
        patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=24, in_channels=4, out_channels=4,
        text_dim=16, freq_dim=16, ffn_dim=32, num_layers=2, rope_max_seq_len=64,
    ).eval()


def _wan_inputs(batch=1, t=500.0, static=False, seed=0):
    x = smooth_latent((batch, 4, 3, 8, 8), seed)
    if static:
        x = x[:, :, :1].expand(-1, -1, 3, -1, -1).contiguous()
    e = smooth_latent((batch, 7, 16), seed + 1)
    return dict(hidden_states=x, timestep=torch.full((batch,), t), encoder_hidden_states=e, return_dict=False)


def _hunyuan():
    from diffusers import HunyuanVideoTransformer3DModel

    torch.manual_seed(0)
    return HunyuanVideoTransformer3DModel(
        in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=16, num_layers=1,
        num_single_layers=1, num_refiner_layers=1, mlp_ratio=2.0, patch_size=2, patch_size_t=1, qk_norm="rms_norm",
        guidance_embeds=False, text_embed_dim=16, pooled_projection_dim=8, rope_axes_dim=(4, 6, 6),
    ).eval()


def _hunyuan_inputs(batch=1, t=500.0, static=False, seed=0):
    x = smooth_latent((batch, 4, 3, 8, 8), seed)
    if static:
        x = x[:, :, :1].expand(-1, -1, 3, -1, -1).contiguous()
    mask = torch.ones(batch, 5)
    mask[:, 3:] = 0  # padded text tokens
    return dict(
        hidden_states=x, timestep=torch.full((batch,), t), encoder_hidden_states=smooth_latent((batch, 5, 16), seed + 1),
        encoder_attention_mask=mask, pooled_projections=smooth_latent((batch, 8), seed + 2), return_dict=False,
    )


def _cog(rope: bool):
    def build():
        from diffusers import CogVideoXTransformer3DModel

        torch.manual_seed(0)
        return CogVideoXTransformer3DModel(
            num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=4, time_embed_dim=8,
            text_embed_dim=16, num_layers=2, sample_width=8, sample_height=8, sample_frames=9, patch_size=2,
            temporal_compression_ratio=4, max_text_seq_length=5, use_rotary_positional_embeddings=rope,
        ).eval()

    return build


def _cog_inputs_factory(rope: bool):
    def inputs(batch=1, t=500.0, static=False, seed=0):
        x = smooth_latent((batch, 3, 4, 8, 8), seed)
        if static:
            x = x[:, :1].expand(-1, 3, -1, -1, -1).contiguous()
        rot = None
        if rope:
            from diffusers.models.embeddings import get_3d_rotary_pos_embed

            rot = get_3d_rotary_pos_embed(16, None, (4, 4), 3, grid_type="slice", max_size=(4, 4))
        return dict(
            hidden_states=x, encoder_hidden_states=smooth_latent((batch, 5, 16), seed + 1),
            timestep=torch.full((batch,), t), image_rotary_emb=rot, return_dict=False,
        )

    return inputs


#: the tiny random transformer of every family (Wan; HunyuanVideo; CogVideoX with and without RoPE)
TRANSFORMER_CASES = [
    TinyCase("wan", _wan, _wan_inputs, has_rope=True, joint=False),
    TinyCase("hunyuan_video", _hunyuan, _hunyuan_inputs, has_rope=True, joint=True),
    TinyCase("cogvideox_5b_style", _cog(True), _cog_inputs_factory(True), has_rope=True, joint=True),
    TinyCase("cogvideox_2b_style", _cog(False), _cog_inputs_factory(False), has_rope=False, joint=True),
]

#: the names of the families every technique is tested on (the registry's refusals are keyed by them)
TESTED_FAMILIES: tuple[str, ...] = tuple(c.name for c in TRANSFORMER_CASES)
