"""AdapTiV-class accelerator (MICRO'24) model: token merging on a dense systolic array.

Dataflow: merged tokens are removed before attention, so self-attention q.k^T and P.V
run as *smaller dense GEMMs*: with a measured q.k^T saving ``s`` (``1 - (N'/N)^2``),
the merged token fraction is ``m = sqrt(1 - s)`` and q.k^T becomes
``(m*M) x K x (m*N)``, P.V ``(m*M) x (m*K) x N``; every other op runs dense (our
AdapTiV algorithm merges inside attention only).  The cycles come from the same fold
model as the dense array, so fold quantisation of the smaller GEMMs is included.
Not modelled: the sign-similarity and merge/unmerge units (assumed to overlap with
the array; their cost would lower the speedup).
"""

from __future__ import annotations

import math

from .accel_common import MeasuredSkips, ceil_frac, run_design

ASSUMPTIONS = ("merge/unmerge and sign-similarity units overlap with the array (not charged)",
               "token merging applies to self-attention only, as in our AdapTiV algorithm")


def _gemm(g, fr, cfg):
    from kaleido.hw.compute import dense_cycles

    if g.op in ("self_attn_qk", "self_attn_pv") and fr.skipped > 0:
        m = math.sqrt(max(0.0, 1.0 - fr.skipped))
        if g.op == "self_attn_qk":
            M, K, N = ceil_frac(g.M, m), g.K, ceil_frac(g.N, m)
        else:
            M, K, N = ceil_frac(g.M, m), ceil_frac(g.K, m), g.N
        return dense_cycles(M, K, N, cfg), M * K * N, 0.0, 8
    return dense_cycles(g.M, g.K, g.N, cfg), g.M * g.K * g.N, 0.0, 8


def simulate_adaptiv(workload, skips: MeasuredSkips, cfg=None, energy=None):
    return run_design("AdapTiV-class (token merging)", workload, skips, _gemm, cfg, energy, ASSUMPTIONS)
