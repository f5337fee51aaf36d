"""Kaleido's own design: reconfigurable int8 PEs with the scheduler + matcher dispatcher (SPEC §5).

Counting is :func:`kaleido.hw.simulate.simulate` (every GEMM at each dispatcher level, with its dense
reference and the A100 roofline alongside); this design reads the scheduler + matcher level from it and
keeps the whole :class:`~kaleido.hw.simulate.SimResult` as ``detail`` for the figures only it has
(utilisation at each dispatcher level, the A100 comparisons, per-op tables).  Statistics: a
:class:`~kaleido.hw.inputs.profile.Profile` (from a Kaleido trace, :mod:`kaleido.hw.inputs.trace_adapter`, or a shipped
profile), or ``None`` (no reuse: equal to the dense array).
"""

from __future__ import annotations

from types import MappingProxyType

from .common import sim_counts
from .protocol import ArrayDesign, DesignCounts

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


class Kaleido(ArrayDesign):
    """Kaleido at the scheduler + matcher level (:data:`kaleido.hw.simulate.DESIGN_LEVEL`)."""

    name = method = "kaleido"
    label = "Kaleido (scheduler + matcher)"
    assumptions = ASSUMPTIONS
    inputs = MappingProxyType(INPUTS)

    def count(self, workload, stats=None, cfg=None, *, transfer: bool = True, level: str | None = None,
              **options) -> DesignCounts:
        """``options``: those of :func:`~kaleido.hw.simulate.simulate` (``anchor_pricing``, ``complementary``,
        ``chip``, ``a100``); ``transfer``: carry a profile measured on another model or grid by the documented
        rule (on by default, as ``kaleido simulate`` and the accelerator table do); ``level``: the dispatcher
        level (default scheduler + matcher)."""
        from ..simulate import DESIGN_LEVEL, simulate

        sim = simulate(workload, stats, cfg, transfer=transfer, **options)
        return sim_counts(sim, level or DESIGN_LEVEL, self.label)
