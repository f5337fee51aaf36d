"""Kaleido's own design: reconfigurable int8 PEs with the scheduler + matcher dispatcher (SPEC §5).

Its costing lives here, as every design's does: :mod:`.gemm` (one GEMM: its dense reference and Kaleido's PE
modes at each dispatcher level, the decision unit, the anchor store, the P.V row skip), :mod:`.workload`
(:func:`simulate`: every GEMM of a workload, on one array or a chip, with area and the A100 roofline
alongside) and :mod:`.result` (:class:`SimResult`: totals, energy, the summary).  The design reads the
scheduler + matcher level and keeps the whole :class:`SimResult` as ``detail`` for the figures only it has
(utilisation at each dispatcher level, the A100 comparisons, per-op tables).  Statistics: a
:class:`~kaleido.hw.inputs.profile.Profile` (from a Kaleido trace, :mod:`kaleido.hw.inputs.trace_adapter`, or a shipped
profile), or ``None`` (no reuse: equal to the dense array).
"""

from __future__ import annotations

from types import MappingProxyType

from ..protocol import ArrayDesign, DesignCounts
from .gemm import DESIGN_LEVEL, GemmResult, simulate_gemm, window_rows
from .result import SimResult
from .workload import iso_area_shapes, simulate

#: what the model leaves out (docs/hardware.md sections 2, 3, 7, 11)
ASSUMPTIONS = ("the decision unit judges one channel per array row per cycle, overlapped with the array",
               "a profile measured on another model or grid is carried by the documented rule (docs/hardware.md §8)",
               "area (iso-area rows): synthesised PEs and dispatcher logic, anchor store and buffers as CACTI SRAM "
               "(kaleido.hw.arch.area); non-GEMM work not modelled")
INPUTS = {
    "mode statistics per op kind (and step): COMPUTE / PARTIAL / FULL shares per channel group":
        "MEASURED: a Kaleido trace converted to a profile, or a shipped profile (its label says which)",
    "PE mode costs, dispatcher and memory models": "MODELLED: docs/hardware.md sections 1-4",
}


def sim_counts(sim, which: str, label: str) -> DesignCounts:
    """Kaleido's counts out of a :class:`SimResult`: a dispatcher level (or ``"dense"``, its dense reference)."""
    dense = which == "dense"
    kib = {n: sim.array["buffers"][f"{n}_kib"] for n in ("ifmap", "filter", "ofmap")}
    work = sum(g.macs if dense else g.work_pe_cycles for g in sim.gemms)
    return DesignCounts(label, sim.workload["name"], sim.cycles(which), sim.cycles("dense"), sim.time_s(which), work,
                        sum(g.macs for g in sim.gemms), (sim.counts(which),), kib, sim.array["clock_ghz"],
                        sim.arrays, notes=list(sim.notes), detail=sim)


class Kaleido(ArrayDesign):
    """Kaleido at the scheduler + matcher level (:data:`DESIGN_LEVEL`)."""

    name = method = "kaleido"
    label = "Kaleido (scheduler + matcher)"
    assumptions = ASSUMPTIONS
    inputs = MappingProxyType(INPUTS)

    def count(self, workload, stats=None, cfg=None, *, transfer: bool = True, level: str | None = None,
              **options) -> DesignCounts:
        """``options``: those of :func:`simulate` (``anchor_pricing``, ``complementary``,
        ``chip``, ``a100``); ``transfer``: carry a profile measured on another model or grid by the documented
        rule (on by default, as ``kaleido simulate`` and the accelerator table do); ``level``: the dispatcher
        level (default scheduler + matcher)."""
        sim = simulate(workload, stats, cfg, transfer=transfer, **options)
        return sim_counts(sim, level or DESIGN_LEVEL, self.label)


__all__ = ["ASSUMPTIONS", "DESIGN_LEVEL", "GemmResult", "INPUTS", "Kaleido", "SimResult", "iso_area_shapes", "simulate",
           "simulate_gemm", "window_rows"]
