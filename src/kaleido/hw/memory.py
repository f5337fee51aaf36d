"""SRAM and DRAM traffic of one GEMM instance (bytes), dense and with reuse.

On-chip (default timing, per instance, 1-byte operands, 4-byte partial sums):

* WS: ifmap reads ``M*K*ceil(N/C)`` (every column fold re-streams A), filter reads
  ``K*N`` (each weight loaded once), ofmap ``M*N*kf`` partial-sum writes and
  ``M*N*(kf-1)`` reads (``kf = ceil(K/R)`` K-folds accumulate in the ofmap buffer).
* OS: ifmap ``M*K*ceil(N/C)``, filter ``K*N*ceil(M/R)``, ofmap ``M*N`` writes.

With reuse, the A stream carries only what the PEs use: nothing for FULL, a
``low_bits``-wide difference for PARTIAL, a byte for COMPUTE; the decision reads A
and the reference operand once per row (``2*M_grid*K``, charged to the ifmap buffer).

Off-chip: A and B are fetched once if either fits its buffer; otherwise a block of
one stays resident and the other is re-streamed per block (the cheaper order); C is
written once (1 byte per output, requantised
int8).  Attention is fused: the scores (q.k^T output) and P (P.V input) stay on chip.
"""

from __future__ import annotations

from .config import ArrayConfig
from .mapping import ceil_div
from .workloads import Gemm


def sram_bytes(M: int, K: int, N: int, cfg: ArrayConfig, a_stream_frac: float = 1.0, decision_rows: int = 0) -> dict[str, float]:
    R, C = cfg.rows, cfg.cols
    col_folds = ceil_div(N, C)
    ifmap = M * K * col_folds * a_stream_frac + 2.0 * decision_rows * K
    if cfg.dataflow == "ws":
        kf = ceil_div(K, R)
        return {"ifmap": float(ifmap), "filter": float(K * N), "ofmap": float(4 * M * N * (2 * kf - 1))}
    return {"ifmap": float(ifmap), "filter": float(K * N * ceil_div(M, R)), "ofmap": float(4 * M * N)}


def dram_bytes(g: Gemm, cfg: ArrayConfig) -> float:
    """Off-chip bytes of one instance of ``g``.

    Attention runs fused, one block of query rows at a time (as many as fit the ifmap
    buffer with ``head_dim`` channels): k (for q.k^T) or v (for P.V) is streamed once
    per query block; the scores and P never leave the chip.
    """
    M, K, N = g.M, g.K, g.N
    ifmap = cfg.buffers.usable_bytes("ifmap")
    if g.op in ("self_attn_qk", "cross_attn_qk"):
        return float(M * K + K * N * ceil_div(M * K, ifmap))
    if g.op in ("self_attn_pv", "cross_attn_pv"):
        return float(K * N * ceil_div(M * N, ifmap) + M * N)
    a_once, b_once = M * K, K * N
    filt = cfg.buffers.usable_bytes("filter")
    if b_once <= filt or a_once <= ifmap:
        return float(a_once + b_once + M * N)
    # neither operand fits: keep a block of one resident and stream the other per block
    a_resident = a_once + b_once * ceil_div(a_once, ifmap)
    b_resident = b_once + a_once * ceil_div(b_once, filt)
    return float(min(a_resident, b_resident) + M * N)
