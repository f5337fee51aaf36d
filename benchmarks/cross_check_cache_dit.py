"""Do cache-dit's DBCache (Fn=1, Bn=0) and diffusers' FirstBlockCache skip the same steps at the same threshold?

Both decide from the first block's residual: the rest of the blocks is served from the cache while the
relative L1 change of that residual against the last call that computed everything stays under the
threshold (DBCache: ``diff < threshold``; FirstBlockCache: compute when ``diff > threshold``), each branch
(cond / uncond) on its own.  DBCache runs here with no warm-up and no limits on cached steps, so only the rule
itself can differ.  For each prompt (the comparison's held-out ``DEFAULT_PROMPTS``, seed 0) the script prints,
step by step and branch by branch, which of the two served the step from its cache, where they disagree, and
each one's PSNR against the dense video (and against each other).  Whether a call was served is read the same
way for both: whether a GEMM of the transformer's last block ran in it (the handle's ``"gemm ran"`` event), not
from either library's own statistics (cache-dit's are printed beside, as a check).  Run (about a minute a prompt on the miniature
pipeline, 2 CPU threads)::

    OMP_WAIT_POLICY=PASSIVE python benchmarks/cross_check_cache_dit.py --model tiny --threshold 0.08 --prompts 2
"""

from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def run(pipe, call: dict, method, prompt: str, seed: int = 0):
    """``(video, served, report)``: the generation under ``method`` and, per transformer call in order,
    ``(step, slot, served)`` - served: no GEMM of the last block ran (a diffusers cache's block hooks return
    early inside the block's call, so a forward hook on the block itself would fire either way)."""
    from kaleido.generation_settings import GenerationSettings
    from kaleido.evaluation.generate import generate

    handle = method.apply(pipe.transformer)
    last = handle.shapes.n_layers - 1
    calls: list[list] = []

    def ran(gemm, taken) -> None:  # a GEMM of the last block ran: the call computed it
        if gemm.layer == last:
            calls[-1][2] = False

    handle.observe("call planned", "cross-check", lambda gemms: calls.append([handle.call.step, handle.call.slot, True]))
    handle.observe("gemm ran", "cross-check", ran)
    try:
        video, _, _ = generate(pipe, prompt, seed, GenerationSettings.from_call(call))
        report = handle.report()
    finally:
        handle.remove()
    return video, [tuple(c) for c in calls], report


def cross_check(pipeline: str, threshold: float, n_prompts: int, steps: int | None = None) -> list[dict]:
    """Per prompt: the two caches' per-step decisions, their disagreements and their PSNR against dense."""
    from kaleido.techniques import make_method
    from kaleido.compare.grids import DEFAULT_PROMPTS
    from kaleido.compare.pipelines import load_pipeline
    from kaleido.generation_settings import GenerationSettings
    from kaleido.evaluation.harness import video_quality
    from kaleido.evaluation.generate import generate

    pipe, call = load_pipeline(pipeline)
    pipe.set_progress_bar_config(disable=True)
    if steps is not None:
        call = dict(call, num_inference_steps=int(steps))
    two_calls = float(call.get("guidance_scale") or 1.0) > 1.0  # classifier-free guidance as separate calls
    out = []
    for prompt in DEFAULT_PROMPTS[:n_prompts]:
        dense, _, _ = generate(pipe, prompt, 0, GenerationSettings.from_call(call))
        db = make_method("cache_dit", Fn_compute_blocks=1, Bn_compute_blocks=0, residual_diff_threshold=threshold,
                         max_warmup_steps=0, separate_cfg=two_calls)
        db_video, db_calls, db_report = run(pipe, call, db, prompt)
        fb_video, fb_calls, _ = run(pipe, call, make_method("fbcache", threshold=threshold), prompt)
        if [c[:2] for c in db_calls] != [c[:2] for c in fb_calls]:
            raise ValueError("the two runs called the transformer at different steps; nothing to compare")
        rows = [dict(step=s, branch=("cond", "uncond")[slot] if two_calls else "cond", cache_dit=d, fbcache=f)
                for (s, slot, d), (_, _, f) in zip(db_calls, fb_calls)]
        out.append(dict(
            prompt=prompt, threshold=threshold, calls=len(rows),
            served=dict(cache_dit=sum(r["cache_dit"] for r in rows), fbcache=sum(r["fbcache"] for r in rows)),
            disagree=[(r["step"], r["branch"]) for r in rows if r["cache_dit"] != r["fbcache"]],
            psnr_vs_dense=dict(cache_dit=video_quality(db_video, dense)["psnr"],
                               fbcache=video_quality(fb_video, dense)["psnr"]),
            psnr_cache_dit_vs_fbcache=video_quality(db_video, fb_video)["psnr"],
            cache_dit_statistics=db_report.extra["cached_steps"], steps=rows))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", "--pipeline", dest="pipeline", default="tiny", help="'tiny', 'random-wan' or a folder")
    ap.add_argument("--threshold", type=float, default=0.08, help="the two caches' threshold (cache-dit's default)")
    ap.add_argument("--prompts", type=int, default=2, help="how many of the comparison's prompts")
    ap.add_argument("--steps", type=int, default=None, help="denoising steps (default: the pipeline's)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    results = cross_check(args.pipeline, args.threshold, args.prompts, args.steps)
    if args.json:
        print(json.dumps(results, indent=1))
        return 0
    for r in results:
        print(f"\n{r['prompt']!r}, threshold {r['threshold']}: {r['calls']} transformer calls")
        print(f"{'step':>4} {'branch':<7} {'cache-dit':<10} fbcache")
        for s in r["steps"]:
            mark = "  <- differ" if s["cache_dit"] != s["fbcache"] else ""
            print(f"{s['step']:>4} {s['branch']:<7} {'cached' if s['cache_dit'] else 'compute':<10} "
                  f"{'cached' if s['fbcache'] else 'compute'}{mark}")
        same = "the same calls" if not r["disagree"] else f"{len(r['disagree'])} calls differ: {r['disagree']}"
        print(f"served from the cache: cache-dit {r['served']['cache_dit']}, fbcache {r['served']['fbcache']} "
              f"of {r['calls']} ({same})")
        p = r["psnr_vs_dense"]
        print(f"PSNR vs dense: cache-dit {p['cache_dit']:.2f} dB, fbcache {p['fbcache']:.2f} dB; cache-dit vs fbcache "
              f"{r['psnr_cache_dit_vs_fbcache']:.2f} dB; cache-dit's own statistics: {r['cache_dit_statistics']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
