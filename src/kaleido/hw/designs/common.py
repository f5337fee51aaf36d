"""Shared machinery of the accelerator-baseline models (AdapTiV, EXION, Cambricon-D).

Each design runs a published workload (:mod:`kaleido.hw.workloads`) on the same
128x128 int8 systolic array as Kaleido (same :class:`~kaleido.hw.config.ArrayConfig`,
same fold/fill/drain cycle model :func:`kaleido.hw.compute.dense_cycles`), with the work
that its algorithm leaves.  How much work is left is never typed in: it comes from
:class:`MeasuredSkips`, the per-op-kind MAC counts its algorithm produced when it ran
on the miniature pipeline (the ``report`` of a sweep row), carried to the workload as
fractions (the same resolution-independence rule as the simulator's profiles).

This is the *ideal* path (no utilisation costs), kept for sweep rows recorded before
baselines wrote traces and as the upper bound of the replay: a row with a trace is
costed by :func:`kaleido.hw.baseline_replay.replay` with each design's utilisation
model (``replay_cost`` in its module), per recorded step and layer, from the
:class:`GemmCost` pieces defined here.  Energy here is the MAC energy only (8x8 and
low-bit multiplies with a 32-bit accumulate, from the simulator's cited
:class:`~kaleido.hw.energy.EnergyTable`); memory energy is left out for every design
alike in this table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from kaleido.ops import BLOCK_OPS, HW_KIND_OF

from ..compute import dense_cycles
from ..config import ArrayConfig
from ..energy import EnergyTable
from ..figures import ArrayFigures
from ..memory import dram_bytes
from ..workloads import Gemm

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


@dataclass
class DesignResult(ArrayFigures):
    """One design on one workload (compute-bound cycles, MAC energy)."""

    design: str
    workload: str
    cycles: float
    dense_cycles: float
    macs_done: float  # 8-bit-equivalent multiply-accumulates the array performed (low-bit ones weighted b/8)
    dense_macs: float
    mac_energy_pj: float
    assumptions: list[str] = field(default_factory=list)
    source: str = "measured skip statistics (miniature pipeline) x modelled dataflow"

    @property
    def array_macs(self) -> float:
        return self.macs_done

    def to_dict(self, pes: int | None = None) -> dict:
        return self.figures_dict(pes)


def run_design(name: str, workload, skips: MeasuredSkips, gemm_model, cfg=None, energy=None,
               assumptions: tuple[str, ...] = ()) -> DesignResult:
    """Sum ``gemm_model(g, fractions, cfg) -> (cycles, mac8, mac_low, low_bits)`` over the workload's GEMMs."""
    cfg = cfg or ArrayConfig()
    energy = energy or EnergyTable()
    cyc = dcyc = done = dense = e = 0.0
    for g in workload.gemms:
        fr = skips.get(g.op)
        c, m8, ml, lb = gemm_model(g, fr, cfg)
        cyc += c * g.count
        dcyc += dense_cycles(g.M, g.K, g.N, cfg) * g.count
        done += (m8 + ml * lb / 8) * g.count
        dense += g.M * g.K * g.N * g.count
        e += (m8 * energy.mac_pj(8) + ml * energy.mac_pj(lb)) * g.count
    return DesignResult(name, workload.name, cyc, dcyc, done, dense, e, list(assumptions))


def ceil_frac(n: int, f: float) -> int:
    """``ceil(n * f)``, at least 1 when ``f > 0`` (0 when ``f == 0``)."""
    return 0 if f <= 0 else max(1, math.ceil(n * f - 1e-9))


# -- the replay's per-GEMM costs (kaleido.hw.baseline_replay) ------------------------------
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
