"""Default sweeps: which settings of each method, which prompts, which seeds.

Settings are chosen to cover the savings range where the comparison happens (50% and
70% of self-attention q.k^T) for every method that saves there, plus the baselines'
published defaults.  Block sizes follow the token count of the pipeline.
"""

from __future__ import annotations

from .points import DENSE, SweepPoint

#: Prompts understood by the miniature pipeline's vocabulary (shapes moving on backgrounds).
DEFAULT_PROMPTS = (
    "a red circle moving left on a plain background",
    "a blue triangle moving up on a gradient background",
    "a green square moving right on a striped background",
    "a yellow circle moving down on a checkered background",
    "a purple square moving left on a cloudy background",
    "a cyan circle moving right on a plain background",
    "a red square moving up on a checkered background",
    "a blue circle moving down on a striped background",
)


def _packaged_config_setting(name: str) -> list[dict]:
    """``[{"config": ..., "label": name}]`` for a packaged KaleidoConfig (none when it is not shipped)."""
    from kaleido.integrations.config import KaleidoConfig, packaged_configs

    if name not in packaged_configs():
        return []
    return [dict(config=KaleidoConfig.load(name).to_dict(), label=name)]


#: MagCache's magnitude ratios per step (the "cond" context), measured on each pipeline by
#: ``benchmarks/calibrate_magcache.py`` (first default prompt, seed 0, the pipeline's own steps and guidance);
#: a pipeline without ratios here gets no MagCache points (its ratios depend on the checkpoint)
MAG_RATIOS: dict[str, tuple[float, ...]] = {
    "random-wan": (1.0, 0.98703, 0.9921, 1.01105),
    "tiny": (1.0, 1.0525, 1.03211, 1.02498, 1.01766, 1.01437, 1.00702, 1.03094, 1.00635, 1.00993, 0.99798, 1.01992,
             0.99932, 1.02323, 0.9904, 1.00897, 1.01318, 1.01367, 1.02055, 1.02348, 1.00166, 1.00444, 1.02368, 0.95969,
             0.90168),
}


def default_steps(pipeline: str) -> int | None:
    """The number of steps a sweep of ``pipeline`` runs without ``--steps`` (``None``: the pipeline's own)."""
    if pipeline == "random-wan":
        from .pipelines import RANDOM_WAN_SETTINGS

        return RANDOM_WAN_SETTINGS.num_inference_steps
    from kaleido.tiny.pipeline import demo_settings

    return demo_settings(pipeline).num_inference_steps


def _magcache_grid(pipeline: str, steps: int | None) -> dict[str, list[dict]]:
    """MagCache's points on ``pipeline`` (none without calibrated ratios or a step count): the two that bracket
    the comparison's 30 dB on the miniature model (2 held-out prompts, seed 0: threshold 0.24, 8 steps in a row,
    the first 20% computed: 68% of the transformer at 35.2 / 33.4 dB; 0.5, 12, 10%: 80% at 30.3 / 27.9 dB;
    diffusers' defaults 0.06, 3, 20%: 56% at 40.0 dB; a looser threshold alone is capped by the steps in a row)."""
    ratios = MAG_RATIOS.get(pipeline)
    if not ratios:
        return {}
    steps = steps if steps is not None else default_steps(pipeline)
    if steps is None:
        return {}
    return {"magcache": [dict(threshold=t, max_skip_steps=k, retention_ratio=r, num_inference_steps=int(steps),
                              mag_ratios=list(ratios)) for t, k, r in ((0.24, 8, 0.2), (0.5, 12, 0.1))]}


def method_grid(pipeline: str, steps: int | None = None) -> dict[str, list[dict]]:
    """Settings per method for ``pipeline`` (``random-wan`` has 80 tokens, ``tiny`` 1280) run with ``steps``
    denoising steps (``None``: the pipeline's default; MagCache's settings name the run's step count).

    The comparison runs 8 prompts x 2 seeds of every setting and ranks methods at >= 30 dB, so each
    baseline keeps its setting nearest that level on the miniature model (earlier 4-prompt runs:
    docs/results/README.md) and Kaleido its points around it: a setting far under it costs 16
    generations and says nothing about the ranking."""
    small = pipeline == "random-wan"
    block = 8 if small else 64
    calibrated = [] if small else _packaged_config_setting("tiny-default")
    ts = dict(technique="taylorseer", cache_interval=3)
    qk_only = dict(cross_qk=False, proj=False, ffn=False)
    mag = _magcache_grid(pipeline, steps)
    # MagCache's setting nearest 30 dB (its first point) as a stack's step cache, where the pipeline has ratios
    mag_stack = [dict(technique="magcache", **mag["magcache"][0])] if mag else []
    return {
        # theta2 <= 2**(low_bits-1) keeps PARTIAL reuse exact (SPEC §3); larger thresholds need more low bits;
        # the miniature model's q is noisy in int8 units (L-inf over whole RoPE groups), so the comparison
        # levels need large thresholds; the calibrated default (kaleido calibrate, docs/results/README.md)
        # is one more point
        "kaleido": [dict(theta1=t1, theta2=t2, low_bits=lb) for t1, t2, lb in ((8, 8, 6), (16, 32, 6))]
        # self-attention q.k^T only, like the attention baselines (sparse attention, token merging) it is
        # matched against: errors from reused linears do not enter the comparison
        + [dict(theta1=32, theta2=64, low_bits=7, **qk_only)] + calibrated,
        # density 0.7 keeps exactly 70% of the key blocks: 30% of q.k^T saved (0.5 gave 19.9 / 26.4 dB on
        # 4 prompts, far under the comparison's 30 dB)
        "sparse_videogen": [dict(density=0.7, block_size=block)],
        "block_topk": [dict(density=0.7, block_size=block)],
        # ToMe saves 1 - (1 - ratio)^2 of q.k^T: 19% (0.25: 44% at 26.1 dB on 4 prompts)
        "tome": [dict(ratio=0.1)],
        "adaptiv": [dict(tau=0.75)],  # (0.6: 21.4 dB on 4 prompts)
        "pab": [dict(self_skip_range=2, cross_skip_range=4)],
        "fbcache": [dict(threshold=0.1)],
        "taylorseer": [dict(cache_interval=3)],
        **mag,
        "exion": [dict(attn_density=0.5, ffn_tau=0.05)],
        "cambricon_d": [dict(delta_bits=4)],
        # a step cache stacked with Kaleido (kaleido.baselines.stack): TaylorSeer or MagCache decides which
        # units run, Kaleido reuses inside the units that do - on self-attention q.k^T only, on every op, and
        # the calibrated default
        "stack": [dict(techniques=[ts, dict(technique="kaleido", theta1=16, theta2=64, low_bits=7, **qk_only)])]
        + [dict(techniques=[ts, dict(technique="kaleido", theta1=8, theta2=8, low_bits=6)])]
        + [dict(techniques=[ts, dict(technique="kaleido", **c)]) for c in calibrated]
        + [dict(techniques=[m, dict(technique="kaleido", theta1=t1, theta2=t2, low_bits=lb, **qk_only)])
           for m in mag_stack for t1, t2, lb in ((16, 64, 7), (8, 16, 6))],
    }


def build_points(pipeline: str, methods: list[str] | None = None, n_prompts: int = 2, seeds: tuple[int, ...] = (0,),
                 call: dict | None = None, grid: dict[str, list[dict]] | None = None) -> list[SweepPoint]:
    """Every (method, settings, prompt, seed) point, dense references first."""
    grid = grid if grid is not None else method_grid(pipeline, (call or {}).get("num_inference_steps"))
    if methods is None:
        methods = list(grid)
    unknown = [m for m in methods if m not in grid]
    if unknown:
        raise ValueError(f"no settings grid for method(s) {unknown}; known: {sorted(grid)}")
    if not 1 <= n_prompts <= len(DEFAULT_PROMPTS):
        raise ValueError(f"n_prompts={n_prompts}: choose 1..{len(DEFAULT_PROMPTS)}")
    from .pipelines import pipeline_fingerprint

    call = dict(call or {})
    mid = pipeline_fingerprint(pipeline)
    prompts = DEFAULT_PROMPTS[:n_prompts]
    pts = [SweepPoint(pipeline, DENSE, p, s, {}, call, mid) for p in prompts for s in seeds]
    for m in methods:
        for st in grid[m]:
            pts += [SweepPoint(pipeline, m, p, s, dict(st), call, mid) for p in prompts for s in seeds]
    return pts


def fallback_points() -> list[SweepPoint]:
    """The small sweep ``kaleido report`` runs when there are no rows to report: Kaleido and four baselines on
    the RANDOM pipeline, one prompt, seed 0, 4 steps, 16 text tokens (its numbers only exercise the machinery)."""
    return build_points("random-wan", ["kaleido", "sparse_videogen", "block_topk", "tome", "adaptiv"], 1, (0,),
                        {"num_inference_steps": 4, "max_sequence_length": 16})
