"""EXION-class accelerator (HPCA'25) model: FFN reuse and eager attention prediction.

Dataflow: EXION's ConMerge compacts the surviving (sparse) rows/columns so the array
processes them densely.  We model ideal compaction: with a measured kept fraction
``k`` of an op's MACs, q.k^T runs as ``M x K x (k*N)`` (each query keeps ``k*N`` keys),
P.V as ``M x (k*K) x N``, the FFN's first linear as ``M x K x (k*N)`` (kept neurons)
and its second as ``M x (k*K) x N``.  Projections and cross-attention run dense.
Not modelled: the leading-one prediction unit (assumed overlapped; its work is in the
method's ``estimate`` MACs), ConMerge's own cycles and any imbalance between rows
that keep different numbers of neurons (all of which would lower the speedup).
"""

from __future__ import annotations

from .accel_common import MeasuredSkips, ceil_frac, run_design

ASSUMPTIONS = ("ideal ConMerge compaction: kept work runs as a dense GEMM of reduced width",
               "prediction unit overlapped with the array (not charged)")


def _gemm(g, fr, cfg):
    from kaleido.hw.compute import dense_cycles

    k = fr.kept
    if k < 1.0 and g.op in ("self_attn_qk", "ffn_up"):
        M, K, N = g.M, g.K, ceil_frac(g.N, k)
    elif k < 1.0 and g.op in ("self_attn_pv", "ffn_down"):
        M, K, N = g.M, ceil_frac(g.K, k), g.N
    else:
        M, K, N = g.M, g.K, g.N
    return dense_cycles(M, K, N, cfg), M * K * N, 0.0, 8


def simulate_exion(workload, skips: MeasuredSkips, cfg=None, energy=None):
    return run_design("EXION-class (FFN reuse + eager prediction)", workload, skips, _gemm, cfg, energy, ASSUMPTIONS)
