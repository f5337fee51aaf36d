"""The step caches' sweep points - PAB, FirstBlockCache, TaylorSeer, MagCache, cache-dit - and their stacks with
Kaleido (``{"techniques": [...]}`` settings of the ``stack`` technique, which :mod:`.catalog` gathers).

Each is chosen near the level the comparison ranks at (30 dB on the miniature model), plus the published
defaults; at few steps (:func:`~.policy.is_few_step`) each adds the points that make sense there, its most
aggressive useful one included.
"""

from __future__ import annotations

from .policy import QK_ONLY, GridUnavailable, calibrated_setting, is_few_step


def pab(pipeline: str, steps: int | None, sampler: str | None = None) -> list[dict]:
    """PAB's published default; at few steps also every timestep in range (its most aggressive useful point: with
    the default range only the middle steps of a 4-step schedule may skip)."""
    out = [dict(self_skip_range=2, cross_skip_range=4)]
    if is_few_step(steps):
        out.append(dict(self_skip_range=2, cross_skip_range=2, timestep_range=(0, 1001)))
    return out


def fbcache(pipeline: str, steps: int | None, sampler: str | None = None) -> list[dict]:
    """Threshold 0.1 (near the comparison's 30 dB at 25 steps); at few steps, where consecutive steps differ far
    more, the looser thresholds too (0.8: its most aggressive useful point)."""
    return [dict(threshold=t) for t in ((0.1, 0.2, 0.4, 0.8) if is_few_step(steps) else (0.1,))]


def taylorseer(pipeline: str, steps: int | None, sampler: str | None = None) -> list[dict]:
    """Interval 3 (near the comparison's 30 dB at 25 steps); at few steps interval 2 as well (3 is then its most
    aggressive useful point: at 4 steps it forecasts two of the three steps after the first)."""
    return [dict(cache_interval=k) for k in ((2, 3) if is_few_step(steps) else (3,))]


def taylorseer_stacks(pipeline: str, steps: int | None, sampler: str | None = None) -> list[dict]:
    """TaylorSeer (interval 3; at few steps 2) decides which units run, Kaleido reuses inside the units that do - on
    self-attention q.k^T only, on every op, and with the config calibrated for the pipeline and step count."""
    ts = dict(technique="taylorseer", cache_interval=2 if is_few_step(steps) else 3)
    return ([dict(techniques=[ts, dict(technique="kaleido", theta1=16, theta2=64, low_bits=7, **QK_ONLY)])]
            + [dict(techniques=[ts, dict(technique="kaleido", theta1=8, theta2=8, low_bits=6)])]
            + [dict(techniques=[ts, dict(technique="kaleido", **c)]) for c in calibrated_setting(pipeline, steps)])


def magcache(pipeline: str, steps: int | None, sampler: str | None = None) -> list[dict]:
    """MagCache's points on ``pipeline`` at ``steps``: the two that bracket the comparison's 30 dB on the miniature
    model (2 held-out prompts, seed 0: threshold 0.24, 8 steps in a row, the first 20% computed: 68% of the
    transformer at 35.2 / 33.4 dB; 0.5, 12, 10%: 80% at 30.3 / 27.9 dB; diffusers' defaults 0.06, 3, 20%: 56% at
    40.0 dB; a looser threshold alone is capped by the steps in a row).  Without ratios calibrated for that
    pipeline, step count and sampler (:func:`kaleido.techniques.step_cache.calibrated_mag_ratios`) it has none
    (:class:`~.policy.GridUnavailable`, naming the command that measures them): they depend on the checkpoint, on
    the step count and on the sampler."""
    from kaleido.techniques.step_cache import calibrate_command, calibrated_mag_ratios

    if steps is None:
        raise GridUnavailable(f"magcache: the number of steps {pipeline!r} runs is not known here (its ratios are "
                              "calibrated per step count); give the sweep's steps (kaleido compare --steps N)")
    ratios = calibrated_mag_ratios(pipeline, steps, sampler)
    if ratios is None:
        under = f" with the {sampler} sampler" if sampler else ""
        raise GridUnavailable(f"magcache: no magnitude ratios calibrated for pipeline {pipeline!r} at {steps} steps"
                              f"{under} (they depend on the checkpoint, the step count and the sampler); measure "
                              f"them with `{calibrate_command(pipeline, steps, sampler)}`")
    # at few steps: diffusers' defaults, then looser thresholds with the first step (or none) kept, up to skipping
    # every step it may (threshold 1.0: its most aggressive useful point)
    points = (((0.06, 3, 0.2), (0.24, 2, 0.25), (0.5, 2, 0.0), (1.0, 3, 0.0)) if is_few_step(steps)
              else ((0.24, 8, 0.2), (0.5, 12, 0.1)))
    return [dict(threshold=t, max_skip_steps=k, retention_ratio=r, num_inference_steps=int(steps),
                 mag_ratios=list(ratios)) for t, k, r in points]


def magcache_stacks(pipeline: str, steps: int | None, sampler: str | None = None) -> list[dict]:
    """MagCache's setting nearest 30 dB (its first point; at few steps its second) with Kaleido on self-attention
    q.k^T, and at few steps with the config calibrated for the pipeline and step count."""
    mag = dict(technique="magcache", **magcache(pipeline, steps, sampler)[1 if is_few_step(steps) else 0])
    out = [dict(techniques=[mag, dict(technique="kaleido", theta1=t1, theta2=t2, low_bits=lb, **QK_ONLY)])
           for t1, t2, lb in ((16, 64, 7), (8, 16, 6))]
    if is_few_step(steps):
        out += [dict(techniques=[mag, dict(technique="kaleido", **c)]) for c in calibrated_setting(pipeline, steps)]
    return out


def cache_dit(pipeline: str, steps: int | None, sampler: str | None = None) -> list[dict]:
    """DBCache F1B0 (the first block decides, as in FirstBlockCache) after 4 warm-up steps: the two points that
    bracket the comparison's 30 dB on the miniature model (first held-out prompt, seed 0, 25 steps: threshold 0.4,
    48% of the transformer at 33.0 dB; 0.5 with the TaylorSeer calibrator, 51% at 29.4 dB; cache-dit's own
    threshold 0.08 and 8 warm-up steps: 3%; 0.2: 36% at 42.0 dB, 49.9 dB with TaylorSeer).  ``random-wan`` runs
    and the students run without guidance: one call per step.  Without the cache-dit package it has none."""
    from kaleido.techniques.cache_dit_peer import PEERS_INSTALL
    from kaleido.techniques.registry import module_available
    from kaleido.tiny.pipeline import demo_settings

    if not module_available("cache_dit"):
        raise GridUnavailable(f"cache_dit: the cache-dit package is not installed; install it with {PEERS_INSTALL}")
    # one call per step: the random pipeline and every model whose own guidance is 1 (the distilled students)
    one_call = (dict(separate_cfg=False) if pipeline == "random-wan" or demo_settings(pipeline).guidance_scale == 1.0
                else {})
    if is_few_step(steps):
        # one warm-up step (cache-dit's 8 would be the whole run), thresholds up to its most aggressive useful one
        return ([dict(Fn_compute_blocks=1, Bn_compute_blocks=0, residual_diff_threshold=t, max_warmup_steps=1,
                      **one_call) for t in (0.2, 0.4, 0.8)]
                + [dict(Fn_compute_blocks=1, Bn_compute_blocks=0, residual_diff_threshold=0.4, max_warmup_steps=1,
                        taylorseer=True, taylorseer_order=1, **one_call)])
    return [dict(Fn_compute_blocks=1, Bn_compute_blocks=0, residual_diff_threshold=0.4, max_warmup_steps=4, **one_call),
            dict(Fn_compute_blocks=1, Bn_compute_blocks=0, residual_diff_threshold=0.5, max_warmup_steps=4,
                 taylorseer=True, taylorseer_order=1, **one_call)]


def cache_dit_stacks(pipeline: str, steps: int | None, sampler: str | None = None) -> list[dict]:
    """cache-dit's first point (at few steps its second) with Kaleido's config calibrated for the pipeline and step
    count."""
    first = dict(technique="cache_dit", **cache_dit(pipeline, steps, sampler)[1 if is_few_step(steps) else 0])
    return [dict(techniques=[first, dict(technique="kaleido", **c)]) for c in calibrated_setting(pipeline, steps)]
