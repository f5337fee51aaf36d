"""Kaleido's quality against savings over a range of thresholds (what ``kaleido sweep`` runs).

For each ``(theta1, theta2[, low_bits[, metric]])`` point the thresholds of every op are replaced
(:func:`point_config`: the config's per-op threshold overrides are dropped), every (prompt, seed)
is generated with Kaleido and compared with the dense video of the same seed (dense runs are made
once, :func:`sweep_rows`).  :func:`write_outputs` writes ``sweep.csv`` (one row per point: PSNR/SSIM
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


def sweep_rows(pipe, base_cfg, points, prompts, seeds, settings, progress=None, warmup_steps: int = 2) -> list[dict]:
    """One summary row per threshold point (see the module docstring); dense runs are made once."""
    from kaleido.evaluation.generate import dense_runs
    from kaleido.evaluation.runs import aggregate, kaleido_runs

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
