"""Turn a ``kaleido.trace.ReuseTrace`` into a simulator :class:`Profile`.

The integration's op names map onto :data:`kaleido.ops.HW_OPS` by
:data:`kaleido.ops.HW_KIND_OF`, the reusable ones only (``cross_proj_kv``, the text-side
key/value projections, stays the workload's dense GEMM whatever the trace says); rows of
non-grid (text) tokens are removed from the counts (a profile counts video rows
only); op kinds of the workload the trace did not record are kept dense and listed
in the returned notes.  A record with ``enabled`` false ran densely: its rows count
as COMPUTE but no decision was made on them (``OpProfile.decided``), and an op kind
whose records are all disabled is dense (``None``: no decision-unit charge at all).
"""

from __future__ import annotations

from kaleido.ops import HW_KIND_OF, SWITCH_OF
from kaleido.reuse import Mode, ModeStats

from .profile import OpProfile, Profile
from .workloads import Workload

#: Trace op name -> simulator workload op kind, for the ops a KaleidoConfig switch can reuse.
TRACE_OP_TO_KIND: dict[str, str] = {op: kind for op, kind in HW_KIND_OF.items() if op in SWITCH_OF}
_REUSABLE_KINDS = frozenset(TRACE_OP_TO_KIND.values())


def _grid_only(rec) -> ModeStats:
    st = rec.stats()
    g = rec.grid
    if g is None:
        return st
    nongrid = (g.prefix + g.suffix) * rec.batch * rec.heads
    mc = st.mode_counts.copy()
    mc[:, Mode.COMPUTE] -= nongrid
    pc = None if st.pattern_counts is None else st.pattern_counts.copy()
    if pc is not None:
        pc[0] -= nongrid
    if (mc < 0).any() or (pc is not None and pc[0] < 0):
        raise ValueError(f"trace record {rec.op!r} layer {rec.layer}: non-grid rows are not all COMPUTE")
    return ModeStats(st.group_sizes, st.group_names, st.low_bits, mc, pc)


def profile_from_trace(trace, workload: Workload | None = None) -> tuple[Profile, list[str]]:
    """``(profile, notes)`` from a loaded ``ReuseTrace`` (per-step statistics kept)."""
    if getattr(trace, "method", "kaleido") != "kaleido":
        raise ValueError(f"this trace holds {trace.method!r}'s decisions, not Kaleido's mode statistics: convert it "
                         "with kaleido.hw.inputs.from_trace.stats_from_trace (`kaleido simulate --trace` does) and cost "
                         "it with kaleido.hw.designs.baseline_replay.replay")
    per_kind: dict[str, dict[int, ModeStats]] = {}
    decided: dict[str, dict[int, int]] = {}  # kind -> step -> video rows of records with reuse enabled
    axes: dict[str, tuple[str, ...]] = {}
    grid = None
    notes = []
    # HunyuanVideo's single-stream ``fused_out`` ([attn | mlp] -> d) has its own channel
    # layout; it stands for ffn_down only when the trace has no ``ffn_out`` records
    skip_fused = any(r.op == "ffn_out" for r in trace)
    if skip_fused and any(r.op == "fused_out" for r in trace):
        notes.append("trace op 'fused_out' not used: ffn_down statistics come from 'ffn_out'")
    for rec in trace:
        kind = TRACE_OP_TO_KIND.get(rec.op)
        if kind is None or (rec.op == "fused_out" and skip_fused):
            continue
        if rec.grid is not None and grid is None:
            grid = (rec.grid.T, rec.grid.H, rec.grid.W)
        st = _grid_only(rec)
        axes.setdefault(kind, tuple(a.value for a in rec.groups.axes))
        steps = per_kind.setdefault(kind, {})
        prev = steps.get(rec.step)
        if prev is not None and (prev.group_sizes, prev.low_bits) != (st.group_sizes, st.low_bits):
            raise ValueError(f"trace op {rec.op!r} mixes channel-group layouts across layers; the simulator needs one "
                             "layout per op kind")
        steps[rec.step] = st if prev is None else prev + st
        dec = decided.setdefault(kind, {})
        dec[rec.step] = dec.get(rec.step, 0) + (st.n_rows if rec.enabled else 0)
    if grid is None or not per_kind:
        raise ValueError("the trace holds no reuse records with a token grid; record it with reuse enabled")
    ops: dict[str, OpProfile | None] = {}
    for kind, steps in per_kind.items():
        order = sorted(steps)
        ordered = [steps[s] for s in order]
        pooled = ordered[0]
        for s in ordered[1:]:
            pooled = pooled + s
        dec_rows = [decided[kind][s] for s in order]
        if sum(dec_rows) == 0:
            ops[kind] = None
            notes.append(f"op kind {kind!r}: reuse switched off in every record (enabled false): simulated dense, "
                         "no decision unit")
            continue
        share = [d / max(1, st.n_rows) for d, st in zip(dec_rows, ordered)]
        ops[kind] = OpProfile(pooled, ordered if len(ordered) > 1 else [], axes[kind],
                              decided=sum(dec_rows) / max(1, pooled.n_rows),
                              per_step_decided=share if len(ordered) > 1 else [])
    if workload is not None:
        for k in workload.op_kinds():
            if k not in ops and k in _REUSABLE_KINDS:
                ops[k] = None
                notes.append(f"op kind {k!r} not in the trace: simulated dense")
    model = str(trace.meta.get("model_class", "trace"))
    return Profile(model, grid, ops, label=f"from ReuseTrace ({model})", source="kaleido.trace"), notes
