"""``kaleido characterize``: how alike neighbouring tokens are, per layer, head, group, axis and step.

Generates each (prompt, seed) with the stock computation and an observer on every reuse
operand (q and k after RoPE, cross-attention q, projection and feed-forward inputs), and
writes into ``--out``: ``characterization.json`` (the tables, best axes, and whether the
paper's claim holds on this model), the heatmaps, and ``summary.md``
(:mod:`kaleido.characterize.report`).
"""

from __future__ import annotations

import os

import click

from kaleido.cli._paths import output_folder
from kaleido.cli._pipeline import generation_options, parse_seeds


@click.command()
@click.option("--model", default="tiny", show_default=True, help="'tiny' or 'tiny-96' (shipped), a local pipeline folder, or a hub id.")
@click.option("--prompts", "prompts_path", type=click.Path(dir_okay=False), required=True,
              help="Prompt file: one prompt per line, or a JSON list.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), required=True, callback=output_folder,
              help="Output folder.")
@click.option("--seeds", default="0", show_default=True, help="Comma-separated seeds.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help="KaleidoConfig whose group kinds, chunk sizes, metric and quantisation are measured.")
@generation_options
@click.option("--threads", type=click.IntRange(1), default=1, show_default=True, help="torch CPU threads.")
def characterize(model, prompts_path, out_dir, seeds, config_path, steps, sampler, frames, height, width, device, dtype,
                 threads):
    """Characterise the latent space: Delta and cosine between neighbours along t, h, w."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import torch

    from kaleido.characterize import Characterization, characterize_runs
    from kaleido.cli._pipeline import load_pipeline_arg
    from kaleido.techniques.kaleido_reuse import KaleidoConfig
    from kaleido.evaluation.generate import settings_for
    from kaleido.prompts import read_prompts

    torch.set_num_threads(threads)
    try:
        prompts = read_prompts(prompts_path)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--prompts") from None
    seed_list = parse_seeds(seeds)
    try:
        base = KaleidoConfig.load(config_path) if config_path else KaleidoConfig()
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--config") from None
    settings = settings_for(model, num_inference_steps=steps, num_frames=frames, height=height, width=width,
                            sampler=sampler)
    pipe = load_pipeline_arg(model, device, dtype, settings)
    pipe.set_progress_bar_config(disable=True)
    from kaleido.cli._prompts import echo_prompt_problems, prompt_warnings_shown
    from kaleido.evaluation.generate import show_progress

    echo_prompt_problems(pipe, prompts, settings.max_sequence_length)
    try:
        with prompt_warnings_shown():
            rec, _ = characterize_runs(pipe, prompts, seed_list, settings, base, progress=show_progress(None))
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    ch = Characterization.from_recorder(rec, {
        "model": model, "transformer_class": type(pipe.transformer).__name__, "prompts": prompts,
        "seeds": seed_list, "settings": settings.to_dict(), "device": device, "dtype": dtype,
    })
    from kaleido.characterize.report import summary_markdown, write_report

    files = write_report(ch, out_dir)
    click.echo(summary_markdown(ch))
    click.echo("-> " + ", ".join(str(p) for p in files))
