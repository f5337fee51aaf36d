"""The sweep policy every technique's grid shares: what a few-step regime is, which packaged Kaleido config is
calibrated for a pipeline and step count, Kaleido's q.k^T-only setting (the level the attention baselines are
matched at) and the block size of the block-sparse baselines' points.
"""

from __future__ import annotations

from typing import Callable

#: ``grid(pipeline, steps, sampler) -> [settings, ...]``: a technique's default sweep settings on ``pipeline`` run
#: with ``steps`` denoising steps (``None``: the pipeline's own, unknown here) and ``sampler``
#: (:data:`kaleido.sampling.SAMPLERS`; ``None``: the pipeline's own); raises :class:`GridUnavailable` where it has none
Grid = Callable[[str, "int | None", "str | None"], list]


class GridUnavailable(ValueError):
    """A technique has no sweep settings for this (pipeline, steps), and says why in one line (what to run)."""


#: Kaleido on self-attention q.k^T only (like the attention baselines it is matched against)
QK_ONLY = dict(cross_qk=False, proj=False, ffn=False)


#: the step counts at and below which a sweep is a few-step regime (docs/few-step.md): every technique adds
#: the points that make sense there (its most aggressive useful one included)
FEW_STEPS = 8


def is_few_step(steps: int | None) -> bool:
    """Whether a sweep at ``steps`` denoising steps is a few-step regime (:data:`FEW_STEPS`)."""
    return steps is not None and int(steps) <= FEW_STEPS


def sweep_block_size(pipeline: str) -> int:
    """The block size the comparison's sweep uses on ``pipeline``: 8 tokens on ``random-wan`` (80 tokens),
    64 on the miniature pipeline (1280) and the others."""
    return 8 if pipeline == "random-wan" else 64


def calibrated_config_name(pipeline: str, steps: int | None) -> str | None:
    """The packaged KaleidoConfig calibrated (``kaleido calibrate``) for ``pipeline`` at ``steps``: the distilled
    student's own (``tiny-turbo-default``), the teacher's at few steps (``tiny-8-steps``), else ``tiny-default``
    for the miniature pipeline; ``None`` for the random test pipeline."""
    if pipeline == "random-wan":
        return None
    if pipeline in ("tiny-turbo", "tiny-rcm"):  # the distilled students: each one's own
        return f"{pipeline}-default"
    if pipeline == "tiny" and is_few_step(steps):
        return "tiny-8-steps"
    return "tiny-default"


def packaged_config_setting(name: str) -> list[dict]:
    """``[{"config": ..., "label": name}]`` for a packaged KaleidoConfig (none when it is not shipped)."""
    from kaleido.techniques.kaleido_reuse.config import KaleidoConfig, packaged_configs

    if name not in packaged_configs():
        return []
    return [dict(config=KaleidoConfig.load(name).to_dict(), label=name)]


def calibrated_setting(pipeline: str, steps: int | None) -> list[dict]:
    """``[{"config": ..., "label": name}]`` for :func:`calibrated_config_name` (none when it is not shipped)."""
    name = calibrated_config_name(pipeline, steps)
    return [] if name is None else packaged_config_setting(name)
