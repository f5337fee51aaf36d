"""Mapping a GEMM onto the array: which GEMM dims go where, and how many folds.

GEMM ``C (M x N) = A (M x K) . B (K x N)``.  Following SCALE-Sim v2's convention:

====  ================  ================  ===================
flow  array rows (Sr)   array cols (Sc)   streamed in time (T)
====  ================  ================  ===================
os    M                 N                 K
ws    K                 N                 M
is    K                 M                 N
====  ================  ================  ===================

(``is``, input stationary, is SCALE-Sim v3's: A is held in the PEs, B streams.)

A fold is one ``R x C`` tile of the ``Sr x Sc`` spatial extent; there are
``ceil(Sr/R) * ceil(Sc/C)`` of them and a partial fold costs as much time as a full one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class FoldPlan:
    """Spatial extents, streamed length and fold counts of one GEMM on one array."""

    dataflow: str
    Sr: int
    Sc: int
    T: int
    row_folds: int
    col_folds: int

    @property
    def folds(self) -> int:
        return self.row_folds * self.col_folds


def ceil_div(a, b):
    """Integer ceiling division, works on ints and numpy integer arrays."""
    return -(-np.asarray(a) // b) if isinstance(a, np.ndarray) else -(-a // b)


def fold_plan(M: int, K: int, N: int, dataflow: str, R: int, C: int) -> FoldPlan:
    if dataflow == "os":
        Sr, Sc, T = M, N, K
    elif dataflow == "ws":
        Sr, Sc, T = K, N, M
    elif dataflow == "is":
        Sr, Sc, T = K, M, N
    else:
        raise ValueError(f"dataflow {dataflow!r} is not a dataflow; use 'os', 'ws' or 'is'")
    return FoldPlan(dataflow, Sr, Sc, T, ceil_div(Sr, R), ceil_div(Sc, C))


def k_fold_pieces(group_sizes: tuple[int, ...], R: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split channel groups at K-fold boundaries (WS maps K onto the array rows).

    Returns ``(piece_group, piece_fold, piece_size)``: piece ``p`` is
    ``piece_size[p]`` channels of group ``piece_group[p]`` that sit in K-fold
    ``piece_fold[p]``.  A group straddling a fold boundary gives two pieces.
    """
    pg, pf, ps = [], [], []
    off = 0
    for g, s in enumerate(group_sizes):
        start, end = off, off + s
        while start < end:
            f = start // R
            stop = min(end, (f + 1) * R)
            pg.append(g)
            pf.append(f)
            ps.append(stop - start)
            start = stop
        off = end
    return np.array(pg, dtype=np.int64), np.array(pf, dtype=np.int64), np.array(ps, dtype=np.int64)
