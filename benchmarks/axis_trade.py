"""One reuse axis for every self-attention group (exact P.V row skip) against per-group axes.

SPEC §4: a query row FULL in every q.k^T group *with one anchor* skips its softmax and P.V
exactly.  That needs every group of a head to reuse along one axis, which may lower each
group's FULL rate against the per-group axes the characterisation picks (the default:
the t-group along w, the h- and w-groups along t).  This measures the trade on the shipped
miniature model: for each choice of self-attention q.k^T axes (the rest of the default
config unchanged), PSNR / SSIM against dense with the same seed and the MACs saved on
q.k^T, on P.V, on self-attention as a whole and on the whole transformer, over prompts x
seeds, with a 95% bootstrap interval over prompts.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/axis_trade.py --prompts 4 --seeds 0 1 --json out/axis_trade.json

The prompts are the comparison's (``kaleido.compare.grids.DEFAULT_PROMPTS``), not the
evaluation set of ``docs/results`` (which stays held out from this choice).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
import torch

from kaleido.metrics import bootstrap_interval

#: self-attention q.k^T axes per RoPE group (t, h, w) to compare; the first is the default's
AXES = {
    "per-group (default: w, t, t)": ["w", "t", "t"],
    "all t": ["t", "t", "t"],
    "all w": ["w", "w", "w"],
    "all h": ["h", "h", "h"],
}


def _config(axes: list[str]):
    from kaleido.techniques.kaleido_reuse import KaleidoConfig

    d = KaleidoConfig().to_dict()
    d["ops"]["self_qk"]["axes"] = list(axes)
    return KaleidoConfig.from_dict(d)


def _video(pipe, prompt: str, seed: int, steps: int) -> np.ndarray:
    out = pipe(prompt=prompt, generator=torch.Generator().manual_seed(seed), num_inference_steps=steps,
               output_type="np")
    return np.asarray(out.frames[0], dtype=np.float32)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", type=int, default=4, help="how many of the comparison's prompts (1-8)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--steps", type=int, default=25)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    if not 1 <= args.prompts <= 8:
        print("axis_trade: --prompts must be within 1..8", file=sys.stderr)
        return 2
    import kaleido
    from kaleido.compare.grids import DEFAULT_PROMPTS
    from kaleido.metrics import compare_videos
    from kaleido.tiny.pipeline import load_pipeline

    torch.set_num_threads(args.threads)
    pipe = load_pipeline("tiny")
    pipe.set_progress_bar_config(disable=True)
    prompts = list(DEFAULT_PROMPTS[: args.prompts])
    dense = {(p, s): _video(pipe, p, s, args.steps) for p in prompts for s in args.seeds}
    rows = []
    for label, axes in AXES.items():
        t0 = time.perf_counter()
        per_prompt: dict[str, list[dict]] = {p: [] for p in prompts}
        for p in prompts:
            for s in args.seeds:
                kaleido.apply(pipe.transformer, _config(axes))
                try:
                    video = _video(pipe, p, s, args.steps)
                finally:
                    trace = kaleido.remove(pipe.transformer)
                cmp = compare_videos(dense[(p, s)], video, lpips=False)
                per_op = trace.summary()["per_op"]
                qk, pv = per_op["self_qk"], per_op["self_pv"]
                attn = 1 - (qk["equiv8_macs"] + pv["equiv8_macs"]) / (qk["dense_macs"] + pv["dense_macs"])
                per_prompt[p].append({"psnr": cmp.psnr_mean_db, "ssim": cmp.ssim_mean, "qk": qk["saved_fraction"],
                                      "pv": pv["saved_fraction"], "attn": attn,
                                      "total": trace.summary()["whole_transformer"]["saved_fraction"]})
        agg = {"label": label, "axes": axes, "runs": sum(len(v) for v in per_prompt.values()),
               "wall_s": time.perf_counter() - t0}
        for k in ("psnr", "ssim", "qk", "pv", "attn", "total"):
            means = [float(np.mean([r[k] for r in v])) for v in per_prompt.values()]
            agg[k] = float(np.mean(means))
            agg[k + "_ci95"] = bootstrap_interval(means)
        rows.append(agg)
        print(f"{label:30s} PSNR {agg['psnr']:5.2f} dB [{agg['psnr_ci95'][0]:5.2f}, {agg['psnr_ci95'][1]:5.2f}]  "
              f"SSIM {agg['ssim']:.3f}  saved: q.k^T {agg['qk']:.1%}  P.V {agg['pv']:.1%}  "
              f"self-attn {agg['attn']:.1%}  transformer {agg['total']:.1%}", flush=True)
    if args.json:
        from kaleido.atomic import write_atomic

        write_atomic(args.json, json.dumps({"prompts": prompts, "seeds": args.seeds, "steps": args.steps,
                                            "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
