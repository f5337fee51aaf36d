"""AdapTiV-class accelerator (MICRO'24) model: token merging on a dense systolic array.

Dataflow: merged tokens are removed before attention, so self-attention q.k^T and P.V
run as *smaller dense GEMMs*; every other op runs dense (our AdapTiV algorithm merges
inside attention only).

* :func:`gemm_cost` (the upper bound, also what :meth:`~.replay.ReplayedDesign.count` runs
  on :class:`~.common.MeasuredSkips` of rows without a trace): with a q.k^T kept share
  ``k`` the merged token fraction is ``m = sqrt(k)``; q.k^T runs as ``(m*M) x K x (m*N)``, P.V as ``(m*M) x (m*K) x N``;
  nothing else is charged.
* :func:`replay_cost` (trace replay, per recorded step and layer): the merged token
  count of that step and layer (``m`` of the video rows; text rows of joint attention
  never merge), the fold/fill cost of that irregular count on the array, the merge
  (averaging q, k, v of merged tokens) and un-merge (gathering the output back to every
  token) on a side unit, exposed where it exceeds the head's array cycles, and the
  DRAM traffic of the smaller GEMMs.  The sign-similarity matching costs no cycles
  (AdapTiV hides it behind LayerNorm); its work is charged as energy (the algorithm's
  recorded ``estimate`` MACs).
"""

from __future__ import annotations

import math
from types import MappingProxyType

from ..arch.compute import dense_cycles
from ..arch.memory import dram_bytes
from ..inputs.workloads import Gemm
from .common import SIDE_SOURCE, GemmCost, ceil_frac, side_cycles
from .replay import ReplayedDesign

#: this design's name in results and tables
LABEL = "AdapTiV-class (token merging)"
ASSUMPTIONS = ("sign-similarity matching fully hidden behind LayerNorm, as AdapTiV reports",
               "token merging applies to self-attention only, as in our AdapTiV algorithm")
ATTN = ("self_attn_qk", "self_attn_pv")

INPUTS = {
    "merged-token count per step and layer (sqrt of the kept q.k^T share; text rows never merge)":
        "MEASURED: trace of the adaptiv algorithm",
    "array fill/fold cost of the irregular merged token count": "MEASURED extents x kaleido.hw fold model",
    "sign-similarity matching latency: 0 exposed cycles":
        "paper: AdapTiV (MICRO'24) abstract - Sign-Driven Scheduling conceals token-merging latency within "
        "LayerNorm",
    "sign-matching work (energy)": "MEASURED: the algorithm's estimate MACs (1-bit XORs at 1/64 of an 8x8 MAC)",
    "merge (average q, k, v) / un-merge (gather) unit rate, overlapped with the head's attention": SIDE_SOURCE,
}


def gemm_cost(g, fr, cfg):
    """``(cycles, mac8, mac_low, low_bits)`` of one GEMM under the ideal model at the op's MAC shares ``fr``."""
    if g.op in ATTN and fr.skipped > 0:
        m = math.sqrt(max(0.0, 1.0 - fr.skipped))
        if g.op == "self_attn_qk":
            M, K, N = ceil_frac(g.M, m), g.K, ceil_frac(g.N, m)
        else:
            M, K, N = ceil_frac(g.M, m), ceil_frac(g.K, m), g.N
        return dense_cycles(M, K, N, cfg), M * K * N, 0.0, 8
    return dense_cycles(g.M, g.K, g.N, cfg), g.M * g.K * g.N, 0.0, 8


def merged_extents(g, c) -> tuple[int, int, int, int]:
    """``(n_merged_rows, M, K, N)`` of one head's merged GEMM (``n`` video + text rows)."""
    m = math.sqrt(max(0.0, c.kept))
    text = g.M - g.grid_rows
    n = ceil_frac(g.grid_rows, m) + text
    keys = n if g.N == g.M else max(1, math.ceil(g.N * n / g.M))  # sparse-key workloads keep their key share
    if g.op == "self_attn_qk":
        return n, n, g.K, keys
    return n, n, (n if g.K == g.M else max(1, math.ceil(g.K * n / g.M))), g.N


def replay_cost(g, c, cfg, base):
    """:class:`~.common.GemmCost` of one instance of ``g`` at recorded shares ``c`` (``base``: its dense cost)."""
    if g.op not in ATTN or c.skipped <= 0:
        return base
    n, M, K, N = merged_extents(g, c)
    cyc = dense_cycles(M, K, N, cfg)
    work = float(M) * K * N
    over, side = {}, 0.0
    if g.op == "self_attn_qk":
        d = g.K
        merged_away = g.grid_rows - (n - (g.M - g.grid_rows))
        side = (3.0 * merged_away + g.grid_rows) * d  # average q, k, v of merged tokens; gather the output back
        head = cyc + dense_cycles(n, K if N == n else N, d, cfg)  # this head's q.k^T + P.V on the array
        exposed = max(0.0, side_cycles(side, cfg) - head)
        over["AdapTiV merge/un-merge unit (exposed)"] = exposed
        cyc += exposed
    red = Gemm(g.op, M, K, N, 1, min(g.grid_rows, M))
    return GemmCost(cyc, work, work, 0.0, 8, dram_bytes(red, cfg), over, side)


class AdapTiVClass(ReplayedDesign):
    name = method = "adaptiv"
    label = LABEL
    assumptions = ASSUMPTIONS
    inputs = MappingProxyType(INPUTS)
    gemm_cost = staticmethod(gemm_cost)
    replay_cost = staticmethod(replay_cost)
