"""``kaleido sweep``: quality against savings over a range of thresholds (:mod:`kaleido.compare.threshold_sweep`)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from kaleido.cli._paths import output_folder
from kaleido.cli._pipeline import generation_options


def _parse_points(text: str) -> list[tuple]:
    """``THETA1:THETA2[:LOW_BITS[:METRIC]]`` items separated by commas."""
    pts = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        try:
            parts = item.split(":")
            if not 2 <= len(parts) <= 4:
                raise ValueError
            pt = [float(parts[0]), float(parts[1])]
            if len(parts) >= 3:
                pt.append(int(parts[2]))
            if len(parts) == 4:
                pt.append(parts[3])
            pts.append(tuple(pt))
        except ValueError:
            raise click.BadParameter(
                f"threshold point {item!r}: write THETA1:THETA2[:LOW_BITS[:METRIC]] items separated by commas, "
                "e.g. '0:0,1:4,2:8,8:16:5,4:8:4:mean_abs'",
                param_hint="--points",
            ) from None
    if not pts:
        raise click.BadParameter("give at least one THETA1:THETA2 point", param_hint="--points")
    return pts


@click.command()
@click.option("--model", default="tiny", show_default=True, help="'tiny' or 'tiny-96' (shipped), a local pipeline folder, or a hub id.")
@click.option("--points", default="0:0,0.5:2,1:4,2:4,2:8,3:8,4:8", show_default=True,
              help="THETA1:THETA2 pairs (int8 units), comma-separated.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help="Base KaleidoConfig (its thresholds are replaced per point).")
@click.option("--prompts", "n_prompts", type=click.IntRange(1, 8), default=8, show_default=True,
              help="How many of the 8 evaluation prompts.")
@click.option("--seeds", "n_seeds", type=click.IntRange(1), default=2, show_default=True)
@click.option("--workers", type=click.IntRange(0), default=0, show_default=True,
              help="0: run the points in this process (with --device / --dtype); N: as comparison rows on N local "
                   "Dask worker processes (CPU, fp32), kept in --results-dir so a rerun computes only what is missing.")
@click.option("--scheduler", default=None, help="A Dask scheduler address (tcp://HOST:PORT) to run the points on.")
@click.option("--results-dir", "results_dir", type=click.Path(file_okay=False), default=None, callback=output_folder,
              help="Where the points' comparison rows are kept with --workers / --scheduler (default: rows/ in --out).")
@generation_options
@click.option("--out", "out_dir", type=click.Path(file_okay=False), required=True, callback=output_folder)
def sweep(model, points, config_path, n_prompts, n_seeds, workers, scheduler, results_dir, steps, sampler, frames, height,
          width, out_dir, device, dtype):
    """PSNR/SSIM against MAC savings over threshold points -> sweep.csv, sweep.json, sweep.png."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    from kaleido.techniques.kaleido_reuse import KaleidoConfig
    from kaleido.cli._pipeline import load_pipeline_arg
    from kaleido.compare.threshold_sweep import point_config, sweep_rows, write_outputs
    from kaleido.evaluation.generate import EVAL_PROMPTS, settings_for

    pts = _parse_points(points)
    try:
        base = KaleidoConfig.load(config_path) if config_path else KaleidoConfig()
        for pt in pts:
            point_config(base, pt)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--config/--points") from None
    settings = settings_for(model, num_inference_steps=steps, num_frames=frames, height=height, width=width,
                            sampler=sampler)
    if results_dir and not (workers or scheduler):
        raise click.UsageError("--results-dir keeps the rows of points run on Dask workers; add --workers N (or "
                               "--scheduler), or leave --results-dir out to run the sweep in this process")
    if workers or scheduler:
        from kaleido.compare.config_evaluator import SweepEvaluator

        if device != "cpu" or dtype != "fp32":
            raise click.UsageError(f"--device {device} --dtype {dtype}: the Dask workers run on the CPU in fp32; "
                                   "add --workers 0 to run the sweep in this process")
        runs = Path(results_dir) if results_dir else Path(out_dir) / "rows"
        evaluator = SweepEvaluator(model, runs, settings.call_kwargs(), scheduler, max(1, workers))
        click.echo(f"points run through the Dask sweep ({scheduler or f'{max(1, workers)} local worker(s)'}), "
                   f"rows in {runs}", err=True)
    else:
        from kaleido.evaluation.runs import InProcessEvaluator

        evaluator = InProcessEvaluator(load_pipeline_arg(model, device, dtype, settings), settings, progress=None)
    try:
        with evaluator:
            rows = sweep_rows(evaluator, base, pts, list(EVAL_PROMPTS[:n_prompts]), list(range(n_seeds)))
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    title = f"{model}: {n_prompts} prompts x {n_seeds} seeds, {settings.num_inference_steps} steps"
    files = write_outputs(rows, Path(out_dir), title)
    for r in rows:
        click.echo(
            f"theta {r['theta1']:g}/{r['theta2']:g} ({r['low_bits']} bits, {r['metric']}): PSNR "
            f"{r['psnr_mean_db'] if isinstance(r['psnr_mean_db'], str) else round(r['psnr_mean_db'], 2)} dB, "
            f"SSIM {r['ssim_mean']:.4f}, self_qk saved {100 * r.get('saved_self_qk', 0):.1f}%, "
            f"whole {100 * r['saved_whole_transformer']:.1f}%"
        )
    click.echo(f"-> {files['csv']}, {files['png']}")
