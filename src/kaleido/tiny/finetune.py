"""A second resolution of the miniature pipeline: the shipped transformer fine-tuned at a larger token grid.

The paper finds Kaleido's gain grows from 480p to 720p (1.5x in each spatial dimension). To ask that of
the miniature model, :func:`run_finetune` renders the same data at ``size`` px (96: 17 x 96 x 96 video,
latents 5 x 24 x 24 = 2,880 tokens, the 480p -> 720p step from the shipped 5 x 16 x 16), encodes it once
with the **shipped** VAE and normalises it with the shipped latent statistics (the pipeline undoes exactly
those), and trains the shipped transformer further by flow matching
(:func:`kaleido.tiny.train_transformer.train_transformer`, ``init_from`` the shipped weights). RoPE
positions beyond 16 are new to it. VAE, text encoder, tokenizer and scheduler are shared: the variant
ships only its transformer (``kaleido/assets/tiny-wan-<size>/transformer``) and
:func:`kaleido.tiny.pipeline.load_pipeline` (``"tiny-96"``) assembles the rest from the shipped pipeline.

``out_dir`` layout (each stage resumable, the data and noise of step *i* depend only on ``(seed, i)``)::

    latents/       train.* / val.* at ``size`` px (safetensors + json), recipe.json
    transformer/   ckpt/, ema/, log.jsonl, config.json (as ``kaleido train-tiny``)
    variant/       transformer/ (the EMA weights, diffusers layout) and variant.json

``python -m kaleido.tiny.finetune --out runs/tiny-96 --budget-minutes 40`` is the shipped run's command
(docs/model-card.md, "tiny-96").
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from kaleido.atomic import write_atomic
from kaleido.tiny.train_transformer import TransformerTrainConfig, train_transformer


def _finetune_transformer_config() -> TransformerTrainConfig:
    # fine-tuning, not training: a third of the shipped recipe's peak learning rate, a short warm-up,
    # few validations (each costs ~16 forward passes per sigma at 2,880 tokens), no direction-word probe
    return TransformerTrainConfig(steps=700, lr=3e-4, warmup=20, val_every=200, val_clips=16, word_probe=False,
                                  ckpt_every=50)


@dataclass
class FinetuneConfig:
    out_dir: str = "runs/tiny-96"
    #: clip size in pixels; the shipped VAE downsamples by 4, so 96 -> a 24 x 24 latent grid
    size: int = 96
    seed: int = 0
    n_train_procedural: int = 480
    n_train_real: int = 96
    n_val_procedural: int = 24
    n_val_real: int = 8
    clip_frames: int = 17
    #: the pipeline folder whose VAE encodes the clips and whose transformer starts the run
    #: (``None``: the shipped one)
    base: str | None = None
    transformer: TransformerTrainConfig = field(default_factory=_finetune_transformer_config)

    def __post_init__(self) -> None:
        self.transformer.out_dir = str(Path(self.out_dir) / "transformer")
        self.transformer.seed = self.seed

    def base_folder(self) -> Path:
        from kaleido.tiny.pipeline import tiny_pipeline_path

        return Path(self.base) if self.base else tiny_pipeline_path()

    def validate(self) -> None:
        if self.size < 16 or self.size % 16:
            raise ValueError(f"size={self.size} must be a multiple of 16 (the VAE downsamples by 4 and the latent grid "
                             "must be even)")
        if self.n_train_procedural < 1 or self.n_val_procedural < 1:
            raise ValueError("n_train_procedural and n_val_procedural must be >= 1")
        if self.n_train_real < 0 or self.n_val_real < 0:
            raise ValueError("n_train_real and n_val_real must be >= 0")
        if (self.clip_frames - 1) % 4:
            raise ValueError(f"clip_frames={self.clip_frames} must be 4k + 1 (the VAE's causal time compression)")
        self.transformer.validate()


def _latent_sets(cfg: FinetuneConfig, vae, progress: bool):
    from kaleido.tiny.latents import LatentSet, build_latent_set
    from kaleido.tiny.train import _cached_set_matches, _record_recipe

    root = Path(cfg.out_dir) / "latents"
    kw = dict(num_frames=cfg.clip_frames, size=cfg.size)
    recipe = dict(kw, n_train=[cfg.n_train_procedural, cfg.n_train_real], n_val=[cfg.n_val_procedural, cfg.n_val_real],
                  seed=cfg.seed, base=str(cfg.base_folder()))
    if (root / "val.json").exists():
        _cached_set_matches(root, "train+val", recipe)
        return LatentSet.load(root / "train"), LatentSet.load(root / "val")
    train = build_latent_set(vae, cfg.n_train_procedural, cfg.n_train_real, "train", cfg.seed, progress, **kw)
    val = build_latent_set(vae, cfg.n_val_procedural, cfg.n_val_real, "heldout", cfg.seed + 1, progress, **kw)
    root.mkdir(parents=True, exist_ok=True)
    train.save(root / "train")
    val.save(root / "val")
    _record_recipe(root, "train+val", recipe)
    return train, val


def run_finetune(cfg: FinetuneConfig, progress: bool = True, stop_after: str | None = None) -> Path:
    """Encode the clips at ``cfg.size``, fine-tune the base transformer on them and export the variant;
    returns the variant folder (``out_dir/variant``), or ``out_dir`` when ``stop_after == "latents"``."""
    from kaleido.tiny.pipeline import load_pipeline

    cfg.validate()
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "finetune_config.json", json.dumps(asdict(cfg), indent=1))
    base = cfg.base_folder()
    pipe = load_pipeline(str(base))
    pipe.set_progress_bar_config(disable=True)
    t0 = time.time()
    train, val = _latent_sets(cfg, pipe.vae.eval(), progress)
    latents_s = time.time() - t0
    if stop_after == "latents":
        return out
    cfg.transformer.init_from = str(base / "transformer")
    t1 = time.time()
    ema = train_transformer(cfg.transformer, train, val, pipe, pipe.vae.config.latents_mean,
                            pipe.vae.config.latents_std, progress=progress)
    return export_variant(cfg, ema, timing={"latents_s": round(latents_s, 1), "transformer_s": round(time.time() - t1, 1)})


def export_variant(cfg: FinetuneConfig, transformer, target: str | Path | None = None, timing: dict | None = None) -> Path:
    """Save ``transformer`` (diffusers layout, safetensors) and ``variant.json`` (size, base, training record)
    to ``target`` (default ``out_dir/variant``); an existing folder is replaced."""
    target = Path(target) if target is not None else Path(cfg.out_dir) / "variant"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    transformer.save_pretrained(str(target / "transformer"), safe_serialization=True)
    state = json.loads((Path(cfg.transformer.out_dir) / "ema" / "state.json").read_text())
    record = dict(size=cfg.size, num_frames=cfg.clip_frames, latent_grid=[(cfg.clip_frames - 1) // 4 + 1,
                                                                         cfg.size // 4, cfg.size // 4],
                  steps=state.get("step"), recipe=asdict(cfg), **(timing or {}))
    write_atomic(target / "variant.json", json.dumps(record, indent=1))
    return target


def main() -> None:  # pragma: no cover - the long run: python -m kaleido.tiny.finetune ...
    import argparse

    p = argparse.ArgumentParser(description="Fine-tune the shipped miniature transformer at another resolution.")
    p.add_argument("--out", default="runs/tiny-96")
    p.add_argument("--size", type=int, default=96)
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--budget-minutes", type=float, default=None, help="cap on the transformer's wall time")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--stop-after", choices=["latents"], default=None)
    p.add_argument("--export-only", action="store_true", help="export the variant from the current EMA checkpoint")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    cfg = FinetuneConfig(out_dir=a.out, size=a.size)
    if a.steps is not None:
        cfg.transformer.steps = a.steps
    if a.budget_minutes is not None:
        cfg.transformer.time_budget_s = 60 * a.budget_minutes
    cfg.__post_init__()
    if a.export_only:
        from kaleido.tiny.checkpoint import load_checkpoint
        from kaleido.tiny.pipeline import load_pipeline

        ema = load_pipeline(str(cfg.base_folder())).transformer
        load_checkpoint(Path(cfg.transformer.out_dir) / "ema", ema, None)
        print(export_variant(cfg, ema.eval()))
        return
    print(run_finetune(cfg, stop_after=a.stop_after))


if __name__ == "__main__":
    main()
