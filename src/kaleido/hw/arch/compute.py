"""Cycle model of a systolic array: folds, fill/drain, skew, preload.

Two timing modes (``ArrayConfig.timing``):

``scalesim_compat`` reproduces SCALE-Sim's stall-free totals exactly (v2 for os/ws,
v3.0.0 for all three flows, checked against real v3 outputs in
``tests/hw/arch/test_scalesim_reference.py``): folds run one after another and every fold
pays its own fill/drain (and, for WS / IS, its stationary-operand preload)::

    os:  sum_f (T_f + R + C - 2)  - 1        (T_f = K for a dense fold)
    ws:  sum_f (T_f + 2R + C - 2) - 1        (T_f = M; R cycles of preload exposed)
    is:  sum_f (T_f + 2R + C - 2) - 1        (T_f = N; R cycles of A-preload exposed)

``default`` models a double-buffered array: the next fold's weights (WS) are
preloaded, and the previous fold's outputs (OS) drained, while the current fold
streams, so a fold costs ``max(T_f, R)`` cycles (the preload/drain of R rows
bounds a short fold) and the skew ``R + C - 2`` (plus, for WS / IS, the first
preload ``R``) is paid once per GEMM.

Limited DRAM bandwidth (stalls while double-buffered SRAM halves refill) is
:func:`kaleido.hw.arch.memory.bandwidth_stalls`; everything here is stall-free.

In both modes a fold whose stream is empty (``T_f == 0``: every row it holds is
fully reused) is skipped.  ``T_f`` comes from the dense mapping or from the
dispatcher model (:mod:`kaleido.hw.arch.dispatcher`).
"""

from __future__ import annotations

import numpy as np

from .config import ArrayConfig
from .mapping import fold_plan


def fold_cycles(stream: np.ndarray, R: int, C: int, dataflow: str, timing: str) -> np.ndarray:
    """Cycles of each fold with streamed length ``stream``, without the once-per-GEMM terms.

    ``default``: ``max(T_f, R)``; ``scalesim_compat``: ``T_f`` plus the fold's own
    fill/drain (``R + C - 2``, and ``R`` more of preload in WS / IS); an empty fold
    (``T_f == 0``) costs nothing.  :func:`folded_cycles` is the sum of these plus the
    skew / first preload of ``default`` timing (or ``-1`` of ``scalesim_compat``), paid once
    when any fold is live; the dispatcher compares orders with it.
    """
    t = np.asarray(stream, dtype=np.float64)
    if timing == "scalesim_compat":
        per = R + C - 2 if dataflow == "os" else 2 * R + C - 2
        return np.where(t > 0, t + per, 0.0)
    return np.where(t > 0, np.maximum(t, R), 0.0)


def folded_cycles(stream: np.ndarray, counts: np.ndarray | int, cfg: ArrayConfig) -> float:
    """Total cycles of folds with stream lengths ``stream``, fold ``i`` run ``counts[i]`` times.

    ``stream``: 1-D array of per-fold streamed cycles (may be fractional when it is an
    expectation); ``counts``: how many times each of those folds runs (e.g. the
    column folds times the GEMM instances), an int for all of them or an array.
    """
    stream = np.asarray(stream, dtype=np.float64).reshape(-1)
    counts = np.broadcast_to(np.asarray(counts, dtype=np.float64), stream.shape)
    R, C = cfg.rows, cfg.cols
    live = stream > 0
    if float(counts[live].sum()) == 0:
        return 0.0
    per_fold = float((counts[live] * fold_cycles(stream[live], R, C, cfg.dataflow, cfg.timing)).sum())
    if cfg.timing == "scalesim_compat":
        return per_fold - 1
    return per_fold + R + C - 2 + (R if cfg.dataflow in ("ws", "is") else 0)


def dense_cycles(M: int, K: int, N: int, cfg: ArrayConfig) -> float:
    """Cycles of one dense GEMM ``(M x K) . (K x N)`` on ``cfg``."""
    p = fold_plan(M, K, N, cfg.dataflow, cfg.rows, cfg.cols)
    return folded_cycles(np.full(p.row_folds, p.T), p.col_folds, cfg)


def scalesim_sram_counts(M: int, K: int, N: int, cfg: ArrayConfig) -> dict[str, int]:
    """SCALE-Sim's stall-free SRAM access counts (words of 1 byte) for a dense GEMM.

    ifmap reads ``M*K*ceil(N/C)`` (os, ws) or ``M*K`` (is); filter reads
    ``K*N*ceil(M/R)`` (os), ``K*N`` (ws) or ``K*N*ceil(M/C)`` (is); ofmap writes
    ``M*N*ceil(K/R)`` (ws, is) or ``M*N + folds*(R+C)`` (os: the simulator counts the
    drain of every fold once more; reproduced, not endorsed).  v2 and v3.0.0 agree.
    """
    R, C = cfg.rows, cfg.cols
    p = fold_plan(M, K, N, cfg.dataflow, R, C)
    ifmap = M * K * p.col_folds
    if cfg.dataflow == "os":
        filt = K * N * p.row_folds
        ofmap = M * N + p.folds * (R + C)
    elif cfg.dataflow == "is":
        ifmap = M * K
        filt = K * N * p.col_folds
        ofmap = M * N * p.row_folds
    else:
        filt = K * N
        ofmap = M * N * p.row_folds
    return {"ifmap_reads": int(ifmap), "filter_reads": int(filt), "ofmap_writes": int(ofmap)}
