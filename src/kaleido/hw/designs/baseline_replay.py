"""Replaying an accelerator baseline's trace on the simulated array, with its dataflow's costs.

Input: a :class:`~kaleido.trace.ReuseTrace` recorded while AdapTiV, EXION
or Cambricon-D ran (``trace.meta["method"]``; :mod:`kaleido.techniques.accel_trace`).
:func:`baseline_profile_from_trace` turns it into a :class:`BaselineProfile` - per
simulator op kind, per recorded step and layer, the shares of the dense MACs the
algorithm computed at 8 bits, at low bits and skipped, its decision work, and the
measured utilisation inputs (EXION's per-tile column unions, Cambricon-D's outlier
share) - pooled over call slots.  Shares carry to any workload (the resolution
rule of :mod:`kaleido.hw.inputs.profile`: fractions are kept, extents are re-derived), and
workload step ``s`` of ``S`` reads recorded step ``floor(s*(P-1)/(S-1) + 1/2)``; each
workload GEMM is costed once per recorded layer and averaged (the recorded layers
stand for the workload's).

:func:`replay` costs every workload GEMM with the design's utilisation model
(``replay_cost`` of its registered design in :mod:`kaleido.hw.designs`): the array cycles of the GEMMs
its dataflow really runs (fold/fill/drain of :func:`~kaleido.hw.arch.compute.dense_cycles`),
plus its side units' cycles where they cannot overlap, plus its extra DRAM traffic
(time per GEMM is ``max(compute, DRAM)``, as in :mod:`kaleido.hw.designs.kaleido`).  It also
costs the same records with the design's ideal model (``gemm_cost``: the old
fraction model, no utilisation costs) as ``upper_bound``.  Every input of a result is
listed with where it came from: ``MEASURED`` (the trace), ``paper: ...`` or ``ASSUMED``.

Counting and pricing are apart (:mod:`kaleido.hw.designs.protocol`): the design's ``count``
(:func:`kaleido.hw.designs.replay.count_replay`) counts the actions - 8-bit MACs (the decision work's
8-bit-equivalent MACs among them), low-bit MACs by width, DRAM bytes, side-unit int8 operations - and its
``price`` (:meth:`kaleido.hw.arch.energy.EnergyTable.price`) prices them; :func:`replay` does both.
"""

from __future__ import annotations

from ..inputs.baseline_profile import FORMAT, VERSION, BaselineProfile  # noqa: F401  (the replay's input)
from ..arch.config import ArrayConfig
from . import replayed_designs
from ..inputs.baseline_profile import Cell  # noqa: F401,E402  (re-exported: the replay's input cells)
from .replay import ReplayResult, count_replay
from ..arch.energy import EnergyTable
from ..inputs.workloads import Workload

__all__ = ["FORMAT", "VERSION", "BaselineProfile", "Cell", "ReplayResult",
           "count_replay", "replay", "replay_design"]

# -- costing -----------------------------------------------------------------------------
def replay_design(method: str):
    """The registered design (:data:`kaleido.hw.designs.DESIGNS`) that replays ``method``'s traces; ``ValueError``
    naming the known ones otherwise."""
    by_method = {d.method: d for d in replayed_designs()}
    try:
        return by_method[method]
    except KeyError:
        raise ValueError(f"no accelerator model for method {method!r}: the replay models {sorted(by_method)}") from None


def replay(wl: Workload, prof: BaselineProfile, cfg: ArrayConfig | None = None,
           energy: EnergyTable | None = None) -> ReplayResult:
    """Cost ``wl`` on the design of ``prof.method`` (see the module docstring), priced by ``energy``."""
    design = replay_design(prof.method)
    counts = design.count(wl, prof, cfg)
    r = counts.detail
    r.energy_pj = design.price(counts, energy or EnergyTable())
    return r
