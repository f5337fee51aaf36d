"""Default sweeps: which settings of each method, which prompts, which seeds.

The settings of each technique are its grid, kept here with the comparison and registered once
(:mod:`.catalog`: :data:`~.catalog.GRIDS`, and the step caches' stacks with Kaleido in
:data:`~.catalog.STACKS`); the policy every grid shares - what a few-step regime is, which packaged
Kaleido config is calibrated where - is :mod:`.policy`.  The points are chosen near the level the
comparison ranks at (30 dB on the miniature model), plus the baselines' published defaults
(:mod:`.step_caches`, :mod:`.reuse_and_sparsity`); block sizes follow the token count of the pipeline.
This module reads them for a pipeline, step count and sampler and adds the prompts.
"""

from __future__ import annotations

from kaleido.tiny.data import HELDOUT_PROMPTS

from ..points import DENSE, SweepPoint
from .catalog import GRIDS, STACKS, register_grid
from .policy import GridUnavailable

#: Prompts understood by the miniature pipeline's vocabulary (shapes moving on backgrounds): the miniature model's
#: held-out prompts (:data:`kaleido.tiny.data.HELDOUT_PROMPTS`), which no training, distillation or calibration sees.
DEFAULT_PROMPTS = HELDOUT_PROMPTS


def default_steps(pipeline: str) -> int | None:
    """The number of steps a sweep of ``pipeline`` runs without ``--steps`` (``None``: the pipeline's own)."""
    if pipeline == "random-wan":
        from ..pipelines import RANDOM_WAN_SETTINGS

        return RANDOM_WAN_SETTINGS.num_inference_steps
    from kaleido.tiny.pipeline import demo_settings

    return demo_settings(pipeline).num_inference_steps


def method_grid(pipeline: str, steps: int | None = None, methods: list[str] | None = None,
                notes: list[str] | None = None, sampler: str | None = None) -> dict[str, list[dict]]:
    """Settings per method for ``pipeline`` (``random-wan`` has 80 tokens, ``tiny`` 1280) run with ``steps``
    denoising steps (``None``: the pipeline's default) with ``sampler`` (``None``: the pipeline's own), in the
    registry's order: each registered technique's grid (:data:`.catalog.GRIDS`).

    ``methods``: only these (``None``: every technique with a grid).  A technique without points at this
    pipeline and step count (MagCache without ratios calibrated for them) is refused in one line when
    ``methods`` names it (``ValueError``, naming the command that fixes it) and otherwise left out, its
    reason appended to ``notes``.

    The comparison runs 8 prompts x 2 seeds of every setting and ranks methods at >= 30 dB, so each
    baseline keeps its setting nearest that level on the miniature model (earlier 4-prompt runs:
    docs/results/README.md) and Kaleido its points around it: a setting far under it costs 16
    generations and says nothing about the ranking."""
    from kaleido.techniques import TECHNIQUES

    steps = steps if steps is not None else default_steps(pipeline)
    out: dict[str, list[dict]] = {}
    for name in TECHNIQUES:
        if name not in GRIDS or (methods is not None and name not in methods):
            continue
        try:
            out[name] = GRIDS[name](pipeline, steps, sampler)
        except GridUnavailable as e:
            if methods is not None:
                raise ValueError(str(e)) from None
            if notes is not None:
                notes.append(f"{e}; {name} is left out of this sweep")
    return out


def build_points(pipeline: str, methods: list[str] | None = None, n_prompts: int = 2, seeds: tuple[int, ...] = (0,),
                 call: dict | None = None, grid: dict[str, list[dict]] | None = None,
                 notes: list[str] | None = None) -> list[SweepPoint]:
    """Every (method, settings, prompt, seed) point, dense references first (``grid``: the settings per method,
    default :func:`method_grid`'s, which appends to ``notes`` why a technique is left out)."""
    if grid is None:
        grid = method_grid(pipeline, (call or {}).get("num_inference_steps"), methods, notes,
                           (call or {}).get("sampler"))
    if methods is None:
        methods = list(grid)
    unknown = [m for m in methods if m not in grid]
    if unknown:
        raise ValueError(f"no settings grid for method(s) {unknown}; known: {sorted(grid)}")
    if not 1 <= n_prompts <= len(DEFAULT_PROMPTS):
        raise ValueError(f"n_prompts={n_prompts}: choose 1..{len(DEFAULT_PROMPTS)}")
    from ..pipelines import pipeline_fingerprint

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


__all__ = ["DEFAULT_PROMPTS", "GRIDS", "STACKS", "GridUnavailable", "build_points", "default_steps",
           "fallback_points", "method_grid", "register_grid"]
