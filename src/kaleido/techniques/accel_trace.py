"""Recording an accelerator baseline's decisions in Kaleido's trace format.

:func:`attach_recorder` is called by AdapTiV, EXION and Cambricon-D when they are
applied.  While the method runs it records, per (denoising step, call slot, layer, op
kind), what the algorithm computed and skipped - the very counts it adds to its
:class:`~kaleido.techniques.base.OpLedger`, attributed to the block that was running -
plus what the accelerator models need and only the running algorithm can show:

* EXION: per tile of ``tile_rows`` consecutive tokens (queries), how many columns
  (FFN neurons / keys) at least one row of the tile keeps (the array processes a
  tile's union after compaction), read from the FFN's masked hidden activations and
  from the attention keep-mask (:meth:`AccelTraceRecorder.add_tiles`);
* Cambricon-D: of every differential linear's input entries, those whose
  step-to-step difference, at the input's int8 scale (``max|x| / 127``), does not fit
  ``delta_bits`` signed bits (Cambricon-D's outliers), from the raw inputs
  (:meth:`AccelTraceRecorder.add_outliers`).

Each method feeds those measurements from its own module (:mod:`.exion`,
:mod:`.cambricon_d`); this module knows no method.  Every GEMM of a call is charged as skipped
per layer when the call starts, and one the method did not take over counts as computed
when it runs (the handle's ``"call planned"`` and ``"gemm ran"`` events: the same rule as the
handle's own accounting), on every model family the handle supports.  The recorder attaches
through the handle's named hooks (a ledger observer, event observers, a report extra, a trace
provider; :mod:`.base`): ``handle.accel_trace()``
returns the :class:`~kaleido.trace.ReuseTrace` (``meta["method"]`` set,
one :class:`~kaleido.trace.MethodDecision` per record), and
``handle.report().extra["accel_profile"]`` carries it in the simulator's
:class:`~kaleido.hw.designs.baseline_replay.BaselineProfile` form.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import torch

from kaleido.reuse import ChannelGroups, TokenGrid

from kaleido.techniques.handle import MethodHandle
from kaleido.techniques.shapes import ESTIMATE, TEXT, merged_shape

#: the name the recorder's hooks are registered under on a handle and its ledger
RECORDER = "accel_trace"
TILE_ROWS = 128  # rows of the accelerator array: the tile the EXION union is measured on
_FIELDS = ("mac8", "mac_low", "skipped", "estimate8", "tile_cols", "tile_dense_cols", "outliers", "a_elements")


def tile_union(keep: torch.Tensor, tile_rows: int) -> tuple[int, int]:
    """``keep`` (..., rows, cols) bool -> (sum over row tiles of kept-column unions, same with all kept)."""
    rows, cols = keep.shape[-2], keep.shape[-1]
    k = keep.reshape(-1, rows, cols)
    n_full = rows // tile_rows
    total = tiles = 0
    if n_full:
        u = k[:, : n_full * tile_rows].reshape(k.shape[0], n_full, tile_rows, cols).any(dim=2)
        total += int(u.sum())
        tiles += k.shape[0] * n_full
    if rows % tile_rows:
        total += int(k[:, n_full * tile_rows:].any(dim=1).sum())
        tiles += k.shape[0]
    return total, tiles * cols


class AccelTraceRecorder:
    """Per-(step, slot, layer, op) decision counts of one applied method; see the module docstring."""

    def __init__(self, handle: MethodHandle, tile_rows: int = TILE_ROWS) -> None:
        self.handle = handle
        self.tile_rows = int(tile_rows)
        self.layer = -1
        self.counts: dict[tuple, dict[str, int]] = defaultdict(lambda: {f: 0 for f in _FIELDS} | {"tiles": 0, "outl": 0})
        self.shape: dict[tuple, tuple] = {}
        self.seq: dict[tuple, str] = {}
        self.grid: TokenGrid | None = None
        self.generations = set()
        handle.ledger.add_observer(RECORDER, self._ledger_added)
        handle.add_undo(lambda: handle.ledger.remove_observer(RECORDER))
        handle.observe("call planned", RECORDER, self._call_planned)
        handle.observe("gemm ran", RECORDER, self._gemm_ran)
        self._hook_blocks()

    # -- where the counts come from ----------------------------------------------------
    def _key(self, kind: str, layer: int | None = None) -> tuple:
        c = self.handle.call
        return (c.step, c.slot, self.layer if layer is None else layer, kind)

    def _call_planned(self, gemms) -> None:
        """The handle charged every GEMM of the call as skipped: so does the recorder, per layer."""
        c = self.handle.call
        self.grid = c.grid
        self.generations.add(c.generation)
        by_key: dict[tuple, list] = defaultdict(list)
        for g in gemms:
            by_key[self._key(g.kind, g.layer)].append(g)
        for key, gs in by_key.items():
            self.shape[key] = merged_shape(gs)
            self.seq[key] = gs[0].seq
            self.counts[key]["skipped"] += sum(g.macs for g in gs)

    def _gemm_ran(self, gemm, taken: bool) -> None:
        """A planned GEMM ran: computed, or (taken over) recorded by the method through the ledger."""
        e = self.counts[self._key(gemm.kind, gemm.layer)]
        e["skipped"] -= gemm.macs
        if not taken:
            e["mac8"] += gemm.macs

    def _ledger_added(self, kind: str, mac8: int, mac_low: int, skipped: int) -> None:
        """The ledger observer: the counts the method just added, attributed to the running block."""
        c = self.handle.call
        if c is None or self.layer < 0:
            return  # the handle's charge at the call's start: counted by _call_planned
        if kind == ESTIMATE:  # AdapTiV's sign matching and EXION's prediction serve self-attention
            self.counts[self._key("self_qk")]["estimate8"] += int(mac8) + int(mac_low)
            return
        e = self.counts[self._key(kind)]
        e["mac8"] += int(mac8)
        e["mac_low"] += int(mac_low)
        e["skipped"] += int(skipped)

    def _hook_blocks(self) -> None:
        h = self.handle
        for _, layer, block in h.adapter.blocks(h.transformer):
            def enter(module, args, layer=layer):
                self.layer = layer

            def leave(module, args, out):
                self.layer = -1

            for hk in (block.register_forward_pre_hook(enter), block.register_forward_hook(leave)):
                h.add_undo(hk.remove)

    # -- design-specific measurements ----------------------------------------------------
    def add_tiles(self, kinds: tuple[str, ...], keep: torch.Tensor) -> None:
        """Record the tile unions of a keep-mask ``(..., rows, cols)`` for ``kinds`` of the running layer."""
        if self.handle.call is None or self.layer < 0:
            return
        u, dense = tile_union(keep, self.tile_rows)
        for k in kinds:
            e = self.counts[self._key(k)]
            e["tile_cols"] += u
            e["tile_dense_cols"] += dense
            e["tiles"] += 1

    def add_outliers(self, kind: str, outliers: int, elements: int) -> None:
        if self.handle.call is None or self.layer < 0:
            return
        e = self.counts[self._key(kind)]
        e["outliers"] += int(outliers)
        e["a_elements"] += int(elements)
        e["outl"] += 1

    # -- the trace ---------------------------------------------------------------------
    def trace(self):
        """The recorded decisions as a :class:`~kaleido.trace.ReuseTrace`."""
        # kaleido.techniques.kaleido_reuse loads diffusers; importing it here keeps ``import kaleido.techniques.catalog`` light
        from kaleido.trace import DENSE_OP, MethodDecision, ReuseTrace, TraceRecord, dense_counts

        if len(self.generations) > 1:
            raise ValueError(f"the recorder saw {len(self.generations)} generations; apply the method once per "
                             "generation to record its trace")
        h = self.handle
        low_bits = int(h.method.low_bits)
        block_name = {layer: name for name, layer, _ in h.adapter.blocks(h.transformer)}
        records = []
        for key in sorted(self.counts):
            step, slot, layer, kind = key
            if kind == ESTIMATE or key not in self.shape:
                continue
            e = self.counts[key]
            batch, heads, rows, K, n_cols = self.shape[key]
            dense = batch * heads * rows * K * n_cols
            if e["mac8"] + e["mac_low"] + e["skipped"] != dense:
                raise ValueError(f"{h.method.name}: step {step} layer {layer} {kind}: recorded "
                                 f"{e['mac8'] + e['mac_low'] + e['skipped']} MACs, the GEMM has {dense}")
            differential = e["mac_low"] + e["skipped"] > 0
            tiles = (e["tile_cols"], e["tile_dense_cols"]) if e["tiles"] else (-1, -1)
            outl = (e["outliers"], e["a_elements"]) if e["outl"] and differential else (-1, -1)
            dec = MethodDecision(e["mac8"], e["mac_low"], e["skipped"], low_bits if e["mac_low"] else 8,
                                 e["estimate8"], *tiles, *outl)
            counts, patterns = dense_counts(batch, heads, rows, 1)
            seq = self.seq[key]  # text rows (Wan's cross_proj_kv) have no grid; joint rows carry the text
            grid = None if seq == TEXT else h.adapter.sequence_grid(self.grid, rows, f"{kind} of layer {layer}")
            groups = ChannelGroups((K,), ("t",), ("all",))
            records.append(TraceRecord(step, f"call{slot}", layer, kind, f"{block_name[layer]}.{kind}", batch, heads,
                                       rows, n_cols, groups, 8, grid, differential, counts, patterns, decision=dec))
        assert all(r.op != DENSE_OP for r in records)
        s = h.shapes
        g = self.grid
        meta = {"model_class": type(h.transformer).__name__, "method": h.method.name,
                "method_settings": h.method.settings_dict(), "heads": s.heads, "head_dim": s.head_dim, "dim": s.dim,
                "ffn_dim": s.ffn_dim, "num_layers": s.n_layers,
                "rope_split": None if s.rope_split is None else list(s.rope_split),
                "patch_size": list(s.patch), "tile_rows": self.tile_rows,
                "grid": None if g is None else {"T": g.T, "H": g.H, "W": g.W},
                "num_steps": len({r.step for r in records}), "contexts_seen": sorted({r.context for r in records})}
        return ReuseTrace(records, meta)


def attach_recorder(handle: MethodHandle) -> AccelTraceRecorder:
    """Record ``handle``'s decisions (see the module docstring); returns the recorder.

    Registers the recorder as ``handle``'s trace provider (``handle.accel_trace()``, and ``"accel"`` in
    ``handle.simulator_traces()``, which the comparison turns into the replay's profile through the simulator's
    one door, :func:`kaleido.hw.inputs.baseline_profile.baseline_profile_from_trace`).
    """
    rec = AccelTraceRecorder(handle)
    handle.register_trace_provider(RECORDER, rec.trace)
    return rec


def trace_op_totals(trace) -> dict[str, np.ndarray]:
    """Per op kind, ``[mac8, mac_low, skipped, estimate8]`` summed over a baseline trace."""
    out: dict[str, np.ndarray] = {}
    for r in trace:
        d = r.decision
        v = np.array([d.mac8, d.mac_low, d.skipped, d.estimate8], dtype=np.int64)
        out[r.op] = out[r.op] + v if r.op in out else v
    return out
