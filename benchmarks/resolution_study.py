"""Does Kaleido's gain grow with resolution? The miniature model at 5x16x16 and 5x24x24 tokens.

The paper reports Kaleido's advantage growing from 480p to 720p (1.5x in each spatial dimension). This
runs the same prompts x seeds and the same Kaleido configs on the shipped ``tiny`` pipeline (17x64x64
video, 5x16x16 tokens) and its ``tiny-96`` variant (17x96x96, 5x24x24 = 2,880 tokens; the shipped
transformer fine-tuned at that size, :mod:`kaleido.tiny.finetune`) and reports, per grid:

* the characterisation: median neighbour Delta (int8 units) of self-attention q and k per RoPE group and
  axis, with a 95% bootstrap interval over prompts;
* the default ``KaleidoConfig``: PSNR / SSIM against dense (same seed), FULL / PARTIAL / COMPUTE fractions,
  q.k^T / self-attention (q.k^T + P.V) / whole-transformer MACs saved, each with its interval;
* the threshold sweep (``kaleido.compare.threshold_sweep.point_config`` points) on a subset;
* the simulator: the default config's trace measured at 24x24 against the carry rule's prediction from the
  16x16 trace of the same prompt and seed (cycles, utilisation, energy on the miniature workload at 24x24),
  and both traces carried to Wan 1.3B 480p and HunyuanVideo 720p (a rule that is right gives the same
  figures from either);
* the accelerator designs (dense array, Kaleido, AdapTiV-, EXION-, Cambricon-D-class) at each grid, from a
  small ``kaleido compare`` sweep run on that pipeline (``kaleido.report.accel.design_table``).

The evaluation prompts (``kaleido.evaluation.generate.EVAL_PROMPTS``) were seen by no tuning or
calibration. ::

    OMP_WAIT_POLICY=PASSIVE python benchmarks/resolution_study.py --json docs/results/resolution.json \\
        --plot docs/resolution_sweep.png

``--smoke`` runs every part on one prompt, one seed and 2 steps (what the test runs).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from kaleido.metrics import bootstrap_interval

#: grid name -> the pipeline generating at it
GRIDS = {"16x16": "tiny", "24x24": "tiny-96"}
#: four of the threshold sweep's points (theta1, theta2[, low_bits]) of docs/results (every op on the point)
SWEEP_POINTS = ((8, 8), (16, 32, 6), (32, 64, 7), (48, 64, 7))
#: published workloads the carry rule is checked on
CARRY_WORKLOADS = ("wan-1.3b-480p", "hunyuan-720p")
#: the accelerator baselines' settings run at each grid (one each), and Kaleido's all-op setting beside them
DESIGN_GRID = {
    "kaleido": [dict(theta1=16, theta2=32, low_bits=6)],
    "adaptiv": [dict(tau=0.75)],
    "exion": [dict(attn_density=0.5, ffn_tau=0.05)],
    "cambricon_d": [dict(delta_bits=4)],
}
SELF_ATTN = ("self_qk", "self_pv")


def _interval(values_by_prompt: dict[str, list[float]]) -> dict:
    per_prompt = [float(np.mean(v)) for v in values_by_prompt.values()]
    lo, hi = bootstrap_interval(per_prompt)
    return {"mean": float(np.mean(per_prompt)), "ci95": [lo, hi], "prompts": len(per_prompt)}


def savings(summary: dict) -> dict:
    """Saved fractions of one trace summary: self-attention q.k^T, self-attention (q.k^T + P.V), whole transformer,
    and the FULL / PARTIAL / COMPUTE fractions of self-attention q.k^T decisions."""
    per = summary["per_op"]
    dense = sum(per[o]["dense_macs"] for o in SELF_ATTN if o in per)
    saved = sum(per[o]["dense_macs"] * per[o]["saved_fraction"] for o in SELF_ATTN if o in per)
    modes = per.get("self_qk", {}).get("mode_fractions") or {}
    return {"self_qk": per.get("self_qk", {}).get("saved_fraction", 0.0),
            "self_attention": saved / dense if dense else 0.0,
            "whole_transformer": summary["whole_transformer"]["saved_fraction"],
            "full": modes.get("full"), "partial": modes.get("partial"), "compute": modes.get("compute")}


def characterise(pipe, prompts, seeds, settings) -> tuple[list[dict], list[dict], dict]:
    """Per (prompt, seed): median Delta of self q / k per group and axis (layers, steps, heads pooled); the
    per-group verdicts of the paper's claim with their intervals (:mod:`kaleido.characterize.verdict`);
    and the dense videos (the capture computes the dense model)."""
    from kaleido.characterize import Characterization, characterize_runs, hist_quantile
    from kaleido.characterize.neighbours import AXES

    rec, dense = characterize_runs(pipe, prompts, seeds, settings, progress=False)
    ch = Characterization.from_recorder(rec, {})
    rows: dict = {}
    for (run, op), hist in rec.run_hists.items():
        if op not in ("self_q", "self_k"):
            continue
        med = hist_quantile(hist, 0.5)
        names = ch.operands[op].group_names
        row = rows.setdefault(run, {"prompt": run[0], "seed": run[1], "delta_median": {}})
        row["delta_median"][op] = {g: {a: (None if not np.isfinite(float(med[i, j])) else float(med[i, j]))
                                       for j, a in enumerate(AXES)} for i, g in enumerate(names)}
    return list(rows.values()), [v.to_dict() | {"statement": v.statement()} for v in ch.verdicts], dense


def delta_table(rows: list[dict]) -> dict:
    """``{operand: {group: {axis: {mean, ci95}}}}`` over prompts, plus each group's best axis and its margin."""
    out: dict = {}
    for op in rows[0]["delta_median"]:
        out[op] = {}
        for g, axes in rows[0]["delta_median"][op].items():
            cell = {}
            for a in axes:
                by_prompt: dict[str, list[float]] = {}
                for r in rows:
                    v = r["delta_median"][op][g][a]
                    if v is not None:
                        by_prompt.setdefault(r["prompt"], []).append(v)
                if by_prompt:
                    cell[a] = _interval(by_prompt)
            ranked = sorted(cell, key=lambda a: cell[a]["mean"])
            best = ranked[0] if ranked else None
            out[op][g] = {"axes": cell, "best_axis": best,
                          "margin": (cell[ranked[1]]["mean"] - cell[best]["mean"]) if len(ranked) > 1 else None}
    return out


def quality_and_savings(pipe, config, dense, settings) -> tuple[list[dict], list]:
    from kaleido.evaluation.runs import kaleido_runs

    results = kaleido_runs(pipe, config, dense, settings, progress=False, lpips=False)
    rows = [{"prompt": r.prompt, "seed": r.seed, "psnr": r.comparison.psnr_mean_db, "ssim": r.comparison.ssim_mean,
             **savings(r.trace.summary())} for r in results]
    return rows, [r.trace for r in results]


def summarise(rows: list[dict], keys=("psnr", "ssim", "self_qk", "self_attention", "whole_transformer", "full",
                                       "partial", "compute")) -> dict:
    out = {}
    for k in keys:
        by_prompt: dict[str, list[float]] = {}
        for r in rows:
            if r.get(k) is not None and np.isfinite(r[k]):
                by_prompt.setdefault(r["prompt"], []).append(float(r[k]))
        if by_prompt:
            out[k] = _interval(by_prompt)
    out["runs"] = len(rows)
    return out


def sim_figures(wl, trace) -> dict:
    from kaleido.hw.arch.config import ArrayConfig
    from kaleido.hw.run import array_low_bits
    from kaleido.hw.designs.kaleido import DESIGN_LEVEL, simulate
    from kaleido.hw.inputs.trace_adapter import profile_from_trace

    prof, _ = profile_from_trace(trace, wl)
    s = simulate(wl, prof, ArrayConfig(low_bits=array_low_bits(prof)[0]), transfer=True).summary()
    return {"cycles": s["cycles"][f"kaleido[{DESIGN_LEVEL}]"], "dense_cycles": s["cycles"]["dense_array"],
            "utilisation": s["utilisation"][DESIGN_LEVEL], "energy_j": s["energy_j"]["kaleido"],
            "speedup_vs_dense_array": s["speedup"]["vs_dense_array"],
            "energy_savings_vs_dense_array": s["energy_savings"]["vs_dense_array"]}


def carry_check(traces: dict[str, list], grids: dict[str, tuple], steps: int) -> dict:
    """The carry rule's error: 16x16 traces carried to the miniature at 24x24 against the 24x24 traces measured
    (same prompt and seed), and both carried to the published workloads."""
    from kaleido.hw.inputs.workloads import get_workload, miniature_workload

    lo, hi = list(traces)
    n = min(len(traces[lo]), len(traces[hi]))
    mini = miniature_workload(grids[hi], steps)
    targets = {mini.name: mini}
    targets.update({w: get_workload(w) for w in CARRY_WORKLOADS})
    out = {}
    for name, wl in targets.items():
        pairs = [(sim_figures(wl, traces[lo][i]), sim_figures(wl, traces[hi][i])) for i in range(n)]
        cell = {}
        for k in ("cycles", "utilisation", "energy_j", "speedup_vs_dense_array"):
            errs = [c[k] / m[k] - 1.0 for c, m in pairs]
            cell[k] = {"carried_from_" + lo: float(np.mean([c[k] for c, _ in pairs])),
                       "from_" + hi: float(np.mean([m[k] for _, m in pairs])),
                       "relative_error_mean": float(np.mean(errs)), "relative_error_range": [float(min(errs)), float(max(errs))]}
        out[name] = {"runs": n, **cell,
                     "reading": ("measured at 24x24 vs carried from 16x16" if name.startswith("tiny-wan") else
                                 "both carried; the difference is what the carried grid changes")}
    return out


def design_tables(pipeline: str, prompts: int, steps: int, results_dir: Path, grid: tuple,
                  frames: int | None = None) -> dict:
    from kaleido.compare.analysis import aggregate, load_rows
    from kaleido.compare.grids import build_points
    from kaleido.compare.sweep import run_sweep
    from kaleido.hw.inputs.workloads import miniature_workload
    from kaleido.report.accel import design_rows, design_table, quality_by_method

    call = {"num_inference_steps": steps, **({"num_frames": frames} if frames else {})}
    pts = build_points(pipeline, list(DESIGN_GRID), prompts, (0,), call, grid=DESIGN_GRID)
    summary = run_sweep(pts, results_dir, progress=False)
    rows = [r for r in load_rows(results_dir) if not r.get("error")]
    aggs = aggregate(rows)
    k_row, base_rows = design_rows(rows, aggs)
    quality = quality_by_method(aggs)
    out = {"sweep": {"points": summary.total, "failed": len(summary.failed)}}
    for wl in (miniature_workload(grid, steps), *CARRY_WORKLOADS):
        t = design_table(k_row, base_rows, wl, quality=quality)
        out[t["workload"]] = {d["design"]: {"speedup_vs_dense": d["speedup_vs_dense"], "psnr": d["psnr"],
                                            "psnr_runs": d["psnr_runs"]} for d in t["designs"]}
    return out


def run_grid(name: str, model: str, a) -> tuple[dict, list]:
    from kaleido.compare.threshold_sweep import point_config
    from kaleido.techniques.kaleido_reuse import KaleidoConfig
    from kaleido.evaluation.generate import EVAL_PROMPTS, settings_for
    from kaleido.tiny.pipeline import load_pipeline

    t0 = time.time()
    pipe = load_pipeline(model)
    pipe.set_progress_bar_config(disable=True)
    settings = settings_for(model, num_inference_steps=a.steps, num_frames=a.frames)
    prompts = list(EVAL_PROMPTS[: a.prompts])
    char_rows, verdicts, dense = characterise(pipe, prompts, a.seeds, settings)
    print(f"[{name}] characterised {len(char_rows)} runs ({time.time() - t0:.0f} s)", file=sys.stderr)
    default_rows, traces = quality_and_savings(pipe, KaleidoConfig(), dense, settings)
    print(f"[{name}] default config done ({time.time() - t0:.0f} s)", file=sys.stderr)
    sub = {k: v for k, v in dense.items() if k[0] in prompts[: a.sweep_prompts] and k[1] == a.seeds[0]}
    sweep = []
    for pt in SWEEP_POINTS:
        rows, _ = quality_and_savings(pipe, point_config(KaleidoConfig(), pt), sub, settings)
        sweep.append({"theta1": pt[0], "theta2": pt[1], "low_bits": pt[2] if len(pt) > 2 else None, **summarise(rows)})
    print(f"[{name}] sweep done ({time.time() - t0:.0f} s)", file=sys.stderr)
    g0 = next(r.grid for r in traces[0].records if r.grid is not None)
    grid = (g0.T, g0.H, g0.W)
    out = {"model": model, "grid": list(grid), "settings": settings.to_dict(), "characterisation": delta_table(char_rows),
           "claim_verdicts": verdicts,
           "default": summarise(default_rows), "default_runs": default_rows, "sweep": sweep}
    if a.designs:
        out["designs"] = design_tables(model, a.design_prompts, a.steps, Path(a.work) / f"compare-{model}", grid,
                                       a.frames)
        print(f"[{name}] accelerator designs done ({time.time() - t0:.0f} s)", file=sys.stderr)
    out["wall_s"] = round(time.time() - t0, 1)
    return out, traces


def plot_sweep(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for (name, g), colour in zip(result["grids"].items(), ("tab:blue", "tab:orange")):
        xs = [100 * p["whole_transformer"]["mean"] for p in g["sweep"]]
        ys = [p["psnr"]["mean"] for p in g["sweep"]]
        err = np.array([[p["psnr"]["mean"] - p["psnr"]["ci95"][0], p["psnr"]["ci95"][1] - p["psnr"]["mean"]]
                        for p in g["sweep"]]).T
        ax.errorbar(xs, ys, yerr=err, marker="o", color=colour, capsize=3, label=f"sweep, grid {'x'.join(map(str, g['grid']))}")
        d = g["default"]
        ax.scatter([100 * d["whole_transformer"]["mean"]], [d["psnr"]["mean"]], marker="*", s=160, color=colour,
                   edgecolor="k", zorder=5, label=f"default config, {'x'.join(map(str, g['grid']))}")
        for p, x, y in zip(g["sweep"], xs, ys):
            ax.annotate(f"{p['theta1']:g}/{p['theta2']:g}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.set_xlabel("whole-transformer 8-bit-equivalent MACs saved (%)")
    ax.set_ylabel("PSNR against dense (dB)")
    ax.set_title("Kaleido on the miniature model at two token grids")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    from kaleido.atomic import open_atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    with open_atomic(path, "wb") as out:
        fig.savefig(out, format="png", dpi=120)
    plt.close(fig)


def _cell(c: dict | None, pct: bool = False, nd: int = 2) -> str:
    if not c:
        return "-"
    f = (lambda x: f"{100 * x:.1f}%") if pct else (lambda x: f"{x:.{nd}f}")
    return f"{f(c['mean'])} [{f(c['ci95'][0])}, {f(c['ci95'][1])}]"


def render_markdown(result: dict) -> str:
    """The tables of docs/resolution.md from the study's JSON."""
    names = list(result["grids"])
    gs = [result["grids"][n] for n in names]
    head = "| | " + " | ".join("grid " + "x".join(map(str, g["grid"])) + f" ({g['model']})" for g in gs) + " |"
    sep = "|---|" + "---|" * len(gs)
    out = ["### Default config (" + f"{gs[0]['default']['runs']} runs per grid; mean [95% bootstrap interval over prompts])",
           "", head, sep]
    for key, label, pct in (("psnr", "PSNR vs dense (dB)", False), ("ssim", "SSIM vs dense", False),
                            ("self_qk", "self-attention q.k^T MACs saved", True),
                            ("self_attention", "self-attention (q.k^T + P.V) MACs saved", True),
                            ("whole_transformer", "whole transformer MACs saved", True),
                            ("full", "self q.k^T decisions FULL", True), ("partial", "... PARTIAL", True),
                            ("compute", "... COMPUTE", True)):
        out.append(f"| {label} | " + " | ".join(_cell(g["default"].get(key), pct, 3 if key == "ssim" else 2)
                                              for g in gs) + " |")
    out += ["", "### Threshold sweep (every op on the point's thresholds; first seed, "
            f"{result['protocol']['sweep']['prompts']} prompts)", "",
            "| theta1 / theta2 (low bits) | " + " | ".join(f"PSNR {n} | transformer saved {n}" for n in names) + " |",
            "|---|" + "---|---|" * len(gs)]
    for i, pt in enumerate(gs[0]["sweep"]):
        lb = f" ({pt['low_bits']})" if pt.get("low_bits") else ""
        out.append(f"| {pt['theta1']:g} / {pt['theta2']:g}{lb} | " + " | ".join(
            f"{_cell(g['sweep'][i]['psnr'])} | {_cell(g['sweep'][i]['whole_transformer'], True)}" for g in gs) + " |")
    out += ["", "### Median neighbour Delta (int8 units) of self-attention q / k per RoPE group and axis", "",
            "| operand | group | " + " | ".join(f"t / h / w at {n}" for n in names) + " |", "|---|---|" + "---|" * len(gs)]
    for op in gs[0]["characterisation"]:
        for grp in gs[0]["characterisation"][op]:
            cells = []
            for g in gs:
                ax = g["characterisation"][op][grp]["axes"]
                cells.append(" / ".join(f"{ax[a]['mean']:.1f}" if a in ax else "-" for a in ("t", "h", "w")))
            out.append(f"| {op} | {grp} | " + " | ".join(cells) + " |")
    out += ["", "### The paper's axis claim per group (8 held-out prompts x 2 seeds; `kaleido.characterize.verdict`)", ""]
    for n, g in zip(names, gs):
        out += [f"- {n}: {v['statement']}" for v in g["claim_verdicts"]]
    if "carry_rule" in result:
        out += ["", "### The carry rule (docs/hardware.md §8) against the measurement", "",
                "| target workload | quantity | from the 16x16 trace (carried) | from the 24x24 trace | relative error |",
                "|---|---|---|---|---|"]
        for wl, c in result["carry_rule"].items():
            for k in ("cycles", "utilisation", "energy_j", "speedup_vs_dense_array"):
                v = c[k]
                lo_key = next(x for x in v if x.startswith("carried_from_"))
                hi_key = next(x for x in v if x.startswith("from_"))
                out.append(f"| {wl} | {k} | {v[lo_key]:.4g} | {v[hi_key]:.4g} | "
                           f"{100 * v['relative_error_mean']:+.2f}% ({100 * v['relative_error_range'][0]:+.2f} to "
                           f"{100 * v['relative_error_range'][1]:+.2f}) |")
    if all("designs" in g for g in gs):
        out += ["", "### Accelerator designs: speedup over the dense 128x128 array (each design's own trace at that grid)", ""]
        wls = [w for w in gs[0]["designs"] if w != "sweep"]
        designs = list(gs[0]["designs"][wls[0]])
        out += ["| design | " + " | ".join(f"{w} @ {n}" for n in names for w in
                                          [x for x in result["grids"][n]["designs"] if x != "sweep"]) + " |",
                "|---|" + "---|" * sum(len([x for x in g["designs"] if x != "sweep"]) for g in gs)]
        for dname in designs:
            cells = []
            for g in gs:
                for w in [x for x in g["designs"] if x != "sweep"]:
                    d = g["designs"][w].get(dname)
                    cells.append("-" if d is None else f"{d['speedup_vs_dense']:.3f}x")
            out.append(f"| {dname} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--prompts", type=int, default=8, help="evaluation prompts (default: all 8)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--steps", type=int, default=25)
    p.add_argument("--frames", type=int, default=None, help="video frames (default: the pipelines' 17)")
    p.add_argument("--sweep-prompts", type=int, default=4, help="prompts of the threshold sweep (first seed only)")
    p.add_argument("--design-prompts", type=int, default=2, help="prompts of the accelerator designs' compare sweep")
    p.add_argument("--no-designs", dest="designs", action="store_false", help="skip the accelerator designs")
    p.add_argument("--work", default="out/resolution", help="folder for the compare rows (resumable)")
    p.add_argument("--json", default=None, help="write the results here")
    p.add_argument("--plot", default=None, help="write the sweep plot (PNG) here")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--smoke", action="store_true", help="1 prompt, 1 seed, 2 steps, 1 sweep prompt, 1 design prompt")
    p.add_argument("--render", metavar="JSON", default=None, help="only print the markdown tables of a results JSON")
    a = p.parse_args(argv)
    if a.render:
        print(render_markdown(json.loads(Path(a.render).read_text())))
        return {}
    if a.smoke:
        a.prompts, a.seeds, a.steps, a.frames, a.sweep_prompts, a.design_prompts = 1, [0], 2, 5, 1, 1
    torch.set_num_threads(a.threads)
    from kaleido.atomic import write_atomic

    result: dict = {"protocol": {"prompts": a.prompts, "seeds": a.seeds, "steps": a.steps, "frames": a.frames or 17,
                                 "sweep": {"points": [list(x) for x in SWEEP_POINTS], "prompts": a.sweep_prompts,
                                           "seeds": a.seeds[:1]},
                                 "interval": "95% percentile bootstrap over prompts (seeds averaged per prompt)"},
                    "grids": {}}
    traces = {}
    grids = {}
    for name, model in GRIDS.items():
        result["grids"][name], traces[name] = run_grid(name, model, a)
        grids[name] = tuple(result["grids"][name]["grid"])
        if a.json:  # each grid's figures as soon as they exist (a long run killed later keeps them)
            Path(a.json).parent.mkdir(parents=True, exist_ok=True)
            write_atomic(Path(a.json), json.dumps(result, indent=1, default=float))
    result["carry_rule"] = carry_check(traces, grids, a.steps)
    text = json.dumps(result, indent=1, default=float)
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        write_atomic(Path(a.json), text)
    if a.plot:
        plot_sweep(result, Path(a.plot))
    for name, g in result["grids"].items():
        d = g["default"]
        grid = "x".join(map(str, g["grid"]))
        print(f"grid {grid}: default PSNR {d['psnr']['mean']:.2f} dB [{d['psnr']['ci95'][0]:.2f}, "
              f"{d['psnr']['ci95'][1]:.2f}], SSIM {d['ssim']['mean']:.3f}, self-attn q.k^T saved "
              f"{100 * d['self_qk']['mean']:.1f}%, self-attention {100 * d['self_attention']['mean']:.1f}%, "
              f"whole transformer {100 * d['whole_transformer']['mean']:.1f}% ({d['runs']} runs)")
        for v in g["claim_verdicts"]:
            print(f"  {grid}: {v['statement']}")
    for wl, c in result["carry_rule"].items():
        print(f"carry rule on {wl}: cycles {100 * c['cycles']['relative_error_mean']:+.1f}%, energy "
              f"{100 * c['energy_j']['relative_error_mean']:+.1f}%, utilisation "
              f"{100 * c['utilisation']['relative_error_mean']:+.1f}% ({c['reading']})")
    return result


if __name__ == "__main__":
    main()
