"""``kaleido train-tiny``: train the miniature Wan text-to-video pipeline (VAE, then transformer).

Examples::

    kaleido train-tiny                         # the shipped model's recipe (~80 min on 2 cores)
    kaleido train-tiny --preset smoke --out /tmp/t   # end to end in seconds (a test uses this)
    kaleido train-tiny --ship                  # ... then copy the result into the package
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import click

#: largest shipped pipeline folder allowed (issue 3)
SHIP_LIMIT_BYTES = 40 * 2**20


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def make_config(preset: str, out: str, seed: int, vae_steps: int | None, transformer_steps: int | None,
                budget_minutes: float | None):
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


@click.command("train-tiny")
@click.option("--out", default="runs/tiny", show_default=True, help="Work folder (checkpoints, logs, latents).")
@click.option("--preset", type=click.Choice(["full", "smoke"]), default="full", show_default=True,
              help="full: the shipped recipe; smoke: a few steps of a toy-sized model (seconds).")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--vae-steps", type=click.IntRange(min=1), default=None, help="Override the VAE step count.")
@click.option("--transformer-steps", type=click.IntRange(min=1), default=None, help="Override the transformer steps.")
@click.option("--budget-minutes", type=click.FloatRange(min=0.1), default=None,
              help="Wall-clock cap; training stops (with a checkpoint) when a stage's share runs out.")
@click.option("--threads", type=click.IntRange(min=1), default=2, show_default=True, help="torch threads.")
@click.option("--stop-after", type=click.Choice(["vae", "latents"]), default=None, help="Stop after this stage.")
@click.option("--ship", is_flag=True, help="Copy the finished pipeline into the package (src/kaleido/assets/tiny-wan).")
@click.option("--quiet", is_flag=True, help="No progress bars.")
def train_tiny(out, preset, seed, vae_steps, transformer_steps, budget_minutes, threads, stop_after, ship, quiet):
    """Train the tiny Wan pipeline (resumes from the checkpoints in --out)."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import torch

    from kaleido.tiny.pipeline import tiny_pipeline_path
    from kaleido.tiny.train import run_training

    torch.set_num_threads(threads)
    cfg = make_config(preset, out, seed, vae_steps, transformer_steps, budget_minutes)
    result = run_training(cfg, progress=not quiet, stop_after=stop_after)
    click.echo(f"done: {result}")
    if ship:
        if stop_after is not None:
            raise click.UsageError("--ship needs the full run; drop --stop-after")
        size = folder_bytes(result)
        if size > SHIP_LIMIT_BYTES:
            raise click.ClickException(f"pipeline is {size / 2**20:.1f} MiB, over the 40 MiB limit; shrink the model")
        target = tiny_pipeline_path()
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(result, target)
        click.echo(f"shipped {size / 2**20:.1f} MiB to {target}")
