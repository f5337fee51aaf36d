"""``kaleido compare``: run (or resume) a sweep and print the comparison."""

from __future__ import annotations

import json
from pathlib import Path

import click

from kaleido.cli._paths import output_folder
from kaleido.cli._pipeline import sampler_option


class _MethodsOption(click.Option):
    """``--methods``: its help lists the registered techniques by group, read from the registry when the help is
    shown (importing the techniques only then keeps ``kaleido compare`` light to parse)."""

    def get_help_record(self, ctx):
        from kaleido.techniques.registry import GROUPS, TECHNIQUES

        by_group = {g: [n for n, t in TECHNIQUES.items() if t.group == g] for g in GROUPS}
        self.help = ("Comma-separated methods (default: all with settings for this pipeline and step count). Known: "
                     + "; ".join(f"{g}: {', '.join(ns)}" for g, ns in by_group.items() if ns) + ".")
        return super().get_help_record(ctx)


@click.command()
@click.option("--pipeline", default="tiny", show_default=True,
              help="'tiny' (the shipped miniature Wan), 'random-wan' (tiny random, for tests) or a WanPipeline folder.")
@click.option("--methods", default=None, cls=_MethodsOption)
@click.option("--prompts", "n_prompts", type=int, default=2, show_default=True, help="Number of default prompts.")
@click.option("--seeds", default="0", show_default=True, help="Comma-separated seeds.")
@click.option("--steps", type=int, default=None, help="Denoising steps (default: the pipeline's).")
@sampler_option()
@click.option("--results", "results_dir", type=click.Path(file_okay=False), default="results/compare",
              show_default=True, callback=output_folder,
              help="Directory of JSON rows (one per point; existing rows are not recomputed).")
@click.option("--scheduler", default=None, help="tcp://HOST:PORT of an existing Dask scheduler (default: a local cluster).")
@click.option("--workers", "n_workers", type=int, default=1, show_default=True, help="Local cluster worker processes (--verify: 0 re-runs in this process).")
@click.option("--plot-only", is_flag=True, help="Compute nothing; analyse the rows already in --results.")
@click.option("--json", "as_json", is_flag=True, help="Print the analysis as JSON.")
@click.option("--compact", is_flag=True, help="Before analysing, drop thumbnails and reuse profiles from every row "
              "but each setting's first prompt/seed row (what the report reads), so the folder can be committed.")
@click.option("--workloads", default="wan-1.3b-480p,hunyuan-720p", show_default=True,
              help="Comma-separated simulator workloads for the accelerator table ('none' to skip it).")
@click.option("--verify", "verify_n", type=int, default=None, metavar="N",
              help="Compute no sweep: re-run N rows per setting of --results (the same prompt/seed pairs for every "
                   "setting) with today's code and machine into a scratch folder, print each setting's largest PSNR "
                   "and saving drift against the stored rows, exit 1 when one exceeds the tolerance. Works on a "
                   "calibration's calibration_runs/ folder too.")
@click.option("--tolerance-db", type=float, default=None,
              help="--verify: largest PSNR drift (dB) that counts as reproduced [default: 0.1].")
@click.option("--tolerance-saved", type=float, default=None,
              help="--verify: largest drift of the whole-transformer saving, in percentage points [default: 0.5].")
def compare(pipeline, methods, n_prompts, seeds, steps, sampler, results_dir, scheduler, n_workers, plot_only, as_json,
            compact, workloads, verify_n, tolerance_db, tolerance_saved):
    """Sweep methods x settings x prompts x seeds on Dask; Pareto plot and matched-savings table."""
    if verify_n is not None:
        return _verify(results_dir, verify_n, tolerance_db, tolerance_saved,
                       [m.strip() for m in methods.split(",")] if methods else None, scheduler, n_workers, as_json)
    from kaleido.compare.analysis import (NEEDS_ACCELERATOR, RANK_MIN_PSNR_DB, TODAY, accelerator_speedups, aggregate,
                                          errors, fmt_pct, load_retimed, load_rows, matched_savings, pareto_figure,
                                          ranking_at_quality)
    from kaleido.compare.grids import build_points
    from kaleido.compare.sweep import run_sweep

    from kaleido.cli._pipeline import parse_seeds

    seed_list = tuple(parse_seeds(seeds))
    method_list = [m.strip() for m in methods.split(",")] if methods else None
    call = {"num_inference_steps": steps} if steps else {}
    from kaleido.tiny.pipeline import native_sampler

    if sampler is not None and sampler != native_sampler(pipeline):  # the model's own: rows keep their keys
        call["sampler"] = sampler
    results = Path(results_dir)
    failed = 0  # points whose worker died or crashed: the analysis below covers the others; exit status 1
    if not plot_only:
        try:
            notes: list[str] = []  # techniques left out of the default sweep, and why (one line each)
            points = build_points(pipeline, method_list, n_prompts, seed_list, call, notes=notes)
            for line in notes:
                click.echo(line, err=True)
            summary = run_sweep(points, results, scheduler=scheduler, n_workers=n_workers)
        except ValueError as e:
            raise click.UsageError(str(e))
        click.echo(f"sweep: {summary.total} points, {summary.already_done} already done, {summary.computed} computed"
                   + (f", {len(summary.failed)} failed" if summary.failed else ""), err=True)
        for line in summary.failed:
            click.echo(f"failed: {line}", err=True)
        failed = len(summary.failed)
        if failed:
            click.echo(f"the finished rows are kept in {results}: run the same command again to compute only the "
                       f"{len(summary.failed)} missing point(s)", err=True)
    if compact:
        from kaleido.compare.analysis import compact_rows

        try:
            n, before, after = compact_rows(results)
        except ValueError as e:
            raise click.UsageError(str(e))
        click.echo(f"compacted {n} rows: {before / 1e6:.1f} MB -> {after / 1e6:.1f} MB", err=True)
    try:
        rows = load_rows(results)
        retimed = load_retimed(results)
    except ValueError as e:
        raise click.UsageError(str(e))
    aggs = aggregate(rows, retimed)
    matched = matched_savings(aggs)
    from kaleido.atomic import write_atomic

    write_atomic(results / "pareto.png", pareto_figure(aggs))
    from kaleido.report.accel import MATCHED_PSNR_DB

    from kaleido.report.accel import accel_tables

    try:
        accel, why = accel_tables(rows, aggs, workloads)
        accel_matched, why_matched = accel_tables(rows, aggs, workloads, MATCHED_PSNR_DB) if accel else ([], None)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--workloads") from None
    for line in (why, why_matched):
        if line:
            click.echo(line, err=True)
    ranking = ranking_at_quality(aggs, accel=accelerator_speedups(accel_matched))  # same 30 dB level
    if as_json:
        click.echo(json.dumps({"settings": [a.to_dict() for a in aggs],
                               "matched": {m: [c.to_dict() for c in cs] for m, cs in matched.items()},
                               "ranking": {"min_psnr_db": RANK_MIN_PSNR_DB, "methods": [r.to_dict() for r in ranking]},
                               "accelerators": accel,
                               "accelerators_matched_quality": {"min_psnr_db": MATCHED_PSNR_DB, "tables": accel_matched},
                               "errors": [{"method": r["method"], "settings": r["settings"], "error": r["error"]}
                                          for r in errors(rows)]}, indent=1))
        if failed:
            raise SystemExit(1)
        return
    from rich.console import Console
    from rich.table import Table

    con = Console(width=max(Console().width, 140))
    t = Table(title=f"methods on {len({r['prompt'] for r in rows if 'prompt' in r})} prompts (rows in {results}); "
                    "intervals: 95% bootstrap over prompts")
    for c in ("method / settings", "n", "PSNR dB [95% CI]", "SSIM", "self q.k^T saved", "net of estimate",
              "transformer saved [95% CI]", "wall vs dense (runs)", "saving real on"):
        t.add_column(c, justify="left" if c in ("method / settings", "saving real on") else "right")
    for a in aggs:
        lo, hi = a.total_saved_ci95
        t.add_row(a.label, str(a.n), f"{a.psnr:.2f} [{a.psnr_ci95[0]:.2f}, {a.psnr_ci95[1]:.2f}]", f"{a.ssim:.4f}",
                  fmt_pct(a.self_qk_saved), fmt_pct(a.self_qk_saved_net),
                  f"{fmt_pct(a.total_saved)} [{fmt_pct(lo)}, {fmt_pct(hi)}]", _wall(a), a.realised)
    con.print(t)
    m = Table(title="PSNR at matched self-attention q.k^T savings")
    m.add_column("method")
    for c in next(iter(matched.values()), []):
        m.add_column(f"{100 * c.target:.0f}%", justify="right")
    for meth, cells in matched.items():
        m.add_row(meth, *[f"{c.psnr:.2f} dB" if c.psnr is not None else "n/a" for c in cells])
    con.print(m)
    r = Table(title=f"whole transformer saved at mean PSNR >= {RANK_MIN_PSNR_DB:.0f} dB (each method's best setting)")
    for c in ("#", "method", "setting", "PSNR dB [95% CI]", "transformer saved (MACs) [95% CI]",
              "wall vs dense (runs)", "measured on", "where the saving is real"):
        r.add_column(c, justify="right" if c in ("#", "PSNR dB [95% CI]", "transformer saved (MACs) [95% CI]",
                                                 "wall vs dense (runs)") else "left")
    for i, rm in enumerate(ranking, 1):
        b = rm.best
        if b is None:
            r.add_row("-", rm.method, f"not reached (best {rm.best_psnr:.2f} dB)", "", "", "", "", rm.where)
        else:
            r.add_row(str(i), rm.method, b.label, f"{b.psnr:.2f} [{b.psnr_ci95[0]:.2f}, {b.psnr_ci95[1]:.2f}]",
                      f"{fmt_pct(b.total_saved)} [{fmt_pct(b.total_saved_ci95[0])}, {fmt_pct(b.total_saved_ci95[1])}]",
                      _wall(b), b.wall_device if b.wall_ratio_runs else "", rm.where)
    con.print(r)
    con.print(f"wall vs dense: median over the runs of method time / dense time for the same prompt and seed, timed in "
              "the same process or sweep run, on the machine that ran them (below 1x is faster; '-': no dense time of "
              "the same run - `python benchmarks/retime_ranking.py RESULTS` times them back to back). "
              f"{TODAY}: the technique skips work on a CPU/GPU today; "
              f"{NEEDS_ACCELERATOR}: its saving is realised only by the hardware it was designed for (the simulated "
              "speedup over the dense array, at the same setting, where the accelerator table has one); on a CPU/GPU "
              "its float path emulates it and costs time.")
    for key in dict.fromkeys((r["method"], str(r["settings"]), r["error"]) for r in errors(rows)):
        con.print(f"[yellow]refused[/yellow] {key[0]} {key[1]}: {key[2]}")  # each refused setting once
    for tables, how in ((accel, "each method at its representative setting"),
                        (accel_matched, f"matched quality: each at its most-saving setting with PSNR >= {MATCHED_PSNR_DB:.0f} dB")):
        for t in tables:
            a = Table(title=f"accelerators on {t['workload']} ({t['steps']} steps; {how})")
            for c in ("design", "speedup vs dense array", "Kaleido over it", "PE utilisation", "MAC energy J",
                      "PSNR (runs)", "skip statistics"):
                a.add_column(c, justify="left" if c in ("design", "skip statistics") else "right")
            for d in t["designs"]:
                a.add_row(d["design"], f"{d['speedup_vs_dense']:.2f}x", f"{d['kaleido_speedup_over_it']:.2f}x",
                          fmt_pct(d["utilisation"]), f"{d['mac_energy_j']:.3g}",
                          "-" if d["psnr"] is None else f"{d['psnr']:.1f} dB ({d['psnr_runs']})", _figure_kind(d))
            con.print(a)
    con.print(f"Pareto plot: {results / 'pareto.png'}")
    if failed:
        raise SystemExit(1)


def _verify(results_dir, n, tolerance_db, tolerance_saved, methods, scheduler, n_workers, as_json) -> None:
    """``--verify N``: one table of every setting's drift, one line per flagged setting, exit 1 when any."""
    from kaleido.compare.verify import PSNR_TOLERANCE_DB, SAVED_TOLERANCE, verify_rows

    try:
        rep = verify_rows(results_dir, n, methods=methods, scheduler=scheduler, n_workers=n_workers,
                          psnr_tolerance_db=PSNR_TOLERANCE_DB if tolerance_db is None else tolerance_db,
                          saved_tolerance=SAVED_TOLERANCE if tolerance_saved is None else tolerance_saved / 100,
                          log=lambda line: click.echo(line, err=True))
    except ValueError as e:
        raise click.UsageError(str(e))
    except RuntimeError as e:  # points lost to dead workers: one line, exit 1
        raise click.ClickException(str(e))
    if as_json:
        click.echo(json.dumps(rep.to_dict(), indent=1))
    else:
        from rich.console import Console
        from rich.table import Table

        t = Table(title=f"{rep.results}: {len(rep.settings)} settings re-run against their stored rows "
                        f"(tolerance {rep.psnr_tolerance_db} dB, {100 * rep.saved_tolerance:.2f} pp)")
        for c in ("setting", "rows", "largest PSNR drift dB", "largest saving drift pp", "environment then -> now"):
            t.add_column(c, justify="right" if c in ("rows", "largest PSNR drift dB", "largest saving drift pp") else "left")
        for d in rep.settings:
            t.add_row(("[red]FLAG[/red] " if d.flagged else "") + d.label, str(d.checked), f"{d.psnr_drift_db:.3f}",
                      f"{100 * d.saved_drift:.2f}", d.environment)
        Console(width=max(Console().width, 140)).print(t)
        for dd in rep.dense:
            diff = "no stored reference" if dd.max_abs_diff is None else f"max |difference| {dd.max_abs_diff:.3g}"
            click.echo(f"dense reference, prompt {dd.prompt!r} seed {dd.seed}: {diff}")
    for d in rep.flagged:
        click.echo(f"drift: {d.label}: {'; '.join(d.why)}", err=True)
    click.echo(f"verify: {len(rep.settings)} settings, {len(rep.flagged)} beyond tolerance", err=True)
    if rep.flagged:
        raise SystemExit(1)


def _wall(a) -> str:
    """A setting's median wall-time ratio against dense with its paired runs (``-``: none paired)."""
    from kaleido.compare.analysis import fmt_ratio

    return "-" if not a.wall_ratio_runs else f"{fmt_ratio(a.wall_ratio)} ({a.wall_ratio_runs})"


def _figure_kind(d: dict) -> str:
    """Short label of where a design's skip statistics came from (the report and --json give the full source)."""
    if "replayed" in d:
        return "TRACE-REPLAYED, utilisation costs" if d["replayed"] else "UPPER BOUND (no trace in row)"
    return d["source"] if d["source"] == "dense" else d["source"].split(" on the ")[0]
