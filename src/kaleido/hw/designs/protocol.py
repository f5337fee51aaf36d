"""The one contract every simulated design keeps: counts first, energy priced from them (Accelergy's split).

A :class:`Design` turns a workload and the statistics of the technique it accelerates (a profile, a
replayed trace, or nothing) into *action counts* - :meth:`Design.count` -> :class:`DesignCounts`: cycles,
run time, and how often each action happened (:class:`~kaleido.hw.arch.energy.ActionCounts`).  An energy table
then prices those counts - :meth:`Design.price` -> pJ by component.  Counting never sees an energy and
pricing never sees the workload; :func:`evaluate` does both and returns a :class:`DesignResult`.

Designs on the simulated array (the dense array, Kaleido, the AdapTiV- / EXION- / Cambricon-D-class
designs) all price through :meth:`kaleido.hw.arch.energy.EnergyTable.price` (:class:`ArrayDesign`); the A100
roofline prices its run time at its board power.  Every design is registered once, in
:data:`kaleido.hw.designs.DESIGNS`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping, Protocol, runtime_checkable

from .figures import ArrayFigures

if TYPE_CHECKING:  # pragma: no cover
    from ..arch.config import ArrayConfig
    from ..arch.energy import ActionCounts, EnergyTable
    from ..inputs.workloads import Workload


@dataclass
class DesignCounts(ArrayFigures):
    """What one design did on one workload: cycles, time and counted actions, no energy.

    ``actions``: one :class:`~kaleido.hw.arch.energy.ActionCounts` per PARTIAL multiplier width (an
    ``ActionCounts`` holds one width; empty for a design not on the array).  ``buffer_kib``, ``clock_ghz``
    and ``arrays`` are what pricing needs of the array (SRAM energy per byte by buffer size, static
    power over the run).  ``detail``: the design's own full result (e.g. Kaleido's
    :class:`~kaleido.hw.designs.kaleido.SimResult`, a baseline's :class:`~kaleido.hw.designs.baseline_replay.ReplayResult`)
    for the figures only it has.
    """

    design: str  # this run's label (in results and tables)
    workload: str
    cycles: float  # compute cycles on the design's array (0: not an array)
    dense_cycles: float  # the dense array's on the same workload and array (0: not an array)
    time_s: float  # run time: per GEMM max(compute, DRAM), summed; compute only where DRAM is not modelled
    work_macs: float  # useful 8-bit-equivalent MACs the array performed (low-bit ones weighted b/8)
    dense_macs: float
    actions: tuple = ()
    buffer_kib: dict = field(default_factory=dict)
    clock_ghz: float = 1.0
    arrays: int = 1
    overhead_cycles: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    source: str = ""
    detail: Any = None

    @property
    def array_macs(self) -> float:
        return self.work_macs

    def to_dict(self, pes: int | None = None) -> dict:
        d = self.figures_dict(pes)
        d["actions"] = [a.to_dict() for a in self.actions]
        d.pop("detail")
        return d


@dataclass
class DesignResult:
    """A design's counts and their energy by component (pJ), priced by one table."""

    counts: DesignCounts
    energy_pj: dict

    @property
    def energy_j(self) -> float:
        return sum(self.energy_pj.values()) * 1e-12

    def component_j(self, name: str) -> float:
        """One component's energy in joules (0 when the design has no such component)."""
        return self.energy_pj.get(name, 0.0) * 1e-12

    def to_dict(self, pes: int | None = None) -> dict:
        return {**self.counts.to_dict(pes), "energy_pj": dict(self.energy_pj), "energy_j": self.energy_j}


@runtime_checkable
class Design(Protocol):
    """A design the simulator models.  Registered by :func:`kaleido.hw.designs.register_design`."""

    #: registry key: "dense", "a100", "kaleido", "adaptiv", "exion", "cambricon_d", ...
    name: str
    #: in results and tables
    label: str
    #: the technique whose statistics it reads (its name in kaleido's technique registry); None: needs none
    method: str | None
    #: runs on the simulated array: compared in cycles and priced by the EnergyTable
    on_array: bool
    #: what it does not model (each would change its figures)
    assumptions: tuple[str, ...]
    #: every input with its origin: MEASURED / paper: ... / ASSUMED
    inputs: Mapping[str, str]

    def count(self, workload: "Workload", stats: Any = None, cfg: "ArrayConfig | None" = None,
              **options: Any) -> DesignCounts:
        """The workload's cycles, time and action counts under ``stats`` on ``cfg``'s array."""

    def price(self, counts: DesignCounts, energy: "EnergyTable") -> dict[str, float]:
        """Energy by component (pJ) of ``counts``."""


class ArrayDesign:
    """What every design on the simulated array shares: its counts priced by the cited energy table."""

    method: str | None = None
    on_array = True
    assumptions: tuple[str, ...] = ()
    inputs: Mapping[str, str] = MappingProxyType({})

    def price(self, counts: DesignCounts, energy: "EnergyTable") -> dict[str, float]:
        return energy.price(counts.actions, counts.buffer_kib, counts.clock_ghz, counts.time_s * counts.arrays)

    def __repr__(self) -> str:
        return f"<design {self.name!r}: {self.label}>"


def buffer_kib(cfg: "ArrayConfig") -> dict[str, float]:
    """The array's buffer sizes by name, as :meth:`~kaleido.hw.arch.energy.EnergyTable.energy_pj` takes them."""
    return {n: getattr(cfg.buffers, f"{n}_kib") for n in ("ifmap", "filter", "ofmap")}


def evaluate(design: Design, workload: "Workload", stats: Any = None, cfg: "ArrayConfig | None" = None,
             energy: "EnergyTable | None" = None, **options: Any) -> DesignResult:
    """Count ``workload`` on ``design`` and price the counts with ``energy`` (default: the cited 16 nm table)."""
    from ..arch.energy import EnergyTable

    counts = design.count(workload, stats, cfg, **options)
    return DesignResult(counts, design.price(counts, energy or EnergyTable()))
