"""The array's timing of folds whose stream is shorter than the array and longer, worked by hand.

A 4x4 array, and a 4-row x 8-column one. ``default`` timing (docs/hardware.md section 1, ``compute.py``): the array is double
buffered, so a fold costs ``max(T, R)`` cycles - the next fold's R-row preload (WS / IS) or the
previous fold's R-row drain (OS) bounds a short fold - and the skew ``R + C - 2`` (plus, in WS and
IS, the first stationary preload ``R``) is paid once. ``scalesim_compat``: every fold pays its own
fill and drain, ``T + R + C - 2`` (OS) or ``T + 2R + C - 2`` (WS / IS, preload exposed), minus 1
overall.
"""

import numpy as np
import pytest

from kaleido.hw.arch.compute import dense_cycles, fold_cycles, folded_cycles
from kaleido.hw.arch.config import ArrayConfig
from kaleido.hw.arch.mapping import fold_plan

R = C = 4

CASES = [
    # array (R, C), flow, (M, K, N), folds, streamed T per fold, default cycles, scalesim_compat cycles
    # WS on 4x4: K on the 4 rows, N on the 4 columns, the M rows of A stream. One fold.
    ((4, 4), "ws", (2, 4, 4), 1, 2, 4 + 6 + 4, (2 + 8 + 4 - 2) - 1),  # 2 rows: the 4-row preload bounds it: 14 / 11
    ((4, 4), "ws", (10, 4, 4), 1, 10, 10 + 6 + 4, (10 + 8 + 4 - 2) - 1),  # 10 rows stream: 20 / 19
    # K = 8 and N = 6: 2 row folds x 2 column folds
    ((4, 4), "ws", (2, 8, 6), 4, 2, 4 * 4 + 6 + 4, 4 * (2 + 10) - 1),  # 26 / 47
    ((4, 4), "ws", (10, 8, 6), 4, 10, 4 * 10 + 6 + 4, 4 * (10 + 10) - 1),  # 50 / 79
    # OS on 4x4: M on the rows (10 rows: 3 row folds), N = 4 on the columns, the K channels stream
    ((4, 4), "os", (10, 2, 4), 3, 2, 3 * 4 + 6, 3 * (2 + 6) - 1),  # K = 2: the 4-row drain bounds each fold: 18 / 23
    ((4, 4), "os", (10, 10, 4), 3, 10, 3 * 10 + 6, 3 * (10 + 6) - 1),  # K = 10: 36 / 47
    ((4, 4), "os", (2, 10, 4), 1, 10, 10 + 6, (10 + 6) - 1),  # M = 2 rows: a partial fold costs a full one: 16 / 15
    # IS on 4x4: K on the rows, M on the columns (10: 3 column folds), the N columns of B stream
    ((4, 4), "is", (10, 4, 2), 3, 2, 3 * 4 + 6 + 4, 3 * (2 + 10) - 1),  # N = 2: 22 / 35
    ((4, 4), "is", (10, 4, 10), 3, 10, 3 * 10 + 6 + 4, 3 * (10 + 10) - 1),  # N = 10: 40 / 59
    # a 4-row x 8-column array tells rows from columns: skew R + C - 2 = 10, WS / IS preload R = 4
    ((4, 8), "ws", (2, 4, 10), 2, 2, 2 * 4 + 10 + 4, 2 * (2 + 8 + 8 - 2) - 1),  # N = 10: 2 column folds: 22 / 31
    ((4, 8), "ws", (10, 4, 10), 2, 10, 2 * 10 + 10 + 4, 2 * (10 + 14) - 1),  # 34 / 47
    ((4, 8), "os", (10, 2, 4), 3, 2, 3 * 4 + 10, 3 * (2 + 10) - 1),  # 3 row folds of 4 rows, drained in 4: 22 / 35
    ((4, 8), "os", (10, 10, 4), 3, 10, 3 * 10 + 10, 3 * (10 + 10) - 1),  # 40 / 59
    ((4, 8), "is", (10, 4, 2), 2, 2, 2 * 4 + 10 + 4, 2 * (2 + 14) - 1),  # M = 10 on 8 columns: 2 folds: 22 / 31
    ((4, 8), "is", (10, 4, 10), 2, 10, 2 * 10 + 10 + 4, 2 * (10 + 14) - 1),  # 34 / 47
]


@pytest.mark.parametrize("arr, flow, mkn, folds, T, default, compat", CASES)
def test_dense_folds_short_and_long(arr, flow, mkn, folds, T, default, compat):
    p = fold_plan(*mkn, flow, *arr)
    assert (p.folds, p.T) == (folds, T)
    assert dense_cycles(*mkn, ArrayConfig(*arr, dataflow=flow)) == default
    assert dense_cycles(*mkn, ArrayConfig(*arr, dataflow=flow, timing="scalesim_compat")) == compat


def test_streams_from_the_dispatcher():
    # three WS folds streaming 0 (every row FULL: skipped), 2 and 10 rows, each run twice (2 column folds)
    stream, runs = np.array([0.0, 2.0, 10.0]), 2
    ws = ArrayConfig(R, C)
    assert fold_cycles(stream, R, C, "ws", "default").tolist() == [0, 4, 10]
    assert folded_cycles(stream, runs, ws) == 2 * (4 + 10) + 6 + 4  # = 38
    assert fold_cycles(stream, R, C, "ws", "scalesim_compat").tolist() == [0, 12, 20]
    assert folded_cycles(stream, runs, ws.with_(timing="scalesim_compat")) == 2 * (12 + 20) - 1  # = 63
    # OS pays no preload: 4 + 10 + skew 6; per fold in compat T + R + C - 2
    assert folded_cycles(stream, 1, ArrayConfig(R, C, dataflow="os")) == 4 + 10 + 6
    assert fold_cycles(stream, R, C, "os", "scalesim_compat").tolist() == [0, 8, 16]
    # nothing live: no skew either
    assert folded_cycles(np.zeros(3), runs, ws) == 0.0
    # an expected (fractional) stream is priced like any other
    assert folded_cycles(np.array([2.5, 6.5]), 1, ws) == 4 + 6.5 + 10
