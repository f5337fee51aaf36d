"""The trace replay every accelerator-baseline design shares: recorded shares -> counted actions.

:class:`ReplayedDesign` is the base of the AdapTiV-, EXION- and Cambricon-D-class designs.  Its
:meth:`~ReplayedDesign.count` takes either statistics a baseline has: the trace its algorithm recorded
(a :class:`~kaleido.hw.designs.baseline_replay.BaselineProfile`: per op kind, recorded step and layer, a
:class:`Cell` of shares), replayed by :func:`count_replay` with the design's utilisation model
(``replay_cost``) and, as the upper bound, its ideal model (``gemm_cost``); or, for a sweep row recorded
without a trace, :class:`~.common.MeasuredSkips` under the ideal model alone
(:func:`~.common.ideal_counts`).  Either way it returns action counts - MACs at 8 bits (the decision
work's 8-bit-equivalent MACs among them) and at each low-bit width, DRAM bytes, side-unit int8
operations - which the cited :class:`~kaleido.hw.arch.energy.EnergyTable` prices (:meth:`ArrayDesign.price`).

Workload step ``s`` of ``S`` reads recorded step ``floor(s*(P-1)/(S-1) + 1/2)``; each workload GEMM is
costed once per recorded layer and averaged; time per GEMM is ``max(compute, DRAM)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..inputs.baseline_profile import BaselineProfile, Cell  # noqa: F401  (Cell: the replay's input cells)
from ..arch.config import ArrayConfig
from ..arch.energy import ActionCounts
from .figures import ArrayFigures
from ..inputs.workloads import Gemm, Workload
from .common import GemmCost, MeasuredSkips, OpFractions, dense_cost, ideal_counts
from .protocol import ArrayDesign, DesignCounts, buffer_kib


class ReplayedDesign(ArrayDesign):
    """An accelerator baseline on the simulated array: subclasses give ``name`` (= ``method``, the technique
    whose trace it replays), ``label``, ``assumptions``, ``inputs``, :meth:`gemm_cost` and :meth:`replay_cost`."""

    def gemm_cost(self, g: Gemm, fr: OpFractions, cfg: ArrayConfig) -> tuple[float, float, float, int]:
        """``(cycles, mac8, mac_low, low_bits)`` of one GEMM instance under the ideal model at MAC shares ``fr``."""
        raise NotImplementedError

    def replay_cost(self, g: Gemm, c: Cell, cfg: ArrayConfig, base: GemmCost) -> GemmCost:
        """:class:`~.common.GemmCost` of one instance of ``g`` at recorded shares ``c`` (``base``: its dense cost)."""
        raise NotImplementedError

    def count(self, workload, stats=None, cfg=None) -> DesignCounts:
        """``stats``: the :class:`~kaleido.hw.designs.baseline_replay.BaselineProfile` of this design's method (replayed
        with utilisation costs), or :class:`~.common.MeasuredSkips` (the ideal model, an upper bound)."""
        if isinstance(stats, MeasuredSkips):
            return ideal_counts(self, workload, stats, cfg)
        if hasattr(stats, "cells") and hasattr(stats, "method"):  # a BaselineProfile
            if stats.method != self.method:
                raise ValueError(f"a {stats.method!r} baseline profile cannot be replayed on the {self.name!r} design")
            return count_replay(self, workload, stats, cfg)
        raise ValueError(f"the {self.name!r} design needs its trace (a BaselineProfile) or MeasuredSkips, "
                         f"got {type(stats).__name__}")


@dataclass
class ReplayResult(ArrayFigures):
    """One baseline design on one workload, replayed from its trace.

    ``actions``: the counted actions, one :class:`~kaleido.hw.arch.energy.ActionCounts` per low-bit width;
    ``energy_pj``: their energy by component once priced (:func:`replay`; empty from :func:`count_replay`).
    """

    design: str
    method: str
    settings: dict
    workload: str
    cycles: float
    upper_bound_cycles: float
    dense_cycles: float
    time_s: float
    dense_time_s: float
    work_macs: float
    dense_macs: float
    actions: tuple
    overhead_cycles: dict[str, float]
    inputs: dict[str, str]
    notes: list[str] = field(default_factory=list)
    source: str = "TRACE-REPLAYED with the dataflow's utilisation costs"
    energy_pj: dict[str, float] = field(default_factory=dict)

    @property
    def array_macs(self) -> float:
        return self.work_macs

    def _component_j(self, name: str) -> float:
        if not self.energy_pj:
            raise ValueError("this replay result is not priced: use replay(), or price its actions with an EnergyTable")
        return self.energy_pj[name] * 1e-12

    @property
    def mac_energy_j(self) -> float:
        """MACs at 8 bits (the decision work's among them) and at low bits."""
        return self._component_j("mac")

    @property
    def dram_energy_j(self) -> float:
        return self._component_j("dram")

    @property
    def side_energy_j(self) -> float:
        """Side units' int8 operations (matching, merge, condensing), priced as the dispatcher's."""
        return self._component_j("dispatcher")

    def to_dict(self, pes: int | None = None) -> dict:
        d = self.figures_dict(pes)
        d["actions"] = [a.to_dict() for a in self.actions]
        d["upper_bound_speedup_vs_dense"] = self.dense_cycles / max(1.0, self.upper_bound_cycles)
        return d


def _replay(design, wl: Workload, prof: "BaselineProfile", cfg: ArrayConfig) -> ReplayResult:
    """The actions, cycles and time of ``wl`` on ``design`` under the recorded shares of ``prof`` (unpriced)."""
    clock = cfg.clock_ghz * 1e9
    bw = cfg.buffers.dram_gbps * 1e9
    tot = {"cyc": 0.0, "ub": 0.0, "dense": 0.0, "t": 0.0, "td": 0.0, "work": 0.0, "dm": 0.0}
    acts: dict[int, ActionCounts] = {}  # by low-bit width: an ActionCounts prices one
    over: dict[str, float] = {}
    notes = []
    for g in wl.gemms:
        base = dense_cost(g, cfg)
        per_step = g.count / wl.steps
        if prof.ops.get(g.op) is None:
            notes.append(f"{g.op}: not in the trace, replayed dense")
        for s in range(wl.steps):
            cells = prof.cells(g.op, s, wl.steps) or [Cell.dense()]
            w = per_step / len(cells)
            for c in cells:
                r = design.replay_cost(g, c, cfg, base)
                ub = design.gemm_cost(g, OpFractions(c.mac8, c.mac_low, c.skipped, c.low_bits), cfg)[0]
                tot["cyc"] += r.cycles * w
                tot["ub"] += ub * w
                tot["dense"] += base.cycles * w
                tot["t"] += max(r.cycles / clock, r.dram_bytes / bw) * w
                tot["td"] += max(base.cycles / clock, base.dram_bytes / bw) * w
                tot["work"] += r.work_macs * w
                tot["dm"] += float(g.M) * g.K * g.N * w
                a = acts.get(r.low_bits)
                if a is None:
                    a = acts[r.low_bits] = ActionCounts(r.low_bits)
                a.mac8 += (r.mac8 + c.estimate * g.M * g.K * g.N) * w  # the decision work: 8-bit-equivalent MACs
                a.mac_low += r.mac_low * w
                a.dram_bytes += r.dram_bytes * w
                a.dispatch_ops += r.side_ops * w
                a.cycles += r.cycles * w
                for k, v in r.overheads.items():
                    over[k] = over.get(k, 0.0) + v * w
    return ReplayResult(design.label, prof.method, prof.settings, wl.name, tot["cyc"], tot["ub"],
                        tot["dense"], tot["t"], tot["td"], tot["work"], tot["dm"],
                        tuple(acts[b] for b in sorted(acts)), over, dict(design.inputs), sorted(set(notes)))


def count_replay(design, wl: Workload, prof: "BaselineProfile", cfg: ArrayConfig | None = None) -> DesignCounts:
    """The counts of ``wl`` on ``design`` replaying ``prof`` (what its ``count`` returns); ``detail``: the
    unpriced :class:`ReplayResult`."""
    cfg = cfg or ArrayConfig()
    r = _replay(design, wl, prof, cfg)
    return DesignCounts(r.design, r.workload, r.cycles, r.dense_cycles, r.time_s, r.work_macs, r.dense_macs,
                        r.actions, buffer_kib(cfg), cfg.clock_ghz, overhead_cycles=dict(r.overhead_cycles),
                        notes=list(r.notes), source=r.source, detail=r)
