"""``kaleido train-tiny``: train the miniature Wan text-to-video pipeline (VAE, then transformer).

Examples::

    kaleido train-tiny                         # the shipped model's recipe (~80 min on 2 cores)
    kaleido train-tiny --preset smoke --out /tmp/t   # end to end in seconds (a test uses this)
    kaleido train-tiny --ship                  # ... then copy the result into the package
"""

from __future__ import annotations

import os

import click

from kaleido.cli._paths import output_folder
from kaleido.tiny.recipe import make_config, ship_pipeline


@click.command("train-tiny")
@click.option("--out", default="runs/tiny", show_default=True, type=click.Path(file_okay=False),
              callback=output_folder, help="Work folder (checkpoints, logs, latents).")
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

    from kaleido.tiny.train import run_training

    torch.set_num_threads(threads)
    cfg = make_config(preset, out, seed, vae_steps, transformer_steps, budget_minutes)
    result = run_training(cfg, progress=not quiet, stop_after=stop_after)
    click.echo(f"done: {result}")
    if ship:
        if stop_after is not None:
            raise click.UsageError("--ship needs the full run; drop --stop-after")
        try:
            target, size = ship_pipeline(result)
        except ValueError as e:
            raise click.ClickException(str(e)) from None
        click.echo(f"shipped {size / 2**20:.1f} MiB to {target}")
