"""``kaleido report``: the comparison as one self-contained HTML file."""

from __future__ import annotations

from pathlib import Path

import click

from kaleido.cli._paths import output_file

#: Rows committed with the repository (the miniature-pipeline sweep); see docs/baselines.md.
SHIPPED_RESULTS = Path("docs/results/compare")


@click.command()
@click.option("--out", "out_path", type=click.Path(dir_okay=False), default="report.html", show_default=True,
              callback=output_file)
@click.option("--results", "results_dir", type=click.Path(file_okay=False), default=None,
              help=f"Rows of a `kaleido compare` sweep (default: {SHIPPED_RESULTS} from the repository; "
                   "if absent, a small sweep on the random pipeline runs first into results/report-sweep).")
@click.option("--workers", type=int, default=1, show_default=True, help="Worker processes for that fallback sweep.")
@click.option("--workloads", default="wan-1.3b-480p,wan-1.3b-720p,hunyuan-720p", show_default=True,
              help="Comma-separated simulator workloads for the accelerator comparison.")
@click.option("--accel-steps", type=int, default=None, help="Denoising steps of those workloads (default: each model's).")
def report(out_path, results_dir, workers, workloads, accel_steps):
    """Write one HTML file: Pareto, matched-savings table, frames, accelerators, the paper's figures."""
    from kaleido.report import build_report

    note = ""
    if results_dir is None:
        results_dir = SHIPPED_RESULTS
        if not any(Path(results_dir).glob("*.json")):
            from kaleido.compare.grids import fallback_points
            from kaleido.compare.sweep import run_sweep

            results_dir = Path("results/report-sweep")
            click.echo(f"no rows in {SHIPPED_RESULTS}: running a small sweep on the random pipeline into {results_dir}",
                       err=True)
            run_sweep(fallback_points(), results_dir, n_workers=workers)
            note = "Fallback sweep on the RANDOM (untrained) pipeline: the numbers only exercise the machinery."
    try:
        path = build_report(results_dir, out_path, source_note=note,
                            workloads=tuple(w.strip() for w in workloads.split(",") if w.strip()), accel_steps=accel_steps)
    except ValueError as e:
        raise click.UsageError(str(e))
    click.echo(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB)")
