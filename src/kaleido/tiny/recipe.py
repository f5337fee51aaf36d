"""The training recipes of the miniature Wan pipeline and how a trained one ships (``kaleido train-tiny``).

* :func:`make_config` - the :class:`~kaleido.tiny.train.TinyTrainConfig` of a preset (``full``: the
  shipped model's recipe; ``smoke``: a few steps of a toy-sized model), with step and time overrides;
* :func:`ship_pipeline` - copy a trained pipeline folder into the package (``kaleido/assets/tiny-wan``), refused
  over :data:`SHIP_LIMIT_BYTES`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

#: largest shipped pipeline folder allowed (the pipeline ships inside the package)
SHIP_LIMIT_BYTES = 40 * 2**20


def folder_bytes(path: Path) -> int:
    """Total size of the files under ``path``."""
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def make_config(preset: str, out: str, seed: int, vae_steps: int | None, transformer_steps: int | None,
                budget_minutes: float | None):
    """The training config of ``preset`` (``"full"`` or ``"smoke"``) writing into ``out``; ``vae_steps`` /
    ``transformer_steps`` override the step counts, ``budget_minutes`` caps the wall time (40% VAE, 55%
    transformer)."""
    from kaleido.tiny.build import TransformerArch
    from kaleido.tiny.train import TinyTrainConfig
    from kaleido.tiny.train_vae import VaeArch

    cfg = TinyTrainConfig(out_dir=out, seed=seed)
    if preset == "smoke":
        cfg.n_train_procedural, cfg.n_train_real, cfg.n_val_procedural, cfg.n_val_real = 4, 2, 2, 1
        cfg.clip_frames, cfg.clip_size = 5, 32
        cfg.vae.steps, cfg.vae.batch, cfg.vae.frames, cfg.vae.crop, cfg.vae.render_size = 2, 2, 5, 16, 32
        cfg.vae.early_frames, cfg.vae.early_steps = 5, 0
        cfg.vae.finetune_steps, cfg.vae.finetune_frames = 1, 5
        cfg.vae.arch = VaeArch(base_dim=8)
        cfg.transformer.steps, cfg.transformer.batch, cfg.transformer.val_every = 3, 2, 3
        cfg.transformer.arch = TransformerArch(num_layers=1, ffn_dim=64)
    if vae_steps is not None:
        cfg.vae.steps = vae_steps
    if transformer_steps is not None:
        cfg.transformer.steps = transformer_steps
    if budget_minutes is not None:
        # 40% of the wall-clock budget to the VAE, the rest (less latent encoding) to the transformer
        cfg.vae.time_budget_s = 0.4 * budget_minutes * 60
        cfg.transformer.time_budget_s = 0.55 * budget_minutes * 60
    cfg.__post_init__()
    cfg.vae.warmup = min(cfg.vae.warmup, max(1, cfg.vae.steps // 10))
    cfg.transformer.warmup = min(cfg.transformer.warmup, max(1, cfg.transformer.steps // 10))
    return cfg


def ship_pipeline(folder: str | Path) -> tuple[Path, int]:
    """Copy the trained pipeline ``folder`` over the shipped one (:func:`kaleido.tiny.pipeline.tiny_pipeline_path`);
    returns ``(where, bytes)``. A folder over :data:`SHIP_LIMIT_BYTES` is refused (``ValueError``)."""
    from kaleido.tiny.pipeline import tiny_pipeline_path

    size = folder_bytes(Path(folder))
    if size > SHIP_LIMIT_BYTES:
        raise ValueError(f"pipeline is {size / 2**20:.1f} MiB, over the {SHIP_LIMIT_BYTES // 2**20} MiB limit; "
                         "shrink the model")
    target = tiny_pipeline_path()
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(folder, target)
    return target, size
