"""EXION-class accelerator (HPCA'25) model: FFN reuse and eager attention prediction.

Dataflow: EXION's ConMerge compacts the surviving (sparse) columns so the array
processes them densely.

* :func:`gemm_cost` (the upper bound, also what :meth:`~.replay.ReplayedDesign.count` runs
  on :class:`~.common.MeasuredSkips` of rows without a trace): perfect compaction - with a
  kept share ``k`` of an op's MACs, q.k^T runs as ``M x K x (k*N)``, P.V as ``M x (k*K) x N``, the FFN's first linear as
  ``M x K x (k*N)`` and its second as ``M x (k*K) x N``; nothing else is charged.
* :func:`replay_cost` (trace replay): compaction works per tile of ``tile_rows`` rows
  (tokens / queries) held by the array at once, so a tile processes the *union* of
  the columns (neurons / keys) its rows keep - the measured ``tile`` share replaces
  ``k`` (imperfect utilisation: padding of rows that keep fewer columns).  Condensing
  the bitmask into index lists runs on a side unit (``M*N`` mask bits at 8 per element
  slot), exposed beyond the GEMM's array cycles; the eager prediction (the recorded
  ``estimate`` MACs: leading-one products at 1/4 of an 8x8 MAC) runs on the array
  before the sparse q.k^T of the same head; the FFN bitmask (one bit per token and
  neuron) goes through DRAM.  Projections and cross-attention run dense.
  Merging condensed tiles of *different* row tiles (the "Merge" of ConMerge) is not
  modelled: it would recover part of the union padding.
"""

from __future__ import annotations

from types import MappingProxyType

from ..arch.compute import dense_cycles
from ..arch.memory import dram_bytes
from ..inputs.workloads import Gemm
from .common import SIDE_SOURCE, GemmCost, ceil_frac, side_cycles
from .replay import ReplayedDesign

#: this design's name in results and tables
LABEL = "EXION-class (FFN reuse + eager prediction)"
ASSUMPTIONS = ("condensed index lists and predicted scores stay on chip (no DRAM traffic charged for them)",
               "the prediction's 1/4-MAC energy per leading-one product is the width rule, not EXION's figure")
COLS = ("self_attn_qk", "ffn_up")  # kept columns are the GEMM's N
RED = ("self_attn_pv", "ffn_down")  # kept columns are the GEMM's K

INPUTS = {
    "kept neurons / keys per step and layer": "MEASURED: trace of the exion algorithm",
    "per-tile union of kept columns (array tile = 128 rows)": "MEASURED: masks seen while the algorithm ran",
    "eager prediction work (leading-one products, 1/4 of an 8x8 MAC each)":
        "MEASURED count; the 1/4 weight is ASSUMED (width rule), not EXION's figure",
    "eager prediction runs on the array, before the sparse q.k^T": "ASSUMED (no EXION figure available offline)",
    "ConMerge condensing: 8 mask bits per side-unit element slot, overlapped with the GEMM": SIDE_SOURCE,
    "FFN-reuse bitmask (1 bit per token and neuron) read from DRAM on every reuse step": "MODELLED (our choice)",
    "ConMerge cross-tile merging": "not modelled (would recover part of the tile-union padding)",
}


def gemm_cost(g, fr, cfg):
    """``(cycles, mac8, mac_low, low_bits)`` of one GEMM under the ideal model at the op's MAC shares ``fr``."""
    k = fr.kept
    if k < 1.0 and g.op in COLS:
        M, K, N = g.M, g.K, ceil_frac(g.N, k)
    elif k < 1.0 and g.op in RED:
        M, K, N = g.M, ceil_frac(g.K, k), g.N
    else:
        M, K, N = g.M, g.K, g.N
    return dense_cycles(M, K, N, cfg), M * K * N, 0.0, 8


def replay_cost(g, c, cfg, base):
    """:class:`~.common.GemmCost` of one instance of ``g`` at recorded shares ``c`` (``base``: its dense cost)."""
    if g.op not in COLS + RED or (c.skipped <= 0 and c.estimate <= 0):
        return base
    u = max(c.kept, c.tile if c.tile is not None else c.kept)  # a tile keeps at least what its rows keep
    if g.op in COLS:
        M, K, N = g.M, g.K, ceil_frac(g.N, u)
    else:
        M, K, N = g.M, ceil_frac(g.K, u), g.N
    cyc = dense_cycles(M, K, N, cfg)
    work = c.kept * g.M * g.K * g.N  # useful MACs: what the rows keep, not the tile-union padding
    over, side = {}, 0.0
    if g.op in COLS and c.skipped > 0:
        side = g.M * g.N / 8.0  # condense the (M x N) keep bitmask, 8 bits per element slot
        exposed = max(0.0, side_cycles(side, cfg) - cyc)
        over["EXION ConMerge condensing (exposed)"] = exposed
        cyc += exposed
    if g.op == "self_attn_qk" and c.estimate > 0:
        pred = c.estimate * g.M * g.K * g.N
        over["EXION eager prediction on the array"] = pred / (cfg.rows * cfg.cols)
        cyc += over["EXION eager prediction on the array"]
    red = Gemm(g.op, M, K, N, 1, min(g.grid_rows, M))
    mask = g.M * g.N / 8.0 if g.op == "ffn_up" else 0.0  # the FFN-reuse bitmask, read on every reuse step
    return GemmCost(cyc, work, work, 0.0, 8, dram_bytes(red, cfg) + mask, over, side)


class EXIONClass(ReplayedDesign):
    name = method = "exion"
    label = LABEL
    assumptions = ASSUMPTIONS
    inputs = MappingProxyType(INPUTS)
    gemm_cost = staticmethod(gemm_cost)
    replay_cost = staticmethod(replay_cost)
