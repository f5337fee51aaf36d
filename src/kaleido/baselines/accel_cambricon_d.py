"""Cambricon-D-class accelerator (ISCA'24) model: differential computing across steps.

Dataflow: after the first step every linear layer multiplies the low-bit temporal
difference instead of the full input.  A systolic array cannot skip scattered zero
deltas, so we model the benefit as *bit-width packing*: a ``b``-bit delta operand
occupies ``b/8`` of an 8-bit PE lane, i.e. the reduction dimension shrinks to
``ceil(K*b/8)`` on the differential steps.  The measured share of the op's MACs that
ran at full 8 bits (the dense first step) keeps full cost; the rest (low-bit or
skipped) costs ``b/8``.  Attention runs dense (softmax breaks the difference).
Not modelled: the sign-mask outlier path and the extra accumulator traffic for the
reference outputs (both would lower the speedup).
"""

from __future__ import annotations

from .accel_common import MeasuredSkips, ceil_frac, run_design

ASSUMPTIONS = ("low-bit deltas packed 8/b per PE lane; zero deltas are not skipped by the array",
               "reference-output accumulator traffic and the outlier path not charged")


def _gemm(g, fr, cfg):
    from kaleido.hw.compute import dense_cycles

    full = dense_cycles(g.M, g.K, g.N, cfg)
    if fr.mac8 >= 1.0 or fr.low_bits >= 8:
        return full, g.M * g.K * g.N, 0.0, 8
    b = fr.low_bits
    low = dense_cycles(g.M, ceil_frac(g.K, b / 8), g.N, cfg)
    macs = g.M * g.K * g.N
    return fr.mac8 * full + (1 - fr.mac8) * low, fr.mac8 * macs, (1 - fr.mac8) * macs, b


def simulate_cambricon_d(workload, skips: MeasuredSkips, cfg=None, energy=None):
    return run_design("Cambricon-D-class (differential, low-bit deltas)", workload, skips, _gemm, cfg, energy,
                      ASSUMPTIONS)
