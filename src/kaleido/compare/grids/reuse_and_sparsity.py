"""The sweep points of Kaleido and of the attention and accelerator baselines it is matched against (block
top-k, Sparse VideoGen, ToMe, AdapTiV-, EXION- and Cambricon-D-class).

Each baseline keeps its setting nearest the comparison's 30 dB on the miniature model (earlier 4-prompt runs:
docs/results/README.md); Kaleido keeps its points around it, with the packaged config calibrated for the
pipeline and step count (:func:`~.policy.calibrated_setting`) as one more.
"""

from __future__ import annotations

from .policy import QK_ONLY, calibrated_setting, is_few_step, sweep_block_size


def kaleido(pipeline: str, steps: int | None, sampler: str | None = None) -> list[dict]:
    # theta2 <= 2**(low_bits-1) keeps PARTIAL reuse exact (SPEC §3); larger thresholds need more low bits; the
    # miniature model's q is noisy in int8 units (L-inf over whole RoPE groups), so the comparison levels need large
    # thresholds; self-attention q.k^T only, like the attention baselines (sparse attention, token merging) it is
    # matched against (errors from reused linears do not enter the comparison); the calibrated default
    # (kaleido calibrate, docs/results/README.md) is one more point on the miniature pipeline. At few steps the
    # quality headroom is spent with wider bands on every op.
    wider = ([dict(theta1=t1, theta2=t2, low_bits=7) for t1, t2 in ((16, 64), (32, 64))]
             if is_few_step(steps) else [])
    return ([dict(theta1=t1, theta2=t2, low_bits=lb) for t1, t2, lb in ((8, 8, 6), (16, 32, 6))]
            + [dict(theta1=32, theta2=64, low_bits=7, **QK_ONLY)] + wider + calibrated_setting(pipeline, steps))


def block_topk(pipeline: str, steps: int | None, sampler: str | None = None) -> list[dict]:
    # density 0.7 keeps exactly 70% of the key blocks: 30% of q.k^T saved
    return [dict(density=0.7, block_size=sweep_block_size(pipeline))]


def sparse_videogen(pipeline: str, steps: int | None, sampler: str | None = None) -> list[dict]:
    # density 0.7 keeps 70% of the key blocks: 30% of q.k^T saved (0.5 gave 19.9 / 26.4 dB on 4 prompts of the
    # miniature model, far under the comparison's 30 dB)
    return [dict(density=0.7, block_size=sweep_block_size(pipeline))]


def tome(pipeline: str, steps: int | None, sampler: str | None = None) -> list[dict]:
    # ToMe saves 1 - (1 - ratio)^2 of q.k^T: 19% (0.25: 44% at 26.1 dB on 4 prompts of the miniature model)
    return [dict(ratio=0.1)]


def adaptiv(pipeline: str, steps: int | None, sampler: str | None = None) -> list[dict]:
    return [dict(tau=0.75)]  # (0.6: 21.4 dB on 4 prompts of the miniature model)


def exion(pipeline: str, steps: int | None, sampler: str | None = None) -> list[dict]:
    return [dict(attn_density=0.5, ffn_tau=0.05)]


def cambricon_d(pipeline: str, steps: int | None, sampler: str | None = None) -> list[dict]:
    return [dict(delta_bits=4)]
