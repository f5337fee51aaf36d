"""MagCache's magnitude ratios of a comparison pipeline at a step count, measured with diffusers' calibration mode.

The ratios the comparison's MagCache points use (``src/kaleido/assets/magcache_ratios.json``, keyed by pipeline
and step count; :func:`kaleido.techniques.step_cache.calibrated_mag_ratios` reads them) come from this script: one
generation of the first default prompt, seed 0, at the pipeline's own settings (guidance...) and ``--steps``
denoising steps (default: the pipeline's), with ``make_method("magcache", calibrate=True)``.  It prints the
ratios of each cache context (``"cond"``, and ``"uncond"`` under separate guidance calls) as JSON; ``--write``
stores the ``"cond"`` list (the one the grid uses) in the file.  Run::

    OMP_WAIT_POLICY=PASSIVE python benchmarks/calibrate_magcache.py --model tiny --steps 25 --write

``--sampler consistency`` measures them under the consistency sampler (:mod:`kaleido.sampling`), stored apart
from the pipeline's own sampler's (``"4-consistency"``).
"""

from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def calibrate(pipeline: str, steps: int | None = None, prompt_index: int = 0, seed: int = 0,
              sampler: str | None = None) -> dict[str, list[float]]:
    """``{context: ratios}`` of one generation of ``pipeline`` at ``steps`` (``None``: its own; see the module
    docstring) with ``sampler`` (``None``: its own)."""
    import contextlib
    import io

    import torch

    from kaleido.techniques import make_method
    from kaleido.compare.grids import DEFAULT_PROMPTS
    from kaleido.compare.pipelines import load_pipeline

    pipe, call = load_pipeline(pipeline)
    if steps is not None:
        call = dict(call, num_inference_steps=int(steps))
    steps = call.get("num_inference_steps") or 50  # diffusers' WanPipeline default
    handle = make_method("magcache", calibrate=True, num_inference_steps=steps).apply(pipe.transformer)
    try:
        from kaleido.sampling import using

        with torch.no_grad(), contextlib.redirect_stdout(io.StringIO()), using(pipe, sampler, seed):
            pipe(DEFAULT_PROMPTS[prompt_index], generator=torch.Generator().manual_seed(seed), output_type="latent",
                 **call)  # diffusers prints the ratios too
        return handle.report().extra["mag_ratios"]
    finally:
        handle.remove()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", "--pipeline", dest="pipeline", default="tiny",
                    help="'tiny', 'random-wan' or a WanPipeline folder (as `kaleido compare --pipeline` names it)")
    ap.add_argument("--steps", type=int, default=None, help="denoising steps (default: the pipeline's own)")
    ap.add_argument("--sampler", choices=["euler", "consistency"], default=None,
                    help="the sampler (default: the pipeline's own); ratios under another are stored apart")
    ap.add_argument("--write", action="store_true",
                    help="store the 'cond' ratios in src/kaleido/assets/magcache_ratios.json for this model and steps")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    if args.steps is not None and args.steps < 1:
        ap.error(f"--steps {args.steps}: give a positive number of denoising steps")
    import torch

    from kaleido.compare.grids import default_steps

    torch.set_num_threads(args.threads)
    from kaleido.tiny.pipeline import native_sampler

    steps = args.steps if args.steps is not None else default_steps(args.pipeline)
    sampler = None if args.sampler == native_sampler(args.pipeline) else args.sampler
    ratios = calibrate(args.pipeline, steps, sampler=sampler)
    print(json.dumps({k: [round(r, 5) for r in v] for k, v in ratios.items()}))
    if args.write:
        from kaleido.techniques.step_cache import write_mag_ratios

        n = len(ratios["cond"])
        path = write_mag_ratios(args.pipeline, n, ratios["cond"], sampler=sampler)
        print(f"wrote {n} ratios for {args.pipeline!r} at {n} steps{f' ({sampler})' if sampler else ''} to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
