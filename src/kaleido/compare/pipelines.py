"""Pipelines the comparison runs on, by name.

* ``"random-wan"``: a tiny *randomly initialised* ``WanPipeline`` built in code (no
  download, no files): the development and test pipeline.  Its videos are noise, but
  every baseline and Kaleido see exactly the same model, prompt embeddings and seed.
* ``"tiny"``: the miniature trained Wan pipeline shipped with Kaleido
  (:func:`kaleido.tiny.pipeline.load_pipeline`).
* a local directory: ``WanPipeline.from_pretrained(path)`` (safetensors only).
"""

from __future__ import annotations

import os
from pathlib import Path


#: The random pipeline: :func:`kaleido.integrations.testing.tiny_random_wan_pipeline` (2 blocks, 2 heads x 24
#: channels, RoPE 8/8/8, 80 tokens for 17x64x64) with these transformer settings.
RANDOM_WAN_TRANSFORMER = dict(freq_dim=32, ffn_dim=96)

#: Generation settings that suit the random pipeline: 17 frames of 64x64 pixels
#: -> latent 5x8x8 after the VAE (4x temporal, 8x spatial) -> 5x4x4 = 80 tokens after patchify.
RANDOM_WAN_CALL = dict(height=64, width=64, num_frames=17, num_inference_steps=4, guidance_scale=1.0)


def build_random_wan_pipeline(seed: int = 0):
    """A tiny random ``WanPipeline`` on CPU, float32; identical for the same ``seed``."""
    from kaleido.integrations.testing import tiny_random_wan_pipeline

    pipe = tiny_random_wan_pipeline(seed, **RANDOM_WAN_TRANSFORMER)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def pipeline_fingerprint(name: str) -> str:
    """Identity of the weights behind ``name``: a hash of the transformer's safetensors files.

    Part of every sweep point's key, so rows computed on another checkpoint (a re-shipped
    model, a retrained folder) never mix with the current ones.
    """
    import hashlib

    if name == "random-wan":
        return "random-wan:" + hashlib.sha256(repr(["testing.tiny_random_wan_pipeline", sorted(RANDOM_WAN_TRANSFORMER.items())]).encode()).hexdigest()[:12]
    if name == "tiny":
        from kaleido.tiny.pipeline import tiny_pipeline_path

        folder = tiny_pipeline_path()
    else:
        folder = Path(os.path.expanduser(name))
    files = sorted((folder / "transformer").glob("*.safetensors"))
    if not files:
        raise ValueError(f"pipeline {name!r}: no transformer/*.safetensors under {folder} to fingerprint")
    h = hashlib.sha256()
    for f in files:
        h.update(f.read_bytes())
    return f"{name}:{h.hexdigest()[:16]}"


def load_pipeline(name: str):
    """``(pipeline, default call kwargs)`` for ``name``: ``random-wan``, ``tiny`` or a local directory."""
    if name == "random-wan":
        return build_random_wan_pipeline(), dict(RANDOM_WAN_CALL)
    if name == "tiny":
        try:
            from kaleido.tiny import pipeline as tiny_pipeline
        except ImportError as e:  # the miniature model ships with kaleido.tiny
            raise ValueError(f"pipeline 'tiny' needs kaleido.tiny.pipeline, which failed to import ({e}); "
                             "use --pipeline random-wan") from None
        pipe = tiny_pipeline.load_pipeline("tiny")
        pipe.set_progress_bar_config(disable=True)
        return pipe, tiny_pipeline.TINY_DEMO.to_dict()
    path = Path(os.path.expanduser(name))
    if path.is_dir():
        from diffusers import WanPipeline

        pipe = WanPipeline.from_pretrained(str(path), use_safetensors=True)
        pipe.set_progress_bar_config(disable=True)
        return pipe, {}
    raise ValueError(f"unknown pipeline {name!r}: use 'random-wan', 'tiny' or a local WanPipeline directory")
