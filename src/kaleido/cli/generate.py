"""``kaleido generate``: the same video dense and with Kaleido, side by side, with metrics and trace.

Writes into ``--out``::

    dense.mp4 / dense.gif          the stock pipeline's video
    kaleido.mp4 / kaleido.gif      the same seed with Kaleido applied to the transformer
    side_by_side.mp4 / .gif        [dense | Kaleido | |difference| x4], each panel labelled in a band above
    trace.safetensors              the Kaleido run's ReuseTrace (docs/trace-format.md)
    metrics.json                   PSNR/SSIM per frame and mean, LPIPS or why not, reuse
                                   statistics per op kind and whole transformer, wall times
    config.yaml                    the KaleidoConfig used

With several ``--prompt`` / ``--seed`` values each pair gets a folder ``run-<i>`` and
``metrics.json`` adds the means over all runs (:func:`kaleido.evaluation.runs.save_runs`).
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from kaleido.cli._paths import output_folder
from kaleido.cli._pipeline import generation_options


def _print_table(reuse: dict) -> None:
    """Per-op reuse table on stderr (rich)."""
    from rich.console import Console
    from rich.table import Table

    t = Table(title="Kaleido reuse (all runs)", title_justify="left")
    for col in ("op", "FULL", "PARTIAL", "COMPUTE", "dense MACs", "8-bit-eq. saved"):
        t.add_column(col, justify="left" if col == "op" else "right")
    rows = list(reuse["per_op"].items()) + [("reusable ops", reuse["reusable_ops"]), ("whole transformer", reuse["whole_transformer"])]
    for op, d in rows:
        f = d.get("mode_fractions") or d["mac_fractions"]
        t.add_row(op, f"{100 * f['full']:.1f}%", f"{100 * f['partial']:.1f}%", f"{100 * f['compute']:.1f}%",
                  f"{d['dense_macs']:.3g}", f"{100 * d['saved_fraction']:.1f}%")
    Console(stderr=True).print(t)


@click.command()
@click.option("--model", default="tiny", show_default=True, help="'tiny' or 'tiny-96' (shipped), a local pipeline folder, or a hub id.")
@click.option("--prompt", "prompts", multiple=True, help="Prompt (repeatable). Default: the first evaluation prompt.")
@click.option("--seed", "seeds", type=int, multiple=True, help="Seed (repeatable). Default: 0.")
@generation_options
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help="KaleidoConfig YAML/JSON, or a packaged config by name (tiny-default, calibrated-tiny) "
                   "(default: the model's calibrated config - tiny: tiny-default - else KaleidoConfig()).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), required=True, callback=output_folder,
              help="Output folder.")
@click.option("--guidance", type=float, default=None, help="Classifier-free guidance scale.")
@click.option("--fps", type=click.IntRange(1, 120), default=8, show_default=True)
@click.option("--scale", type=click.IntRange(1, 16), default=None, help="Nearest upscaling of written videos (tiny: 4).")
@click.option("--record-maps", is_flag=True, help="Keep every full mode map in the trace (large).")
@click.option("--threads", type=click.IntRange(1), default=None, help="torch CPU threads (default: torch's).")
@click.option("--warmup-steps", type=click.IntRange(0), default=2, show_default=True,
              help="Untimed warm-up generation (this many steps) before the timed dense and Kaleido runs; 0: none.")
def generate(model, prompts, seeds, steps, sampler, config_path, out_dir, device, dtype, frames, height, width, guidance, fps,
             scale, record_maps, threads, warmup_steps):
    """Generate a video dense and with Kaleido (same seed); write videos, metrics.json and the trace."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import dataclasses

    import torch

    from kaleido.techniques.kaleido_reuse import KaleidoConfig
    from kaleido.cli._pipeline import load_pipeline_arg
    from kaleido.evaluation.generate import EVAL_PROMPTS, dense_runs, settings_for
    from kaleido.evaluation.runs import kaleido_runs, save_runs
    from kaleido.techniques.kaleido_reuse.config import default_config
    from kaleido.tiny.pipeline import TINY_VARIANTS

    if threads:
        torch.set_num_threads(threads)
    try:
        cfg = KaleidoConfig.load(config_path) if config_path else default_config(model)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--config") from None
    if record_maps:
        cfg = dataclasses.replace(cfg, record_maps=True)
    settings = settings_for(model, num_inference_steps=steps, num_frames=frames, height=height, width=width,
                            sampler=sampler,
                            guidance_scale=guidance)
    prompts = list(prompts) or [EVAL_PROMPTS[0]]
    seeds = list(seeds) or [0]
    scale = scale if scale is not None else (4 if model in TINY_VARIANTS else 1)

    click.echo(f"loading {model!r} on {device} ({dtype})", err=True)
    pipe = load_pipeline_arg(model, device, dtype, settings)
    from kaleido.cli._prompts import echo_prompt_problems, prompt_warnings_shown
    from kaleido.models.adapter import adapter_for

    try:
        adapter_for(pipe.transformer)
    except ValueError as e:
        raise click.ClickException(str(e)) from None

    echo_prompt_problems(pipe, prompts, settings.max_sequence_length)
    click.echo(f"generating {len(prompts) * len(seeds)} video(s) dense, then with Kaleido", err=True)
    with prompt_warnings_shown():
        dense = dense_runs(pipe, prompts, seeds, settings, warmup_steps=warmup_steps)
        try:
            results = kaleido_runs(pipe, cfg, dense, settings, warmup_steps=warmup_steps)
        except ValueError as e:
            raise click.ClickException(str(e)) from None

    click.echo(results[0].extra["patched"]["summary"], err=True)
    out = Path(out_dir)
    metrics = save_runs(results, out, cfg, settings, {
        "model": model, "pipeline_class": type(pipe).__name__, "transformer_class": type(pipe.transformer).__name__,
        "device": device, "dtype": dtype,
    }, fps=fps, scale=scale, warmup_steps=warmup_steps)
    agg = metrics["aggregate"]
    _print_table(agg["reuse"])
    qk = agg["reuse"]["per_op"].get("self_qk", {})
    click.echo(
        f"PSNR {agg['psnr_mean_db'] if isinstance(agg['psnr_mean_db'], str) else round(agg['psnr_mean_db'], 2)} dB, "
        f"SSIM {agg['ssim_mean']:.4f}; self-attn q.k^T saved {100 * qk.get('saved_fraction', 0):.1f}%, "
        f"whole transformer {100 * agg['reuse']['whole_transformer']['saved_fraction']:.1f}% "
        f"(8-bit-equivalent MACs); wall time x{agg['wall_ratio_pipeline']:.2f} of dense "
        f"(one run each{', after a warm-up' if warmup_steps else ''}; benchmarks/bench_generate.py times repeats) -> {out}"
    )
