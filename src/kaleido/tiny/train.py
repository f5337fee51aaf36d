"""The whole tiny-model training run, stage by stage, each stage resumable.

``out_dir`` layout::

    vae/           VAE checkpoint (ckpt/), log.jsonl, config.json
    latents/       train.* and val.* latent sets (safetensors + json), stats.json, recipe.json
                   (the data options each set was encoded with; a cache made with others is refused)
    transformer/   transformer checkpoint (ckpt/, ema/), log.jsonl, config.json
    pipeline/      the finished diffusers folder (what ships as assets/tiny-wan)

Stages: (1) train the VAE; (2) encode training / held-out clips once, set the VAE's
``latents_mean`` / ``latents_std``; (3) train the transformer on cached latents; (4) save
the ``WanPipeline``. A stage whose output exists is loaded, not redone.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from kaleido.atomic import write_atomic
from kaleido.tiny.build import assemble_pipeline, build_text_encoder, build_tokenizer, save_pipeline
from kaleido.tiny.checkpoint import load_checkpoint
from kaleido.tiny.latents import LatentSet, build_latent_set, channel_stats
from kaleido.tiny.train_transformer import TransformerTrainConfig, train_transformer
from kaleido.tiny.train_vae import VaeTrainConfig, build_vae, train_vae


@dataclass
class TinyTrainConfig:
    out_dir: str = "runs/tiny"
    seed: int = 0
    n_train_procedural: int = 800
    n_train_real: int = 150
    #: a number: share of moving draws in the transformer's procedural clips, each drawn in all
    #: four directions (``data.direction_group_batch``); ``None`` (the shipped recipe):
    #: independent clips, 70% moving
    moving_fraction: float | None = None
    #: moving objects of the transformer's clips leave a fading trail (``data.render_clip``)
    trail: bool = False
    #: moving objects of the transformer's clips are filmed by a tracking camera (``data.render_clip``)
    pan: bool = False
    #: clip size of the low-resolution set the transformer's first ``lowres_steps`` steps use
    lowres_size: int = 32
    n_val_procedural: int = 64
    n_val_real: int = 16
    clip_frames: int = 17
    clip_size: int = 64
    vae: VaeTrainConfig = field(default_factory=VaeTrainConfig)
    transformer: TransformerTrainConfig = field(default_factory=TransformerTrainConfig)

    def __post_init__(self) -> None:
        self.vae.out_dir = str(Path(self.out_dir) / "vae")
        self.transformer.out_dir = str(Path(self.out_dir) / "transformer")
        self.vae.seed = self.seed
        self.transformer.seed = self.seed

    def validate(self) -> None:
        for name in ("n_train_procedural", "n_val_procedural"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)} must be >= 1")
        if self.lowres_size < 16 or self.lowres_size % 16:
            raise ValueError(f"lowres_size={self.lowres_size} must be a multiple of 16 (the VAE downsamples by 4 and "
                             "the latent grid must be even)")
        if self.moving_fraction is not None and not 0.0 <= self.moving_fraction <= 1.0:
            raise ValueError(f"moving_fraction={self.moving_fraction} must be in [0, 1] (or None)")
        for name in ("n_train_real", "n_val_real"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}={getattr(self, name)} must be >= 0")
        self.vae.validate()
        self.transformer.validate()

    def to_dict(self) -> dict:
        return asdict(self)

    def clip_recipe(self, size: int) -> dict:
        """Keyword arguments of ``build_latent_set`` for the transformer's clips at ``size`` px."""
        return dict(num_frames=self.clip_frames, size=size, moving_fraction=self.moving_fraction, trail=self.trail,
                    pan=self.pan)


def load_trained_vae(cfg: TinyTrainConfig):
    vae = build_vae(cfg.vae.arch, cfg.seed)
    load_checkpoint(Path(cfg.vae.out_dir) / "ckpt", vae, None)
    return vae.eval()


def _cached_set_matches(root: Path, name: str, recipe: dict) -> None:
    """Refuse a cached latent set encoded with another recipe than ``recipe`` (``root/recipe.json``
    records each set's recipe when it is encoded); warn when the cache predates that record."""
    record = root / "recipe.json"
    if not record.exists():
        warnings.warn(f"{root} has no recipe.json, so the cached latent set {name!r} cannot be checked against "
                      f"this run's data options {recipe}; delete {root} to re-encode it", stacklevel=3)
        return
    cached = json.loads(record.read_text()).get(name)
    if cached != recipe:
        raise ValueError(f"{root}: the cached latent set {name!r} was encoded with {cached}, this run asks for "
                         f"{recipe}; use a new --out or delete {root} to re-encode")


def _record_recipe(root: Path, name: str, recipe: dict) -> None:
    record = root / "recipe.json"
    recipes = json.loads(record.read_text()) if record.exists() else {}
    recipes[name] = recipe
    write_atomic(record, json.dumps(recipes, indent=1))


def prepare_latents(cfg: TinyTrainConfig, vae, progress: bool = True) -> tuple[LatentSet, LatentSet, dict]:
    """Encode (or load) the training and held-out latent sets; returns them and the channel stats."""
    root = Path(cfg.out_dir) / "latents"
    stats_file = root / "stats.json"
    kw = cfg.clip_recipe(cfg.clip_size)
    recipe = dict(kw, n_train=[cfg.n_train_procedural, cfg.n_train_real], n_val=[cfg.n_val_procedural, cfg.n_val_real],
                  seed=cfg.seed)
    if stats_file.exists():
        _cached_set_matches(root, "train+val", recipe)
        return LatentSet.load(root / "train"), LatentSet.load(root / "val"), json.loads(stats_file.read_text())
    train = build_latent_set(vae, cfg.n_train_procedural, cfg.n_train_real, "train", cfg.seed, progress, **kw)
    val = build_latent_set(vae, cfg.n_val_procedural, cfg.n_val_real, "heldout", cfg.seed + 1, progress, **kw)
    mean, std = channel_stats(train.latents)
    stats = {"latents_mean": [float(x) for x in mean], "latents_std": [float(x) for x in std]}
    train.save(root / "train")
    val.save(root / "val")
    _record_recipe(root, "train+val", recipe)
    write_atomic(stats_file, json.dumps(stats, indent=1))
    return train, val, stats


def prepare_lowres_latents(cfg: TinyTrainConfig, vae, progress: bool = True) -> LatentSet | None:
    """Encode (or load) the low-resolution training set (``lowres_size`` clips, same recipe and
    seed as the full-size set); ``None`` when the transformer has no low-resolution steps."""
    if not cfg.transformer.lowres_steps:
        return None
    root = Path(cfg.out_dir) / "latents"
    stem = root / "train_lowres"
    kw = cfg.clip_recipe(cfg.lowres_size)
    recipe = dict(kw, n_train=[cfg.n_train_procedural, cfg.n_train_real], seed=cfg.seed)
    if stem.with_suffix(".json").exists():
        _cached_set_matches(root, "train_lowres", recipe)
        return LatentSet.load(stem)
    low = build_latent_set(vae, cfg.n_train_procedural, cfg.n_train_real, "train", cfg.seed, progress, **kw)
    low.save(stem)
    _record_recipe(root, "train_lowres", recipe)
    return low


def run_training(cfg: TinyTrainConfig, progress: bool = True, stop_after: str | None = None) -> Path:
    """Run every stage (or up to ``stop_after`` in {"vae", "latents"}); returns the pipeline folder."""
    cfg.validate()
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "train_config.json", json.dumps(cfg.to_dict(), indent=1))
    vae = train_vae(cfg.vae, progress=progress)
    if stop_after == "vae":
        return out
    train, val, stats = prepare_latents(cfg, vae, progress)
    train_lowres = prepare_lowres_latents(cfg, vae, progress)
    vae.register_to_config(**stats)
    if stop_after == "latents":
        return out
    tokenizer = build_tokenizer()
    text_encoder = build_text_encoder(len(tokenizer), seed=cfg.seed)
    pipe = assemble_pipeline(vae, None, text_encoder, tokenizer)
    transformer = train_transformer(cfg.transformer, train, val, pipe, stats["latents_mean"], stats["latents_std"],
                                    progress=progress, train_lowres=train_lowres)
    return export_pipeline(cfg, transformer=transformer, vae=vae)


def export_pipeline(cfg: TinyTrainConfig, transformer=None, vae=None, target: str | Path | None = None) -> Path:
    """Save the pipeline from the current checkpoints (EMA transformer) to ``target`` (default out/pipeline)."""
    from kaleido.tiny.build import build_transformer

    if vae is None:
        vae = load_trained_vae(cfg)
        stats = json.loads((Path(cfg.out_dir) / "latents" / "stats.json").read_text())
        vae.register_to_config(**stats)
    tokenizer = build_tokenizer()
    text_encoder = build_text_encoder(len(tokenizer), seed=cfg.seed)
    if transformer is None:
        transformer = build_transformer(cfg.transformer.arch, text_encoder.config.d_model, vae.config.z_dim, cfg.seed)
        load_checkpoint(Path(cfg.transformer.out_dir) / "ema", transformer, None)
    pipe = assemble_pipeline(vae, transformer.eval(), text_encoder, tokenizer)
    target = Path(target) if target is not None else Path(cfg.out_dir) / "pipeline"
    return save_pipeline(pipe, target)


def main() -> None:  # pragma: no cover - background runs: python -m kaleido.tiny.train --stage ...
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("--out", default="runs/tiny")
    p.add_argument("--stop-after", default=None)
    p.add_argument("--vae-steps", type=int, default=VaeTrainConfig.steps)
    p.add_argument("--vae-finetune-steps", type=int, default=VaeTrainConfig.finetune_steps)
    p.add_argument("--transformer-steps", type=int, default=TransformerTrainConfig.steps)
    p.add_argument("--transformer-batch", type=int, default=4)
    p.add_argument("--budget-s", type=float, default=None, help="transformer time budget")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--export-only", action="store_true", help="save the pipeline from the current checkpoints")
    p.add_argument("--export-to", default=None)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    cfg = TinyTrainConfig(out_dir=a.out)
    cfg.vae.steps = a.vae_steps
    cfg.vae.finetune_steps = a.vae_finetune_steps
    cfg.transformer.steps = a.transformer_steps
    cfg.transformer.batch = a.transformer_batch
    cfg.transformer.time_budget_s = a.budget_s
    cfg.__post_init__()
    if a.export_only:
        print(export_pipeline(cfg, target=a.export_to))
        return
    print(run_training(cfg, stop_after=a.stop_after))


if __name__ == "__main__":
    main()
