"""How far the transformer's block residual moves from one denoising step to the next, under each sampler.

Step caches (MagCache, TeaCache, FirstBlockCache, cache-dit, TaylorSeer) reuse or extrapolate the residual the
blocks added at earlier steps: they need consecutive steps' residuals to be close. This script measures it: for
each pipeline x sampler, on the comparison's held-out prompts x seeds, the residual ``r_i`` of step ``i`` (the
last block's output minus the first block's input, what a block cache skips) and its relative L1 change
``|r_i - r_{i-1}|_1 / |r_{i-1}|_1`` per step (with separate guidance calls, each call against the same call of
the step before), averaged over runs. Run with nothing else on the machine::

    OMP_WAIT_POLICY=PASSIVE HF_HUB_OFFLINE=1 python benchmarks/residual_drift.py --json docs/results/residual-drift.json
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

#: (pipeline, sampler) pairs: the Euler student under its own sampler and the consistency one, the consistency
#: student, and the teacher at 8 steps under both
CASES = (("tiny-turbo", "euler"), ("tiny-turbo", "consistency"), ("tiny-rcm", "consistency"),
         ("tiny", "euler"), ("tiny", "consistency"))


def drift(pipe, prompt: str, seed: int, sampler: str, steps: int | None) -> list[float]:
    """The relative L1 change of the block residual at each step after the first."""
    import torch

    from kaleido.sampling import using

    blocks = pipe.transformer.blocks
    seen: list = []
    first_in: list = []
    h1 = blocks[0].register_forward_pre_hook(lambda m, a, k: first_in.append(
        (k.get("hidden_states") if "hidden_states" in k else a[0]).detach().clone()), with_kwargs=True)
    h2 = blocks[-1].register_forward_hook(lambda m, a, out: seen.append(
        (out[0] if isinstance(out, tuple) else out).detach().clone()))
    kw = {} if steps is None else dict(num_inference_steps=steps)
    try:
        with torch.no_grad(), using(pipe, sampler, seed):
            pipe(prompt, generator=torch.Generator().manual_seed(seed), output_type="latent", **kw)
    finally:
        h1.remove()
        h2.remove()
    res = [o - i for o, i in zip(seen, first_in)]
    # a pipeline with separate guidance calls runs the transformer twice per step (cond, uncond): compare each
    # call with the same call of the step before
    stride = max(1, len(res) // (steps or pipe.demo.num_inference_steps))
    return [float((b - a).abs().sum() / a.abs().sum()) for a, b in zip(res, res[stride:])]


def main(argv: list[str] | None = None) -> int:
    import numpy as np
    import torch

    from kaleido.atomic import write_atomic
    from kaleido.tiny.data import HELDOUT_PROMPTS
    from kaleido.tiny.pipeline import load_pipeline, native_sampler

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--teacher-steps", type=int, default=8)
    ap.add_argument("--json", default=None)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    seeds = [int(s) for s in a.seeds.split(",")]
    t0 = time.time()
    out = []
    for model, sampler in CASES:
        pipe = load_pipeline(model)
        pipe.set_progress_bar_config(disable=True)
        steps = a.teacher_steps if model == "tiny" else None
        use = None if sampler == native_sampler(model) else sampler
        per_step = np.mean([drift(pipe, p, s, use, steps) for p in HELDOUT_PROMPTS[: a.prompts] for s in seeds], axis=0)
        row = dict(pipeline=model, sampler=sampler, steps=steps or pipe.demo.num_inference_steps,
                   drift_per_step=[round(float(x), 4) for x in per_step], drift_mean=round(float(per_step.mean()), 4))
        out.append(row)
        print(json.dumps(row), flush=True)
    doc = dict(prompts=a.prompts, seeds=seeds, cases=out, seconds=round(time.time() - t0, 1))
    if a.json:
        write_atomic(a.json, json.dumps(doc, indent=1) + "\n")
    print(f"{doc['seconds']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
