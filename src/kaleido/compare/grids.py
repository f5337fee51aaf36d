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


def method_grid(pipeline: str) -> dict[str, list[dict]]:
    """Settings per method for ``pipeline`` (``random-wan`` has 80 tokens, ``tiny`` 1280)."""
    small = pipeline == "random-wan"
    block = 8 if small else 64
    return {
        # theta2 <= 2**(low_bits-1) keeps PARTIAL reuse exact (SPEC §3); larger thresholds need more low bits
        # on the miniature model (2, 8) saves little self-attention q.k^T (its q is noisy in int8
        # units, L-inf over whole RoPE groups): the large thresholds reach the 50% / 70% comparison levels
        "kaleido": [dict(theta1=t1, theta2=t2, low_bits=lb)
                    for t1, t2, lb in ((2, 8, 4), (16, 32, 6), (32, 32, 6), (48, 64, 7), (64, 64, 7))]
        + [dict(theta1=t, theta2=t, low_bits=7, metric="mean_abs") for t in (24, 48)]
        # self-attention q.k^T only, like the attention baselines (sparse attention, token merging) it is
        # matched against: errors from reused linears do not enter the comparison
        + [dict(theta1=t1, theta2=64, low_bits=7, cross_qk=False, proj=False, ffn=False) for t1 in (32, 40, 48, 56, 64)],
        # density 0.5 / 0.3 keep exactly 50% / 30% of the key blocks: q.k^T savings 50% / 70%
        "sparse_videogen": [dict(density=d, block_size=block) for d in (0.5, 0.3)],
        "block_topk": [dict(density=d, block_size=block) for d in (0.5, 0.3)],
        # ToMe saves 1 - (1 - ratio)^2 of q.k^T: 44%, 51%, 70%, 84%
        "tome": [dict(ratio=r) for r in (0.25, 0.3, 0.45, 0.6)],
        "adaptiv": [dict(tau=t) for t in (0.9, 0.75, 0.6, 0.5)],
        "pab": [dict(self_skip_range=2, cross_skip_range=4)],
        "fbcache": [dict(threshold=0.1)],
        "taylorseer": [dict(cache_interval=3)],
        "exion": [dict(attn_density=0.5, ffn_tau=0.05)],
        "cambricon_d": [dict(delta_bits=4)],
        # a step cache stacked with Kaleido (kaleido.baselines.stack): TaylorSeer decides which units run,
        # Kaleido reuses inside the units that do - on self-attention q.k^T only, and on every op
        "stack": [dict(techniques=[dict(technique="taylorseer", cache_interval=3),
                                   dict(technique="kaleido", theta1=t1, theta2=64, low_bits=7, cross_qk=False,
                                        proj=False, ffn=False)]) for t1 in (32, 48)]
        + [dict(techniques=[dict(technique="taylorseer", cache_interval=3),
                            dict(technique="kaleido", theta1=16, theta2=32, low_bits=6)])],
    }


def build_points(pipeline: str, methods: list[str] | None = None, n_prompts: int = 2, seeds: tuple[int, ...] = (0,),
                 call: dict | None = None, grid: dict[str, list[dict]] | None = None) -> list[SweepPoint]:
    """Every (method, settings, prompt, seed) point, dense references first."""
    grid = grid if grid is not None else method_grid(pipeline)
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
