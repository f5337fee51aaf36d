"""``kaleido sweep``: quality against savings over a range of thresholds.

For each ``(theta1, theta2[, low_bits[, metric]])`` point the thresholds of every op are
replaced (the config's per-op threshold overrides are dropped), every (prompt, seed) is generated with Kaleido and compared
with the dense video of the same seed (dense runs are made once).  Writes
``sweep.csv`` (one row per point: PSNR/SSIM means and minima, 8-bit-equivalent MAC
savings per op kind and for the whole transformer, wall-time ratio), ``sweep.json``
and ``sweep.png`` (PSNR against self-attention q.k^T and whole-transformer savings).
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import click

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


def point_config(base, pt: tuple, keep_op_overrides: bool = False):
    """``base`` with the point's thresholds (and low_bits / metric when given) for every op.

    Per-op threshold overrides of ``base`` are dropped (so the point applies to all ops)
    unless ``keep_op_overrides``; per-layer overrides and everything else are kept.
    """
    import dataclasses

    reuse = dataclasses.replace(base.reuse, theta1=float(pt[0]), theta2=float(pt[1]),
                                **({"low_bits": int(pt[2])} if len(pt) > 2 else {}),
                                **({"metric": str(pt[3])} if len(pt) > 3 else {}))
    ops = base.ops if keep_op_overrides else {k: dataclasses.replace(v, reuse={}) for k, v in base.ops.items()}
    return dataclasses.replace(base, reuse=reuse, ops=ops)


def sweep_rows(pipe, base_cfg, points, prompts, seeds, settings, progress=None, warmup_steps: int = 2) -> list[dict]:
    """One summary row per threshold point (see the module docstring)."""
    from kaleido.integrations.evaluation import aggregate, dense_runs, kaleido_runs

    dense = dense_runs(pipe, prompts, seeds, settings, progress=progress, warmup_steps=warmup_steps)
    rows = []
    for pt in points:
        cfg = point_config(base_cfg, pt)
        t1, t2 = pt[0], pt[1]
        results = kaleido_runs(pipe, cfg, dense, settings, progress=progress, desc=f"theta {t1:g}/{t2:g}", lpips=False,
                               warmup_steps=warmup_steps)
        agg = aggregate(results)
        per_op = agg["reuse"]["per_op"]
        row = {
            "theta1": t1, "theta2": t2, "low_bits": cfg.reuse.low_bits, "metric": cfg.reuse.metric, "runs": agg["runs"],
            "psnr_mean_db": agg["psnr_mean_db"], "psnr_min_db": agg["psnr_min_db"],
            "ssim_mean": agg["ssim_mean"], "ssim_min": agg["ssim_min"], "max_abs_diff": agg["max_abs_diff"],
            "saved_whole_transformer": agg["reuse"]["whole_transformer"]["saved_fraction"],
            "saved_reusable_ops": agg["reuse"]["reusable_ops"]["saved_fraction"],
            "wall_ratio_pipeline": agg["wall_ratio_pipeline"],
            "wall_ratio_transformer": agg["wall_ratio_transformer"],
        }
        for op, d in sorted(per_op.items()):
            row[f"saved_{op}"] = d["saved_fraction"]
        rows.append(row)
    return rows


def write_outputs(rows: list[dict], out: Path, title: str) -> dict[str, str]:
    out.mkdir(parents=True, exist_ok=True)
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    from kaleido.atomic import open_atomic, write_atomic

    with open_atomic(out / "sweep.csv", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        for r in rows:
            w.writerow(r)
    write_atomic(out / "sweep.json", json.dumps(rows, indent=1))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    finite = [r for r in rows if r["psnr_mean_db"] != "inf"]
    for key, label, marker in (("saved_self_qk", "self-attn q.k^T", "o"), ("saved_whole_transformer", "whole transformer", "s")):
        pts = [(100 * r[key], r["psnr_mean_db"]) for r in finite if key in r]
        if pts:
            xs, ys = zip(*pts)
            ax.plot(xs, ys, marker=marker, label=label)
            for r, x, y in zip(finite, xs, ys):
                ax.annotate(f"{r['theta1']:g}/{r['theta2']:g}" + (f"/{r['low_bits']}b" if r.get("low_bits", 4) != 4 else "")
                            + ("/mean" if r.get("metric") == "mean_abs" else ""), (x, y), fontsize=7, textcoords="offset points", xytext=(3, 3))
    ax.axhline(30, color="grey", lw=0.8, ls="--")
    ax.set_xlabel("8-bit-equivalent MACs saved (%)")
    ax.set_ylabel("PSNR vs dense (dB)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    with open_atomic(out / "sweep.png", "wb") as f:
        fig.savefig(f, format="png", dpi=120)
    plt.close(fig)
    return {"csv": str(out / "sweep.csv"), "json": str(out / "sweep.json"), "png": str(out / "sweep.png")}


@click.command()
@click.option("--model", default="tiny", show_default=True, help="'tiny', a local pipeline folder, or a hub id.")
@click.option("--points", default="0:0,0.5:2,1:4,2:4,2:8,3:8,4:8", show_default=True,
              help="THETA1:THETA2 pairs (int8 units), comma-separated.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help="Base KaleidoConfig (its thresholds are replaced per point).")
@click.option("--prompts", "n_prompts", type=click.IntRange(1, 8), default=8, show_default=True,
              help="How many of the 8 evaluation prompts.")
@click.option("--seeds", "n_seeds", type=click.IntRange(1), default=2, show_default=True)
@generation_options
@click.option("--out", "out_dir", type=click.Path(file_okay=False), required=True)
def sweep(model, points, config_path, n_prompts, n_seeds, steps, frames, height, width, out_dir, device, dtype):
    """PSNR/SSIM against MAC savings over threshold points -> sweep.csv, sweep.json, sweep.png."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    from kaleido.integrations import KaleidoConfig
    from kaleido.cli._pipeline import load_pipeline_arg
    from kaleido.integrations.evaluation import EVAL_PROMPTS, settings_for

    pts = _parse_points(points)
    try:
        base = KaleidoConfig.load(config_path) if config_path else KaleidoConfig()
        for pt in pts:
            point_config(base, pt)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--config/--points") from None
    settings = settings_for(model, steps=steps, frames=frames, height=height, width=width)
    pipe = load_pipeline_arg(model, device, dtype)
    rows = sweep_rows(pipe, base, pts, list(EVAL_PROMPTS[:n_prompts]), list(range(n_seeds)), settings)
    title = f"{model}: {n_prompts} prompts x {n_seeds} seeds, {settings.steps} steps"
    files = write_outputs(rows, Path(out_dir), title)
    for r in rows:
        click.echo(
            f"theta {r['theta1']:g}/{r['theta2']:g} ({r['low_bits']} bits, {r['metric']}): PSNR {r['psnr_mean_db'] if isinstance(r['psnr_mean_db'], str) else round(r['psnr_mean_db'], 2)} dB, "
            f"SSIM {r['ssim_mean']:.4f}, self_qk saved {100 * r.get('saved_self_qk', 0):.1f}%, "
            f"whole {100 * r['saved_whole_transformer']:.1f}%"
        )
    click.echo(f"-> {files['csv']}, {files['png']}")
