"""MagCache's magnitude ratios of a comparison pipeline, measured with diffusers' calibration mode.

The ratios :data:`kaleido.compare.grids.MAG_RATIOS` holds come from this script: one
generation of the pipeline's first default prompt, seed 0, at its own settings (steps,
guidance), with ``make_method("magcache", calibrate=True)``; it prints the ratios of each
cache context (``"cond"``, and ``"uncond"`` under separate guidance calls) as JSON.
The grid uses the ``"cond"`` list.  Run::

    OMP_WAIT_POLICY=PASSIVE python benchmarks/calibrate_magcache.py --pipeline tiny
"""

from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def calibrate(pipeline: str, prompt_index: int = 0, seed: int = 0) -> dict[str, list[float]]:
    """``{context: ratios}`` of one generation of ``pipeline`` (see the module docstring)."""
    import contextlib
    import io

    import torch

    from kaleido.baselines import make_method
    from kaleido.compare.grids import DEFAULT_PROMPTS
    from kaleido.compare.pipelines import load_pipeline

    pipe, call = load_pipeline(pipeline)
    steps = call.get("num_inference_steps") or 50  # diffusers' WanPipeline default
    handle = make_method("magcache", calibrate=True, num_inference_steps=steps).apply(pipe.transformer)
    try:
        with torch.no_grad(), contextlib.redirect_stdout(io.StringIO()):  # diffusers prints them too
            pipe(DEFAULT_PROMPTS[prompt_index], generator=torch.Generator().manual_seed(seed), output_type="latent",
                 **call)
        return handle.report().extra["mag_ratios"]
    finally:
        handle.remove()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pipeline", default="tiny", help="'tiny', 'random-wan' or a WanPipeline folder")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    ratios = calibrate(args.pipeline)
    print(json.dumps({k: [round(r, 5) for r in v] for k, v in ratios.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
