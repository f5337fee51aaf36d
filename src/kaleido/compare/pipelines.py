"""Pipelines the comparison runs on, by name.

* ``"random-wan"``: a tiny *randomly initialised* ``WanPipeline`` built in code (no
  download, no files): the development and test pipeline.  Its videos are noise, but
  every baseline and Kaleido see exactly the same model, prompt embeddings and seed.
* ``"tiny"`` (the miniature trained Wan pipeline shipped with Kaleido) or a local pipeline folder:
  loaded by the one loader, :func:`kaleido.tiny.pipeline.load_pipeline`, with its errors.
"""

from __future__ import annotations

from pathlib import Path

from kaleido.generation_settings import GenerationSettings


#: The random pipeline: :func:`kaleido.models.testing.tiny_random_wan_pipeline` (2 blocks, 2 heads x 24
#: channels, RoPE 8/8/8, 80 tokens for 17x64x64) with these transformer settings.
RANDOM_WAN_TRANSFORMER = dict(freq_dim=32, ffn_dim=96)

#: Generation settings that suit the random pipeline: 17 frames of 64x64 pixels
#: -> latent 5x8x8 after the VAE (4x temporal, 8x spatial) -> 5x4x4 = 80 tokens after patchify.
RANDOM_WAN_SETTINGS = GenerationSettings(height=64, width=64, num_frames=17, num_inference_steps=4, guidance_scale=1.0)


def build_random_wan_pipeline(seed: int = 0):
    """A tiny random ``WanPipeline`` on CPU, float32; identical for the same ``seed``."""
    from kaleido.models.testing import tiny_random_wan_pipeline

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
    from kaleido.tiny.pipeline import TINY_VARIANTS, variant_transformer_path

    folder = Path(_resolve(name))
    variant = TINY_VARIANTS.get(name)
    tdir = variant_transformer_path(name) if variant is not None and variant.transformer else folder / "transformer"
    files = sorted(tdir.glob("*.safetensors"))
    if not files:
        raise ValueError(f"pipeline {name!r}: no transformer/*.safetensors under {folder} to fingerprint")
    if variant is not None and variant.distilled:  # a student's sampling schedule is part of what it is
        files.append(tdir.parent / "scheduler" / "scheduler_config.json")
    h = hashlib.sha256()
    for f in files:
        h.update(f.read_bytes())
    return f"{name}:{h.hexdigest()[:16]}"


def _resolve(name: str) -> str:
    """The folder of ``name`` (``"tiny"`` or a local pipeline folder), as the loader resolves it."""
    from kaleido.tiny.pipeline import resolve_model

    try:
        folder = resolve_model(name)
    except ValueError as e:
        raise ValueError(f"{e} (or 'random-wan', the tiny random test pipeline)") from None
    if not Path(folder).is_dir():
        raise ValueError(f"pipeline {name!r}: a comparison runs on local weights; download it "
                         f"(`hf download {name} --local-dir DIR`) and pass DIR, or use 'tiny' or 'random-wan'")
    return folder


def load_pipeline(name: str) -> tuple:
    """``(pipeline, default call kwargs)`` for ``name``: ``random-wan``, ``tiny`` or a local pipeline folder; the
    kwargs are its :class:`~kaleido.generation_settings.GenerationSettings` (``call_kwargs()``), as a sweep
    row stores them."""
    if name == "random-wan":
        return build_random_wan_pipeline(), RANDOM_WAN_SETTINGS.call_kwargs()
    from kaleido.tiny.pipeline import demo_settings
    from kaleido.tiny.pipeline import load_pipeline as load

    _resolve(name)
    pipe = load(name)
    pipe.set_progress_bar_config(disable=True)
    return pipe, demo_settings(name).call_kwargs()
