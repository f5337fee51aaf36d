"""Tiny random diffusers video pipelines built in code (no download), for tests and smoke runs.

* :func:`tiny_random_wan_pipeline` - a complete ``WanPipeline`` (word-level tokenizer,
  small UMT5 encoder, small ``AutoencoderKLWan``, ``WanTransformer3DModel``); it can be
  saved with ``save_pretrained`` and loaded back by path.
* :func:`tiny_random_cogvideox_pipeline` / :func:`tiny_random_hunyuan_video_pipeline` -
  the real pipeline classes with a tiny VAE and transformer and no text encoder: call
  them with ``prompt_embeds`` (:func:`cogvideox_call_kwargs`, :func:`hunyuan_call_kwargs`).

Weights are random (seeded), so the videos are noise-like; they exercise the plumbing
(contexts, CFG batching, step counting, grids), not quality.
"""

from __future__ import annotations

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
