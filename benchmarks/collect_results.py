"""Collect the miniature-pipeline evaluation into docs/results/ (numbers copied from the measurement files).

    python benchmarks/collect_results.py EVAL_DIR SWEEP_DIR BENCH_JSON [--out docs/results]

EVAL_DIR: ``kaleido generate`` output (8 prompts x 2 seeds, default config); SWEEP_DIR:
``kaleido sweep`` output; BENCH_JSON: ``benchmarks/bench_generate.py --json`` output.
Writes ``tiny_eval_default.json`` (aggregate + per-run means), the sweep CSV/PNG/JSON,
``bench_generate.json``, one side-by-side MP4, and ``summary.md`` (tables from these files).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from kaleido.atomic import write_atomic


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("eval_dir")
    ap.add_argument("sweep_dir")
    ap.add_argument("bench_json")
    ap.add_argument("--out", default="docs/results")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    m = json.loads((Path(a.eval_dir) / "metrics.json").read_text())
    runs = [{k: r[k] for k in ("prompt", "seed", "psnr_mean_db", "ssim_mean", "max_abs_diff", "lpips", "wall_s")}
            | {"self_qk_saved": r["reuse"]["per_op"]["self_qk"]["saved_fraction"],
               "whole_saved": r["reuse"]["whole_transformer"]["saved_fraction"]} for r in m["runs"]]
    ev = {k: m[k] for k in ("model", "pipeline_class", "transformer_class", "device", "dtype", "settings",
                            "kaleido_config", "metric_definitions", "apply_report", "aggregate")}
    ev["runs"] = runs
    write_atomic(out / "tiny_eval_default.json", json.dumps(ev, indent=1))
    for f in ("sweep.csv", "sweep.json", "sweep.png"):
        shutil.copy(Path(a.sweep_dir) / f, out / f)
    bench = json.loads(Path(a.bench_json).read_text())
    write_atomic(out / "bench_generate.json", json.dumps(bench, indent=1))
    video = Path(a.eval_dir) / "run-0" / "side_by_side.mp4"
    if video.exists():
        shutil.copy(video, out / "side_by_side_run0.mp4")

    agg = ev["aggregate"]
    lines = ["# Miniature pipeline: Kaleido's default config against dense", "",
             f"{agg['runs']} runs (8 prompts x 2 seeds), {ev['settings']['steps']} steps, "
             f"{ev['settings']['frames']} frames {ev['settings']['height']}x{ev['settings']['width']}, "
             f"guidance {ev['settings']['guidance']}, {ev['device']} {ev['dtype']}.", "",
             "| metric | value |", "|---|---|",
             f"| PSNR mean (dB) | {agg['psnr_mean_db'] if isinstance(agg['psnr_mean_db'], str) else round(agg['psnr_mean_db'], 2)} |",
             f"| PSNR min over runs (dB) | {agg['psnr_min_db'] if isinstance(agg['psnr_min_db'], str) else round(agg['psnr_min_db'], 2)} |",
             f"| SSIM mean | {agg['ssim_mean']:.4f} |", f"| SSIM min over runs | {agg['ssim_min']:.4f} |",
             f"| LPIPS | {runs[0]['lpips'].get('status')}: {runs[0]['lpips'].get('reason', '')} |",
             f"| wall time Kaleido / dense (pipeline, all runs) | {agg['wall_ratio_pipeline']:.2f} |",
             f"| wall time Kaleido / dense (transformer) | {agg['wall_ratio_transformer']:.2f} |", "",
             "8-bit-equivalent MACs saved per op kind (all runs; FULL/PARTIAL/COMPUTE = fractions of (row, group) decisions):", "",
             "| op | saved | FULL | PARTIAL | COMPUTE | dense MACs |", "|---|---|---|---|---|---|"]
    reuse = agg["reuse"]
    for op, d in list(reuse["per_op"].items()) + [("reusable ops", reuse["reusable_ops"]), ("whole transformer", reuse["whole_transformer"])]:
        f = d.get("mode_fractions") or d["mac_fractions"]
        lines.append(f"| {op} | {100 * d['saved_fraction']:.1f}% | {100 * f['full']:.1f}% | {100 * f['partial']:.1f}% | "
                     f"{100 * f['compute']:.1f}% | {d['dense_macs']:.3g} |")
    lines += ["", "## Threshold sweep (sweep.csv, sweep.png)", "",
              "| theta1/theta2 (bits, metric) | PSNR (dB) | SSIM | self-attn q.k^T saved | whole transformer saved |",
              "|---|---|---|---|---|"]
    for r in json.loads((out / "sweep.json").read_text()):
        p = r["psnr_mean_db"]
        lines.append(f"| {r['theta1']:g}/{r['theta2']:g} ({r['low_bits']}, {r['metric']}) | "
                     f"{p if isinstance(p, str) else round(p, 2)} | {r['ssim_mean']:.4f} | "
                     f"{100 * r.get('saved_self_qk', 0):.1f}% | {100 * r['saved_whole_transformer']:.1f}% |")
    lines += ["", "## Wall time (bench_generate.json)", "",
              f"Median of {bench['repeats']} alternating repeats, {bench['threads']} thread(s), config "
              f"{_bench_config(bench)} (the tables above are `KaleidoConfig()`): pipeline "
              f"{bench['median_s']['dense_pipeline']:.2f} s dense vs {bench['median_s']['kaleido_pipeline']:.2f} s Kaleido "
              f"(ratio {bench['ratio_pipeline']:.2f}, target <= {bench.get('target_ratio', 1.5):g}); "
              f"transformer ratio {bench['ratio_transformer']:.2f}."]
    write_atomic(out / "summary.md", "\n".join(lines) + "\n")
    print("\n".join(lines))


def _bench_config(bench: dict) -> str:
    """The config the wall-time benchmark ran: its ``--config``, or the model's packaged default by name."""
    name = bench.get("config", "the model's default")
    if name == "the model's default":
        try:
            from kaleido.tiny.pipeline import TINY_VARIANTS

            name = TINY_VARIANTS[bench["model"]].config or name
        except (ImportError, KeyError):
            return name
    return f"`{name}`"


if __name__ == "__main__":
    main()
