"""Kaleido's quality against savings over a range of thresholds (what ``kaleido sweep`` runs).

For each ``(theta1, theta2[, low_bits[, metric]])`` point the thresholds of every op are replaced
(:func:`point_config`: the config's per-op threshold overrides are dropped) and the point's config is measured on
every (prompt, seed) against the dense video of the same seed by an evaluator - the calibration's, in this process
(:class:`~kaleido.evaluation.runs.InProcessEvaluator`: dense runs made once, Kaleido through the harness every
technique runs through) or the comparison's sweep (:class:`~kaleido.compare.config_evaluator.SweepEvaluator`: one
comparison row per (point, prompt, seed), on Dask workers, resumable) - so a threshold sweep is a list of
comparison points, not a sweep of its own (:func:`sweep_rows`).  :func:`write_outputs` writes ``sweep.csv`` (one row per point: PSNR/SSIM
means and minima, 8-bit-equivalent MAC savings per op kind and for the whole transformer,
wall-time ratio), ``sweep.json`` and ``sweep.png`` (PSNR against self-attention q.k^T and
whole-transformer savings).
"""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

from kaleido.atomic import open_atomic, write_atomic
from kaleido.metrics import json_float


def point_config(base, pt: tuple, keep_op_overrides: bool = False):
    """``base`` with the point's thresholds (and low_bits / metric when given) for every op.

    Per-op threshold overrides of ``base`` are dropped (so the point applies to all ops)
    unless ``keep_op_overrides``; per-layer overrides and everything else are kept.
    """
    reuse = dataclasses.replace(base.reuse, theta1=float(pt[0]), theta2=float(pt[1]),
                                **({"low_bits": int(pt[2])} if len(pt) > 2 else {}),
                                **({"metric": str(pt[3])} if len(pt) > 3 else {}))
    ops = base.ops if keep_op_overrides else {k: dataclasses.replace(v, reuse={}) for k, v in base.ops.items()}
    return dataclasses.replace(base, reuse=reuse, ops=ops)


def point_row(pt: tuple, cfg, m) -> dict:
    """One threshold point's summary row from its :class:`~kaleido.evaluation.runs.Measure` (``None`` columns left
    out: what the evaluator did not measure)."""
    saved = dict(m.saved_fraction)
    row = {
        "theta1": pt[0], "theta2": pt[1], "low_bits": cfg.reuse.low_bits, "metric": cfg.reuse.metric, "runs": m.runs,
        "psnr_mean_db": json_float(m.psnr_mean_db), "psnr_min_db": json_float(m.psnr_min_db),
        "ssim_mean": m.ssim_mean, "ssim_min": m.ssim_min, "max_abs_diff": m.max_abs_diff,
        "saved_whole_transformer": saved.pop("whole_transformer", 0.0),
        "saved_reusable_ops": saved.pop("reusable_ops", 0.0),
        "wall_ratio_pipeline": m.wall_ratio_pipeline, "wall_ratio_transformer": m.wall_ratio_transformer,
    }
    for op, v in sorted(saved.items()):
        row[f"saved_{op}"] = v
    return {k: v for k, v in row.items() if v is not None}


def sweep_rows(evaluator, base_cfg, points, prompts, seeds, warmup_steps: int = 2) -> list[dict]:
    """One summary row per threshold point (see the module docstring), each measured by ``evaluator``
    (``measure(config, prompts, seeds, desc=, warmup_steps=)``: progress label and untimed warm-up, which an
    in-process evaluator uses)."""
    rows = []
    for pt in points:
        cfg = point_config(base_cfg, pt)
        m = evaluator.measure(cfg, prompts, seeds, desc=f"theta {pt[0]:g}/{pt[1]:g}", warmup_steps=warmup_steps)
        rows.append(point_row(pt, cfg, m))
    return rows


def write_outputs(rows: list[dict], out: Path, title: str) -> dict[str, str]:
    """``sweep.csv``, ``sweep.json`` and ``sweep.png`` (PSNR against q.k^T and whole-transformer savings,
    each point labelled with its thresholds) of ``rows`` in ``out``; their paths by kind."""
    out.mkdir(parents=True, exist_ok=True)
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
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
