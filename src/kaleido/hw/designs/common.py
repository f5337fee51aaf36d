"""What several designs share: the machinery of the accelerator-baseline designs (AdapTiV, EXION, Cambricon-D).

Each design runs a published workload (:mod:`kaleido.hw.inputs.workloads`) on the same
128x128 int8 systolic array as Kaleido (same :class:`~kaleido.hw.arch.config.ArrayConfig`,
same fold/fill/drain cycle model :func:`kaleido.hw.arch.compute.dense_cycles`), with the work
that its algorithm leaves.  How much work is left is never typed in: it comes from the
trace its algorithm recorded (:class:`~kaleido.hw.designs.baseline_replay.BaselineProfile`, replayed
per recorded step and layer with the design's utilisation model, ``replay_cost``) or, for
sweep rows recorded before baselines wrote traces, from :class:`MeasuredSkips` - the
per-op-kind MAC shares of the row's ``report`` - under the *ideal* model (``gemm_cost``, no
utilisation costs: the replay's upper bound, :func:`ideal_counts`).  Their base class,
:class:`~.replay.ReplayedDesign` (:mod:`.replay`), takes either statistics and returns action
counts (MACs by width, DRAM bytes, side-unit operations); energy is priced from them by the
simulator's cited :class:`~kaleido.hw.arch.energy.EnergyTable`, as for every design
(:mod:`kaleido.hw.designs.protocol`).  The ideal path counts MACs only (memory left out
for every design alike in the accelerator table).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from kaleido.ops import BLOCK_OPS, HW_KIND_OF

from ..arch.compute import dense_cycles
from ..arch.config import ArrayConfig
from ..arch.energy import ActionCounts
from ..arch.memory import dram_bytes
from ..inputs.workloads import Gemm
from .protocol import DesignCounts, buffer_kib

#: the baselines' ledger op kinds -> the simulator's workload op kinds
OP_TO_HW: dict[str, str] = {k.value: HW_KIND_OF[k.value] for k in BLOCK_OPS}
#: Rate of every side unit (matching, merge/unmerge, condensing): int8 elements per cycle per array row.
#: The same figure kaleido.hw.simulate gives Kaleido's decision unit (one element per row per cycle).
SIDE_SOURCE = "ASSUMED: 1 element per array row per cycle, as kaleido.hw.simulate's Kaleido decision unit"


@dataclass(frozen=True)
class OpFractions:
    """Shares of one op kind's dense MACs: computed 8x8, computed low-bit, skipped."""

    mac8: float
    mac_low: float
    skipped: float
    low_bits: int

    @property
    def kept(self) -> float:
        return self.mac8 + self.mac_low


@dataclass
class MeasuredSkips:
    """Per simulator op kind, the fractions a method's algorithm measured (absent: dense)."""

    method: str
    settings: dict
    ops: dict[str, OpFractions] = field(default_factory=dict)

    @classmethod
    def from_report(cls, report: dict) -> "MeasuredSkips":
        """From ``MethodReport.to_dict()`` (a sweep row's ``report``)."""
        ops = {}
        for kind, oc in report["op_counts"].items():
            if kind not in OP_TO_HW:
                continue
            d = oc["dense_macs"]
            if d <= 0:
                continue
            ops[OP_TO_HW[kind]] = OpFractions(oc["mac8"][0] / d, oc["mac_low"][0] / d, oc["skipped"][0] / d,
                                              int(oc["low_bits"]))
        return cls(report["method"], report["settings"], ops)

    def get(self, hw_op: str) -> OpFractions:
        return self.ops.get(hw_op, OpFractions(1.0, 0.0, 0.0, 8))


def ideal_counts(design, workload, skips: MeasuredSkips, cfg=None) -> DesignCounts:
    """The ideal model: ``design.gemm_cost(g, fractions, cfg) -> (cycles, mac8, mac_low, low_bits)`` summed over
    the workload's GEMMs at the op kinds' measured MAC shares; time is the compute time (DRAM not modelled)."""
    cfg = cfg or ArrayConfig()
    cyc = dcyc = done = dense = 0.0
    acts: dict[int, ActionCounts] = {}
    for g in workload.gemms:
        fr = skips.get(g.op)
        c, m8, ml, lb = design.gemm_cost(g, fr, cfg)
        cyc += c * g.count
        dcyc += dense_cycles(g.M, g.K, g.N, cfg) * g.count
        done += (m8 + ml * lb / 8) * g.count
        dense += g.M * g.K * g.N * g.count
        a = acts.setdefault(lb, ActionCounts(lb))
        a.mac8 += m8 * g.count
        a.mac_low += ml * g.count
    return DesignCounts(design.label, workload.name, cyc, dcyc, cyc / (cfg.clock_ghz * 1e9), done, dense,
                        tuple(acts[b] for b in sorted(acts)), buffer_kib(cfg), cfg.clock_ghz,
                        notes=list(design.assumptions),
                        source="measured skip statistics (miniature pipeline) x modelled dataflow, no utilisation "
                               "costs (UPPER BOUND)")


def ceil_frac(n: int, f: float) -> int:
    """``ceil(n * f)``, at least 1 when ``f > 0`` (0 when ``f == 0``)."""
    return 0 if f <= 0 else max(1, math.ceil(n * f - 1e-9))


# -- the replay's per-GEMM costs (kaleido.hw.designs.baseline_replay) ------------------------------
@dataclass
class GemmCost:
    """One GEMM instance on one design.  ``overheads`` (cycles) are included in ``cycles``."""

    cycles: float
    work_macs: float  # useful 8-bit-equivalent MACs (what the algorithm asked for; padding and packed zeros excluded)
    mac8: float
    mac_low: float
    low_bits: int
    dram_bytes: float
    overheads: dict[str, float] = field(default_factory=dict)
    side_ops: float = 0.0  # int8 operations of side units (matching, merge, condensing)


def dense_cost(g: Gemm, cfg: ArrayConfig) -> GemmCost:
    m = float(g.M) * g.K * g.N
    return GemmCost(dense_cycles(g.M, g.K, g.N, cfg), m, m, 0.0, 8, dram_bytes(g, cfg))


def side_cycles(elements: float, cfg: ArrayConfig) -> float:
    """Cycles of a side unit handling ``elements`` int8 elements (see :data:`SIDE_SOURCE`)."""
    return elements / cfg.rows
