"""Tiny random diffusers vDiT transformers built in code (no download), with matching inputs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pytest
import torch


def smooth_latent(shape: tuple[int, ...], seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g)


@dataclass
class TinyCase:
    """A tiny transformer and a function giving its forward kwargs for (batch, timestep, frames-constant)."""

    name: str
    build: Callable[[], torch.nn.Module]
    inputs: Callable[..., dict]
    has_rope: bool


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


CASES = [
    TinyCase("wan", _wan, _wan_inputs, True),
    TinyCase("hunyuan_video", _hunyuan, _hunyuan_inputs, True),
    TinyCase("cogvideox_5b_style", _cog(True), _cog_inputs_factory(True), True),
    TinyCase("cogvideox_2b_style", _cog(False), _cog_inputs_factory(False), False),
]


@pytest.fixture(params=CASES, ids=[c.name for c in CASES])
def case(request) -> TinyCase:
    return request.param


#: models whose self-attention sequence holds text tokens beside the video grid
#: (Wan keeps text in the cross-attention keys only)
JOINT_CASES = [c for c in CASES if not c.name.startswith("wan")]


@pytest.fixture(params=JOINT_CASES, ids=[c.name for c in JOINT_CASES])
def joint_case(request) -> TinyCase:
    return request.param


@pytest.fixture
def wan_model() -> torch.nn.Module:
    """A fresh tiny random ``WanTransformer3DModel`` (seeded)."""
    return _wan()
