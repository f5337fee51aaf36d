"""The dense systolic array: the same array as Kaleido, every op dense (docs/hardware.md section 1).

Counting is :func:`kaleido.hw.simulate.simulate` without reuse statistics (SCALE-Sim-compatible folds,
fill/drain and SRAM traffic), on one array or a chip (``chip=``).  Statistics: none.
"""

from __future__ import annotations

from types import MappingProxyType

from .common import sim_counts
from .protocol import ArrayDesign, DesignCounts


class DenseArray(ArrayDesign):
    name = "dense"
    label = "dense int8 array"
    assumptions = ("every op runs dense on the array; non-GEMM work not modelled",)
    inputs = MappingProxyType({"fold / fill / drain cycle model and SRAM traffic":
                               "MODELLED: SCALE-Sim v2 / v3.0.0 compatible (docs/hardware.md section 1)"})

    def count(self, workload, stats=None, cfg=None, *, chip=None) -> DesignCounts:
        """``stats`` is ignored (a dense array needs none); ``chip``: a :class:`~kaleido.hw.arch.chip.ChipConfig` (``cfg``
        then ``None`` or ``chip.array``)."""
        from ..simulate import simulate

        sim = simulate(workload, None, cfg, chip=chip)
        arr = sim.array
        return sim_counts(sim, "dense", f"dense {arr['rows']}x{arr['cols']} int8 array")
