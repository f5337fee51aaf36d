"""Does a config calibrated at 25 steps hold at other step counts?

Users reuse one config across step counts.  This measures a config (default: the shipped
``tiny-default``) against dense at each ``--steps`` value on held-out prompts x seeds, through
``kaleido compare``'s Dask path (rows kept in ``--results``: a rerun computes only what is missing)::

    OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1 python benchmarks/steps_transfer.py --steps 12,25,50 \\
        --prompts 8 --seeds 0,1 --json docs/results/steps_transfer.json

The prompts are the comparison's (``configs/calibration/heldout.txt``), never the calibration's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--config", default="tiny-default", help="a KaleidoConfig file or packaged name")
    ap.add_argument("--steps", default="12,25,50", help="comma-separated step counts")
    ap.add_argument("--prompts", type=int, default=8, help="the first N comparison prompts (1-8)")
    ap.add_argument("--prompts-at", default="", help="fewer prompts at some step counts, e.g. 50:4")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--results", default="out/steps_transfer", help="row folder (resumable)")
    ap.add_argument("--json", default=None, help="also write the table here")
    args = ap.parse_args(argv)

    from kaleido.atomic import write_atomic
    from kaleido.compare.config_evaluator import SweepEvaluator
    from kaleido.compare.grids import DEFAULT_PROMPTS
    from kaleido.techniques.kaleido_reuse.config import KaleidoConfig
    from kaleido.tiny.pipeline import demo_settings

    cfg = KaleidoConfig.load(args.config)
    seeds = [int(s) for s in args.seeds.split(",")]
    fewer = {int(k): int(v) for k, v in (x.split(":") for x in args.prompts_at.split(",") if x)}
    out = []
    with SweepEvaluator(args.model, Path(args.results), {}, None, args.workers) as ev:
        for steps in (int(s) for s in args.steps.split(",")):
            ev.call = demo_settings(args.model).overridden(num_inference_steps=steps).call_kwargs()
            prompts = list(DEFAULT_PROMPTS[: fewer.get(steps, args.prompts)])
            m = ev.measure(cfg, prompts, seeds)
            out.append({"steps": steps, "prompts": len(prompts), "seeds": seeds, **m.to_dict()})
            print(f"{steps:3d} steps, {len(prompts)} prompts x {len(seeds)} seeds: PSNR {m.psnr_mean_db:.2f} dB "
                  f"(min {m.psnr_min_db:.2f}), SSIM {m.ssim_mean:.3f}, self q.k^T saved {m.saved('self_qk'):.1%}, "
                  f"transformer saved {m.saved('whole_transformer'):.1%}", flush=True)
    if args.json:
        write_atomic(args.json, json.dumps({"config": args.config, "model": args.model, "rows": out}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
