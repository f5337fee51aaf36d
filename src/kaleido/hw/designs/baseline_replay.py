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
(time per GEMM is ``max(compute, DRAM)``, as in :mod:`kaleido.hw.simulate`).  It also
costs the same records with the design's ideal model (``gemm_cost``: the old
fraction model, no utilisation costs) as ``upper_bound``.  Every input of a result is
listed with where it came from: ``MEASURED`` (the trace), ``paper: ...`` or ``ASSUMED``.

Counting and pricing are apart (:mod:`kaleido.hw.designs.protocol`): the design's ``count``
(:func:`kaleido.hw.designs.replay.count_replay`) counts the actions - 8-bit MACs (the decision work's
8-bit-equivalent MACs among them), low-bit MACs by width, DRAM bytes, side-unit int8 operations - and its
``price`` (:meth:`kaleido.hw.arch.energy.EnergyTable.price`) prices them; :func:`replay` does both.
"""

from __future__ import annotations

from kaleido.ops import HW_KIND_OF

from ..inputs.baseline_profile import FORMAT, VERSION, BaselineProfile  # noqa: F401  (the replay's input)
from ..arch.config import ArrayConfig
from . import replayed_designs
from ..inputs.baseline_profile import Cell  # noqa: F401,E402  (re-exported: the replay's input cells)
from .replay import ReplayResult, count_replay
from ..arch.energy import EnergyTable
from ..inputs.workloads import Workload

__all__ = ["FORMAT", "VERSION", "BaselineProfile", "Cell", "ReplayResult", "baseline_profile_from_trace",
           "count_replay", "replay", "replay_design"]

def baseline_profile_from_trace(trace, workload: Workload | None = None) -> tuple[BaselineProfile, list[str]]:
    """``(profile, notes)`` from a baseline ``ReuseTrace`` (records with decisions)."""
    method = trace.method
    if method == "kaleido":
        raise ValueError("this is a Kaleido trace: use kaleido.hw.inputs.trace_adapter.profile_from_trace")
    acc: dict[str, dict[int, dict[int, list[float]]]] = {}
    lbits: dict[str, set[int]] = {}
    for r in trace:
        d = r.decision
        if d is None:
            raise ValueError(f"baseline trace record {r.op!r} layer {r.layer} step {r.step} has no decision")
        kind = HW_KIND_OF.get(r.op)
        if kind is None:
            continue
        a = acc.setdefault(kind, {}).setdefault(r.step, {}).setdefault(r.layer, [0.0] * 9)
        vals = [d.mac8, d.mac_low, d.skipped, d.estimate8, max(0, d.tile_cols), max(0, d.tile_dense_cols),
                max(0, d.outliers), max(0, d.a_elements), 1.0 if d.tile_cols >= 0 else 0.0]
        for i, v in enumerate(vals):
            a[i] += v
        if d.mac_low:
            lbits.setdefault(kind, set()).add(int(d.low_bits))
    if not acc:
        raise ValueError("the baseline trace holds no records of simulator op kinds")
    ops = {}
    for kind, steps in acc.items():
        if len(lbits.get(kind, ())) > 1:
            raise ValueError(f"op {kind!r} mixes low-bit widths {sorted(lbits[kind])}; the replay needs one")
        lb = next(iter(lbits.get(kind, {8})))
        rows = []
        for s in sorted(steps):
            cells = []
            for layer in sorted(steps[s]):
                m8, ml, sk, est, tc, td, ol, ae, has_tile = steps[s][layer]
                dense = m8 + ml + sk
                cells.append(Cell(m8 / dense, ml / dense, sk / dense, lb if ml else 8, est / dense,
                                  tc / td if has_tile and td > 0 else None, ol / ae if ae > 0 else None))
            rows.append(cells)
        ops[kind] = rows
    g = trace.meta.get("grid") or {"T": 1, "H": 1, "W": 1}
    notes = []
    if workload is not None:
        notes += [f"op kind {k!r} not in the trace: replayed dense" for k in workload.op_kinds() if k not in ops]
    prof = BaselineProfile(method, dict(trace.meta.get("method_settings", {})), trace.model_class,
                           (int(g["T"]), int(g["H"]), int(g["W"])), int(trace.meta.get("tile_rows", 128)), ops,
                           source=f"ReuseTrace of {method} ({trace.model_class}, {len(trace)} records)")
    return prof, notes


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
