"""Cambricon-D-class accelerator (ISCA'24) model: differential computing across steps.

Dataflow: after the first step every linear layer multiplies the low-bit temporal
difference instead of the full input.  A systolic array cannot skip scattered zero
deltas, so the benefit is *bit-width packing*: a ``b``-bit delta occupies ``b/8`` of an
8-bit PE lane, i.e. the reduction dimension shrinks to ``ceil(K*b/8)`` on differential
calls; dense calls (the first step, refreshes) keep full cost.  Attention runs dense
(softmax breaks the difference).

* :func:`gemm_cost` (the upper bound, also what :meth:`~.replay.ReplayedDesign.count`
  runs on :class:`~.common.MeasuredSkips` of rows without a trace): the packing only.
* :func:`replay_cost` (trace replay, per recorded step and layer): plus the outlier
  path - input entries whose difference does not fit ``b`` bits at the input's int8
  scale (share measured while the algorithm ran) are multiplied at 8 bits, compacted
  onto the array - and the memory traffic of differential computing: the previous
  step's outputs are read and the new ones written at 16 bits (``y = y_ref + W d``),
  the 1-bit sign mask of the input is loaded (Cambricon-D's sign-mask dataflow), and
  the delta operand streams at ``b`` bits instead of 8.
"""

from __future__ import annotations

from types import MappingProxyType

from ..arch.compute import dense_cycles
from .common import GemmCost, ceil_frac
from .replay import ReplayedDesign

#: this design's name in results and tables
LABEL = "Cambricon-D-class (differential, low-bit deltas)"
ASSUMPTIONS = ("outliers compacted perfectly onto the array (a real outlier path is slower)",
               "activation functions' sign-mask work beyond the 1-bit mask load not charged")
ATTN = ("self_attn_qk", "self_attn_pv", "cross_attn_qk", "cross_attn_pv")
PREV_OUTPUT_BYTES = 2  # previous-step outputs kept at 16 bits

INPUTS = {
    "dense vs differential calls, non-zero low-bit deltas per step and layer":
        "MEASURED: trace of the cambricon_d algorithm",
    "outlier share (difference beyond delta_bits at the input's int8 scale)":
        "MEASURED: raw step-to-step input differences seen while the algorithm ran",
    "outliers multiplied at 8 bits with ideal compaction on the array": "ASSUMED (no Cambricon-D figure offline)",
    "1-bit sign mask of every differential input loaded from DRAM":
        "paper: Cambricon-D (ISCA'24) abstract - sign-mask dataflow loads 1-bit signs instead of raw inputs",
    "previous-step outputs read and written at 16 bits": "ASSUMED",
}


def gemm_cost(g, fr, cfg):
    """``(cycles, mac8, mac_low, low_bits)`` of one GEMM under the ideal model at the op's MAC shares ``fr``."""
    full = dense_cycles(g.M, g.K, g.N, cfg)
    if fr.mac8 >= 1.0 or fr.low_bits >= 8:
        return full, g.M * g.K * g.N, 0.0, 8
    b = fr.low_bits
    low = dense_cycles(g.M, ceil_frac(g.K, b / 8), g.N, cfg)
    macs = g.M * g.K * g.N
    return fr.mac8 * full + (1 - fr.mac8) * low, fr.mac8 * macs, (1 - fr.mac8) * macs, b


def replay_cost(g, c, cfg, base):
    """:class:`~.common.GemmCost` of one instance of ``g`` at recorded shares ``c`` (``base``: its dense cost)."""
    if g.op in ATTN or c.mac8 >= 1.0 or c.low_bits >= 8:
        return base
    b, f8 = c.low_bits, c.mac8
    M, K, N = g.M, g.K, g.N
    macs = float(M) * K * N
    Kb = ceil_frac(K, b / 8)
    low = dense_cycles(M, Kb, N, cfg)
    o = c.outliers if c.outliers is not None else 0.0
    outlier = o * base.cycles
    diff = 1.0 - f8
    cyc = f8 * base.cycles + diff * (low + outlier)
    extra = M * K / 8.0 + M * N * (2.0 * PREV_OUTPUT_BYTES - 1.0) - M * K * (1.0 - b / 8.0)
    return GemmCost(cyc, (f8 + c.mac_low * b / 8 + diff * o) * macs, f8 * macs + diff * o * macs,
                    c.mac_low * macs, b, base.dram_bytes + diff * extra,
                    {"Cambricon-D outlier path (8-bit)": diff * outlier})


class CambriconDClass(ReplayedDesign):
    name = method = "cambricon_d"
    label = LABEL
    assumptions = ASSUMPTIONS
    inputs = MappingProxyType(INPUTS)
    gemm_cost = staticmethod(gemm_cost)
    replay_cost = staticmethod(replay_cost)
