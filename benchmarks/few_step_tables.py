"""Every method at 25, 8 and 4 steps and under both samplers: the ranking per regime, the verdict of docs/few-step.md's rule, what the
per-op savings imply at a real model's MAC mix, and one plot.

Reads comparison rows only (``kaleido compare`` wrote them; nothing is recomputed):

    python benchmarks/few_step_tables.py docs/results/compare docs/results/compare-8 docs/results/compare-turbo4 \
        docs/results/compare-turbo4c docs/results/compare-rcm4 --json docs/results/few-step.json \
        --plot docs/results/few-step.png

(one folder of rows per regime: the comparison aggregates a folder's rows by method and settings, so two step
counts of one setting must not share a folder).

Regimes: ``teacher-25`` (pipeline ``tiny``, 25 steps), ``teacher-8`` (``tiny``, 8 steps), ``turbo-4``
(``tiny-turbo``, 4 steps, its Euler sampler), ``turbo-4c`` (``tiny-turbo`` under the consistency sampler) and
``rcm-4`` (``tiny-rcm``, 4 steps, its consistency sampler). The rule (docs/few-step.md, "The decision rule"): a setting is eligible at mean
PSNR >= 30 dB; a method's figure is its best eligible setting's whole-transformer saving with its 95%
bootstrap interval over prompts (no eligible setting: 0%, [0, 0]); Kaleido alone / stacked **holds** when its
interval lies above every step cache's, **does not hold** when some step cache's lies above its own, and is
**undecided** otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

#: regime -> (pipeline, steps, sampler as the rows' ``call`` records it: ``None`` is the pipeline's own)
REGIMES = {"teacher-25": ("tiny", 25, None), "teacher-8": ("tiny", 8, None), "turbo-4": ("tiny-turbo", 4, None),
           "turbo-4c": ("tiny-turbo", 4, "consistency"), "rcm-4": ("tiny-rcm", 4, None)}
STEP_CACHES = ("magcache", "taylorseer", "fbcache", "pab", "cache_dit")
#: the real model whose MAC mix the per-op savings are carried to
REAL_WORKLOAD = "wan-1.3b-480p"


def regime_rows(rows: list[dict], pipeline: str, steps: int, sampler: str | None = None) -> list[dict]:
    from kaleido.tiny.pipeline import demo_settings

    default = demo_settings(pipeline).num_inference_steps
    out = []
    for r in rows:
        pt = r.get("point", {})
        if pt.get("pipeline") != pipeline or pt.get("call", {}).get("sampler") != sampler:
            continue
        if int(pt.get("call", {}).get("num_inference_steps") or default) == steps:
            out.append(r)
    return out


def _figure(r) -> dict:
    """A ranked method's figure under the rule (no eligible setting: 0%, interval [0, 0])."""
    b = r.best
    if b is None:
        return dict(method=r.method, label=None, saved=0.0, ci=(0.0, 0.0), psnr=None, psnr_ci=None,
                    best_psnr=r.best_psnr, self_qk=0.0, by_kind={})
    return dict(method=r.method, label=b.label, saved=b.total_saved, ci=tuple(b.total_saved_ci95), psnr=b.psnr,
                psnr_ci=tuple(b.psnr_ci95), best_psnr=r.best_psnr, self_qk=b.self_qk_saved,
                by_kind=dict(b.saved_by_kind), wall_ratio=getattr(b, "wall_ratio", None), runs=b.n)


def verdict(contender: dict | None, caches: list[dict]) -> str:
    """``holds`` / ``does not hold`` / ``undecided`` for ``contender`` against every step cache (the rule)."""
    if contender is None:
        return "no such rows"
    lo, hi = contender["ci"]
    if any(c["ci"][0] > hi for c in caches):
        return "does not hold"
    if all(lo > c["ci"][1] for c in caches):
        return "holds"
    return "undecided"


def real_shape_saving(by_kind: dict, gemms) -> float:
    """The whole-transformer saving the per-op-kind savings ``by_kind`` (trace op names) imply at ``gemms``' MAC
    mix (simulator op kinds; :data:`kaleido.ops.HW_KIND_OF` maps one to the other)."""
    from kaleido.ops import HW_KIND_OF

    per_hw: dict[str, list[float]] = {}
    for op, saved in by_kind.items():
        if op in HW_KIND_OF:
            per_hw.setdefault(HW_KIND_OF[op], []).append(float(saved))
    missing = sorted({g.op for g in gemms} - set(per_hw))
    if by_kind and missing:
        raise ValueError(f"no saving recorded for the workload's op kinds {missing}")
    total = sum(g.macs for g in gemms)
    # two trace ops on one simulator kind (none today) would share it evenly
    return sum(g.macs * (sum(per_hw.get(g.op, [0.0])) / len(per_hw.get(g.op, [0.0]))) for g in gemms) / total


def analyse(rows: list[dict], retimed: dict | None = None) -> dict:
    from kaleido.compare.analysis import aggregate, ranking_at_quality
    from kaleido.hw.inputs.workloads import get_workload
    from kaleido.tiny.pipeline import native_sampler

    gemms = get_workload(REAL_WORKLOAD).gemms
    out = {}
    for name, (pipeline, steps, sampler) in REGIMES.items():
        rs = regime_rows(rows, pipeline, steps, sampler)
        if not rs:
            continue
        aggs = aggregate(rs, retimed)
        ranked = [_figure(r) for r in ranking_at_quality(aggs)]
        for f in ranked:
            f["real_shape_saved"] = real_shape_saving(f["by_kind"], gemms) if f["label"] else 0.0
        caches = [f for f in ranked if f["method"] in STEP_CACHES]
        alone = [f for f in ranked if f["method"] == "kaleido"]
        stacked = [f for f in ranked if " + " in f["method"] and f["method"].endswith("kaleido")]
        best_stack = max(stacked, key=lambda f: f["saved"]) if stacked else None
        out[name] = dict(pipeline=pipeline, steps=steps, sampler=sampler or native_sampler(pipeline), rows=len(rs),
                         ranking=ranked,
                         verdict_alone=verdict(alone[0] if alone else None, caches),
                         verdict_stacked=verdict(best_stack, caches),
                         best_stack=None if best_stack is None else best_stack["method"],
                         settings=[dict(method=a.method, label=a.label, psnr=a.psnr, psnr_ci=list(a.psnr_ci95),
                                        saved=a.total_saved, self_qk=a.self_qk_saved, n=a.n) for a in aggs])
    return out


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def markdown(result: dict) -> str:
    lines = []
    for name, reg in result.items():
        lines += [f"### {name} ({reg['pipeline']}, {reg['steps']} steps, {reg['sampler']} sampler; {reg['rows']} rows)",
                  "",
                  "| method | best setting at >= 30 dB | PSNR (95% CI) | transformer saved (95% CI) | self-attn q.k^T "
                  f"saved | at {REAL_WORKLOAD}'s MAC mix | wall vs dense |", "|---|---|---|---|---|---|---|"]
        for f in reg["ranking"]:
            if f["label"] is None:
                lines.append(f"| {f['method']} | none (best {f['best_psnr']:.1f} dB) | - | 0% | - | - | - |")
                continue
            w = f.get("wall_ratio")
            lines.append(f"| {f['method']} | `{f['label']}` | {f['psnr']:.2f} ({f['psnr_ci'][0]:.1f}-{f['psnr_ci'][1]:.1f})"
                         f" | {_pct(f['saved'])} ({_pct(f['ci'][0])}-{_pct(f['ci'][1])}) | {_pct(f['self_qk'])} | "
                         f"{_pct(f['real_shape_saved'])} | {'-' if w is None or w != w else f'{w:.2f}x'} |")  # NaN: no same-run dense
        lines += ["", f"Kaleido alone beats every step cache: **{reg['verdict_alone']}**; stacked "
                  f"({reg['best_stack']}): **{reg['verdict_stacked']}**.", ""]
    return "\n".join(lines)


def plot(result: dict, path: str) -> None:
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from kaleido.atomic import write_atomic

    fig, axes = plt.subplots(1, len(result), figsize=(5 * len(result), 4), sharey=True, squeeze=False)
    for ax, (name, reg) in zip(axes[0], result.items()):
        by: dict[str, list] = {}
        for s in reg["settings"]:
            key = s["method"] if s["method"] != "stack" else "stack"
            by.setdefault(key, []).append((min(s["psnr"], 60), 100 * s["saved"]))
        for m, pts in sorted(by.items()):
            xs, ys = zip(*pts)
            ax.scatter(xs, ys, label=m, s=18)
        ax.axvline(30, color="grey", lw=0.8, ls="--")
        ax.set_title(f"{name}")
        ax.set_xlabel("PSNR vs dense (dB)")
    axes[0][0].set_ylabel("whole transformer saved (%)")
    axes[0][-1].legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    write_atomic(path, buf.getvalue())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", nargs="+", help="folders of comparison rows")
    p.add_argument("--json", default=None)
    p.add_argument("--plot", default=None)
    a = p.parse_args(argv)
    from kaleido.compare.analysis import load_retimed, load_rows

    rows = [r for d in a.results for r in load_rows(d)]
    retimed = {k: v for d in a.results for k, v in load_retimed(d).items()}
    result = analyse(rows, retimed)
    if not result:
        print("no rows of any regime", file=sys.stderr)
        return 1
    print(markdown(result))
    if a.json:
        from kaleido.atomic import write_atomic

        write_atomic(a.json, json.dumps(result, indent=1, default=list))
    if a.plot:
        plot(result, a.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
