"""Load the shipped tiny Wan pipeline, a local diffusers folder, or a hub checkpoint.

``load_pipeline("tiny")`` loads the pipeline trained by ``kaleido train-tiny`` that ships inside
the package (``tiny_pipeline_path()``), offline. Any other value is a local diffusers folder or
a hub id (e.g. ``"Wan-AI/Wan2.1-T2V-1.3B-Diffusers"``), loaded the way diffusers documents for
Wan 2.1 (VAE kept in float32, the rest in ``dtype``). ``TINY_DEMO`` holds the generation settings
the tiny model was trained for.
"""

from __future__ import annotations

import importlib.resources
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import torch


@dataclass(frozen=True)
class DemoSettings:
    """Keyword arguments of ``WanPipeline.__call__`` for a demo generation."""

    height: int = 64
    width: int = 64
    num_frames: int = 17
    num_inference_steps: int = 25
    guidance_scale: float = 5.0
    negative_prompt: str = ""
    #: text tokens the prompt is padded / truncated to (``WanPipeline``'s own default is 512)
    max_sequence_length: int = 512

    def to_dict(self) -> dict:
        return asdict(self)


#: text tokens of the tiny model, in training and generation: its prompts are at most 10 words plus
#: ``</s>``; at Wan's 512 the prompt's tokens would sit among ~500 identical zero-padding keys,
#: which cross-attention must learn to outweigh (the first shipped model barely used its text)
TINY_TEXT_TOKENS = 16
#: the tiny model's demo: 17 frames x 64x64 -> latents 5x16x16 -> 5x16x16 tokens after patchify
TINY_DEMO = DemoSettings(max_sequence_length=TINY_TEXT_TOKENS)
#: Wan 2.1's published default (480p, 81 frames, 50 steps)
WAN21_DEMO = DemoSettings(height=480, width=832, num_frames=81, num_inference_steps=50, guidance_scale=5.0)


def tiny_pipeline_path() -> Path:
    """Folder of the shipped tiny pipeline (``model_index.json`` + safetensors)."""
    return Path(str(importlib.resources.files("kaleido") / "assets" / "tiny-wan"))


def resolve_model(model: str) -> str:
    """``"tiny"`` -> the shipped folder; an existing local folder -> itself; otherwise a hub id."""
    if model == "tiny":
        path = tiny_pipeline_path()
        if not (path / "model_index.json").exists():
            raise ValueError(f"the tiny pipeline is missing at {path}; run `kaleido train-tiny --ship` to build it")
        return str(path)
    if os.path.isdir(model):
        if not (Path(model) / "model_index.json").exists():
            raise ValueError(f"{model!r} is a folder without model_index.json; pass a diffusers pipeline folder")
        return model
    if model.count("/") != 1 or model.startswith((".", "/")):
        raise ValueError(f"model {model!r} is neither 'tiny', an existing folder, nor a hub id like 'org/name'")
    return model


def load_pipeline(model: str = "tiny", device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32):
    """A ``diffusers.WanPipeline`` on ``device``.

    model: ``"tiny"`` (shipped, offline), a local diffusers folder, or a hub id (needs network
    unless cached; with ``HF_HUB_OFFLINE=1`` it fails at once instead of retrying).
    """
    from diffusers import AutoencoderKLWan, WanPipeline

    source = resolve_model(model)
    if model == "tiny" or os.path.isdir(source) and _is_small(source):
        pipe = WanPipeline.from_pretrained(source, torch_dtype=dtype)
    else:
        # diffusers' recipe for Wan 2.1: the VAE stays in float32 for quality
        vae = AutoencoderKLWan.from_pretrained(source, subfolder="vae", torch_dtype=torch.float32)
        pipe = WanPipeline.from_pretrained(source, vae=vae, torch_dtype=dtype)
    return pipe.to(device)


def _is_small(folder: str, limit_bytes: int = 200 * 2**20) -> bool:
    total = sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())
    return total < limit_bytes
