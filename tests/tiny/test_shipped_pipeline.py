"""The shipped tiny WanPipeline loads offline and generates deterministically from a seed."""

import numpy as np
import pytest
import torch

from kaleido.tiny.pipeline import TINY_DEMO, load_pipeline, resolve_model, tiny_pipeline_path


@pytest.fixture(scope="module")
def pipe():
    p = load_pipeline("tiny")
    p.set_progress_bar_config(disable=True)
    return p


def test_shipped_folder_is_a_small_real_wan_pipeline(pipe):
    from diffusers import AutoencoderKLWan, FlowMatchEulerDiscreteScheduler, WanPipeline, WanTransformer3DModel
    from transformers import UMT5EncoderModel

    path = tiny_pipeline_path()
    assert (path / "model_index.json").exists() and (path / "tokenizer" / "vocab.txt").exists()
    assert sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) <= 40 * 2**20
    assert not list(path.rglob("*.bin")) and not list(path.rglob("*.pt"))  # safetensors only
    assert isinstance(pipe, WanPipeline)
    assert isinstance(pipe.vae, AutoencoderKLWan) and isinstance(pipe.transformer, WanTransformer3DModel)
    assert isinstance(pipe.text_encoder, UMT5EncoderModel)
    assert isinstance(pipe.scheduler, FlowMatchEulerDiscreteScheduler)
    rope = pipe.transformer.rope
    assert (rope.t_dim, rope.h_dim, rope.w_dim) == (24, 20, 20)
    # demo grid: 17 frames x 64x64 -> latents 5x16x16 -> 5x16x16 tokens with patch (1, 1, 1)
    pt, ph, pw = pipe.transformer.config.patch_size
    t = ((TINY_DEMO.num_frames - 1) // pipe.vae_scale_factor_temporal + 1) // pt
    h = TINY_DEMO.height // pipe.vae_scale_factor_spatial // ph
    w = TINY_DEMO.width // pipe.vae_scale_factor_spatial // pw
    assert (t, h, w) == (5, 16, 16)
    assert TINY_DEMO.num_frames >= 17 and 20 <= TINY_DEMO.num_inference_steps <= 30 and TINY_DEMO.guidance_scale > 1


def test_generation_is_deterministic_per_seed(pipe):
    kwargs = dict(height=32, width=32, num_frames=5, num_inference_steps=2, guidance_scale=3.0, output_type="np")
    a = pipe("a red circle moving left on a plain background", generator=torch.Generator().manual_seed(0), **kwargs)
    b = pipe("a red circle moving left on a plain background", generator=torch.Generator().manual_seed(0), **kwargs)
    c = pipe("a red circle moving left on a plain background", generator=torch.Generator().manual_seed(1), **kwargs)
    assert a.frames.shape == (1, 5, 32, 32, 3)
    assert np.array_equal(a.frames, b.frames)
    assert not np.allclose(a.frames, c.frames)
    assert 0.0 <= a.frames.min() and a.frames.max() <= 1.0


def test_resolve_model_rejects_bad_names(tmp_path):
    with pytest.raises(ValueError, match="model_index.json"):
        resolve_model(str(tmp_path))
    with pytest.raises(ValueError, match="hub id"):
        resolve_model("not a model")
    assert resolve_model("Wan-AI/Wan2.1-T2V-1.3B-Diffusers") == "Wan-AI/Wan2.1-T2V-1.3B-Diffusers"
