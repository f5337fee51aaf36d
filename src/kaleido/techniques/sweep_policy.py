"""The comparison's sweep policy that every technique's grid shares: what a few-step regime is, which packaged
Kaleido config is calibrated for a pipeline and step count, and Kaleido's q.k^T-only setting (the level the
attention baselines are matched at). Names only: the configs themselves are loaded by Kaleido's grid
(:func:`kaleido.techniques.kaleido_reuse.method.calibrated_setting`).
"""

from __future__ import annotations

#: Kaleido on self-attention q.k^T only (like the attention baselines it is matched against)
QK_ONLY = dict(cross_qk=False, proj=False, ffn=False)


#: the step counts at and below which a sweep is a few-step regime (docs/few-step.md): every technique adds
#: the points that make sense there (its most aggressive useful one included)
FEW_STEPS = 8


def is_few_step(steps: int | None) -> bool:
    """Whether a sweep at ``steps`` denoising steps is a few-step regime (:data:`FEW_STEPS`)."""
    return steps is not None and int(steps) <= FEW_STEPS


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
