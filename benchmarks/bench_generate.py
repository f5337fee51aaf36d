"""Wall time of Kaleido-enabled generation against dense, on the miniature pipeline (CPU).

Target: Kaleido generation at most 1.5x the dense generation's wall time, at 1 and 2 threads.
``--profile`` adds one profiled Kaleido generation and prints where the extra time
goes: the decision (``kaleido.decide``: quantise, decide, effective operand), trace recording
(``kaleido.record``) and the rest (gathers, row copies, Python per call).

Dense and Kaleido generations alternate (same prompt and seed), ``--repeats`` times,
so a machine-wide slowdown hits both alike; the ratio of the medians is printed,
for the whole pipeline call and for the transformer alone.  Run::

    OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_generate.py [--model tiny] [--repeats 3]

``--model tiny`` needs the shipped pipeline; ``--model random`` uses a tiny random
Wan pipeline built in code (same code path, not the shipped model's shapes).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny", help="'tiny', 'random', a pipeline folder or hub id")
    ap.add_argument("--config", default=None,
                    help="KaleidoConfig YAML/JSON (default: the model's calibrated config, tiny: tiny-default)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    ap.add_argument("--profile", action="store_true", help="also profile one Kaleido generation (torch.profiler)")
    ap.add_argument("--pipeline-defaults", action="store_true",
                    help="use the pipeline's own defaults instead of the miniature demo settings (17x64x64, 25 steps)")
    args = ap.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    import kaleido
    from kaleido.techniques.kaleido_reuse import KaleidoConfig
    from kaleido.generation_settings import GenerationSettings
    from kaleido.evaluation.generate import EVAL_PROMPTS, generate
    from kaleido.techniques.kaleido_reuse.config import default_config
    from kaleido.tiny.pipeline import TINY_DEMO, load_pipeline

    if args.model == "random":
        from kaleido.models.testing import tiny_random_wan_pipeline

        pipe = tiny_random_wan_pipeline()
        settings = TINY_DEMO
    else:
        pipe = load_pipeline(args.model)
        # the miniature pipeline's demo settings, for any model (a real Wan's defaults are 480p x 81 frames)
        settings = GenerationSettings() if args.pipeline_defaults else TINY_DEMO
    settings = settings.overridden(num_inference_steps=args.steps)
    pipe.set_progress_bar_config(disable=True)
    cfg = KaleidoConfig.load(args.config) if args.config else default_config(args.model)
    prompt, seed = EVAL_PROMPTS[0], 0

    generate(pipe, prompt, seed, settings)  # warm-up (allocations, lazy imports)
    times = {"dense_pipeline": [], "kaleido_pipeline": [], "dense_transformer": [], "kaleido_transformer": []}
    saved = None
    for _ in range(args.repeats):
        _, wall, tr = generate(pipe, prompt, seed, settings)
        times["dense_pipeline"].append(wall)
        times["dense_transformer"].append(tr)
        kaleido.apply(pipe.transformer, cfg)
        try:
            _, wall, tr = generate(pipe, prompt, seed, settings)
            saved = kaleido.get_trace(pipe.transformer).summary()
        finally:
            kaleido.remove(pipe.transformer)
        times["kaleido_pipeline"].append(wall)
        times["kaleido_transformer"].append(tr)
    med = {k: statistics.median(v) for k, v in times.items()}
    profile = None
    if args.profile:
        from torch.profiler import profile as torch_profile

        kaleido.apply(pipe.transformer, cfg)
        try:
            with torch_profile() as prof:
                _, wall, tr = generate(pipe, prompt, seed, settings)
        finally:
            kaleido.remove(pipe.transformer)
        ranges = {e.key: e.cpu_time_total / 1e6 for e in prof.key_averages() if e.key.startswith("kaleido.")}
        extra = med["kaleido_transformer"] - med["dense_transformer"]
        profile = {"profiled_transformer_s": tr, "ranges_s": ranges,
                   "extra_s": extra, "profiler_inflation": tr / med["kaleido_transformer"]}
    from kaleido.compare.provenance import code_version, cpu_name

    result = {
        "model": args.model,
        "settings": settings.to_dict(),
        "repeats": args.repeats,
        "threads": args.threads,
        "cpu": cpu_name(),
        "code": code_version(),
        "median_s": med,
        "ratio_pipeline": med["kaleido_pipeline"] / med["dense_pipeline"],
        "ratio_transformer": med["kaleido_transformer"] / med["dense_transformer"],
        "self_qk_saved_fraction": saved["per_op"]["self_qk"]["saved_fraction"],
        "whole_transformer_saved_fraction": saved["whole_transformer"]["saved_fraction"],
        "target_ratio": 1.5,
        "config": args.config or "the model's default",
    }
    result["meets_target"] = result["ratio_pipeline"] <= 1.5
    if profile is not None:
        result["profile"] = profile
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(f"model {args.model}: {settings.num_inference_steps} steps, {settings.num_frames} frames "
              f"{settings.height}x{settings.width}, "
              f"{args.repeats} alternating repeats, {args.threads} thread(s)")
        print(f"  pipeline    dense {med['dense_pipeline']:.2f} s  kaleido {med['kaleido_pipeline']:.2f} s  "
              f"ratio {result['ratio_pipeline']:.2f} (target <= 1.5: {'met' if result['meets_target'] else 'NOT met'})")
        print(f"  transformer dense {med['dense_transformer']:.2f} s  kaleido {med['kaleido_transformer']:.2f} s  "
              f"ratio {result['ratio_transformer']:.2f}")
        print(f"  saved (8-bit-equivalent MACs): self-attn q.k^T {100 * result['self_qk_saved_fraction']:.1f}%, "
              f"whole transformer {100 * result['whole_transformer_saved_fraction']:.1f}%")
        if profile is not None:
            f = profile["profiler_inflation"]
            print(f"  Kaleido's extra transformer time {profile['extra_s']:.2f} s; in the profiled run (x{f:.2f} "
                  "slower under the profiler), deflated:")
            for k, v in sorted(profile["ranges_s"].items()):
                print(f"    {k:16s} {v / f:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
