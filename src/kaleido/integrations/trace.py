"""``ReuseTrace``: what Kaleido decided and skipped in one generation.

One :class:`TraceRecord` per GEMM call: (denoising step, cache context, layer, op,
module), the GEMM's shape, its channel groups, and per-head mode counts
``head_counts[h, g, m]`` (rows of head ``h`` and group ``g`` in mode ``m``, summed
over the batch).  Dense GEMMs that Kaleido does not touch (text-side projections,
embeddings, warm-up steps, disabled ops) are recorded too, as all-COMPUTE, so
whole-transformer MAC totals include them.  Optionally each record keeps its full
:class:`~kaleido.reuse.ModeMap`.

Saved as one safetensors file with the metadata as JSON in its header; the format
is documented in ``docs/trace-format.md``.  :meth:`ReuseTrace.load` validates it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np
import torch

from kaleido.ops import SWITCH_OF, OpKind
from kaleido.reuse.groups import ChannelGroups
from kaleido.reuse.grid import TokenGrid
from kaleido.reuse.modes import MAX_PATTERN_GROUPS, Mode, ModeMap, ModeStats
from kaleido.reuse.opcounts import OpCounts

TRACE_FORMAT = "kaleido-reuse-trace"
#: version 3 stores only the PARTIAL and FULL counts of each (head, group) (COMPUTE is the rest of
#: ``batch x rows``), none at all for an all-COMPUTE record (``counts_offset`` -1), and every table in the
#: narrowest signed integer type its values fit; version 2 (sparse histograms, int32 counts with COMPUTE)
#: and version 1 (dense histograms, int64) still load
TRACE_FORMAT_VERSION = 3
READABLE_VERSIONS = (1, 2, 3)
#: Op name of GEMMs Kaleido never reuses (text tokens, embeddings, other linears): :attr:`OpKind.DENSE`.
DENSE_OP = OpKind.DENSE.value
#: Columns of the ``records`` table, in order.
RECORD_COLUMNS = (
    "step", "context", "layer", "op", "module", "batch", "heads", "rows", "n_cols",
    "layout", "grid", "enabled", "counts_offset", "patterns_offset", "map_offset",
)
#: Columns of the optional ``decisions`` table (traces of other methods, ``meta["method"]``
#: not ``"kaleido"``): per record, the MACs that method computed / skipped and what its
#: accelerator model needs; ``-1``: not measured.  See docs/trace-format.md.
DECISION_COLUMNS = ("record", "mac8", "mac_low", "skipped", "low_bits", "estimate8", "tile_cols", "tile_dense_cols",
                    "outliers", "a_elements")


@dataclass
class TraceRecord:
    """One GEMM call.

    ``batch`` x ``heads`` matrices of ``rows`` x ``groups.dim`` times ``groups.dim`` x
    ``n_cols``.  ``head_counts``: ``(heads, G, 3)`` int64 (COMPUTE, PARTIAL, FULL).
    ``pattern_counts``: ``(3**G,)`` histogram of row mode strings, or ``None`` when
    ``G > MAX_PATTERN_GROUPS``.  ``enabled``: reuse ran (``False``: computed densely).
    ``layer`` is ``-1`` outside the transformer blocks.
    """

    step: int
    context: str
    layer: int
    op: str
    module: str
    batch: int
    heads: int
    rows: int
    n_cols: int
    groups: ChannelGroups
    low_bits: int
    grid: TokenGrid | None
    enabled: bool
    head_counts: np.ndarray
    pattern_counts: np.ndarray | None = None
    mode_map: ModeMap | None = field(default=None, repr=False)
    #: another method's decision on this GEMM (``None`` for Kaleido's own records)
    decision: "MethodDecision | None" = None

    def stats(self) -> ModeStats:
        """Mode counts summed over heads and batch."""
        return ModeStats(self.groups.sizes, self.groups.names, self.low_bits, self.head_counts.sum(axis=0), self.pattern_counts)

    def op_counts(self) -> OpCounts:
        if self.decision is not None:
            return self.decision.op_counts()
        return self.stats().op_counts(self.n_cols)

    @property
    def dense_macs(self) -> int:
        return self.batch * self.heads * self.rows * self.groups.dim * self.n_cols


@dataclass(frozen=True)
class MethodDecision:
    """What another method (an accelerator baseline) did on one GEMM call.

    ``mac8 + mac_low + skipped`` is the GEMM's dense MACs.  ``estimate8``: the
    method's own decision work (8-bit-equivalent MACs, no dense counterpart).
    ``tile_cols`` / ``tile_dense_cols``: over tiles of ``meta["tile_rows"]`` consecutive
    rows, the summed number of columns (keys, neurons) at least one row of the tile
    kept, and the same sum with every column kept (``-1``: not measured).
    ``outliers`` / ``a_elements``: of the ``A`` operand's entries on a differential call,
    those whose step-to-step difference does not fit ``low_bits`` (``-1``: not measured).
    """

    mac8: int
    mac_low: int
    skipped: int
    low_bits: int = 8
    estimate8: int = 0
    tile_cols: int = -1
    tile_dense_cols: int = -1
    outliers: int = -1
    a_elements: int = -1

    def __post_init__(self) -> None:
        for k in ("mac8", "mac_low", "skipped", "estimate8"):
            if int(getattr(self, k)) < 0:
                raise ValueError(f"MethodDecision.{k}={getattr(self, k)} must be >= 0")
        if not 1 <= int(self.low_bits) <= 8:
            raise ValueError(f"MethodDecision.low_bits={self.low_bits} is outside 1..8")
        if (self.tile_cols < 0) != (self.tile_dense_cols < 0) or self.tile_cols > self.tile_dense_cols:
            raise ValueError(f"MethodDecision tile columns {self.tile_cols}/{self.tile_dense_cols}: both -1, "
                             "or 0 <= tile_cols <= tile_dense_cols")
        if (self.outliers < 0) != (self.a_elements < 0) or self.outliers > self.a_elements:
            raise ValueError(f"MethodDecision outliers {self.outliers}/{self.a_elements}: both -1, or "
                             "0 <= outliers <= a_elements")

    @property
    def dense_macs(self) -> int:
        return int(self.mac8 + self.mac_low + self.skipped)

    def op_counts(self) -> OpCounts:
        return OpCounts(("total",), (self.mac8,), (self.mac_low,), (self.skipped,), int(self.low_bits))

    def row(self) -> list[int]:
        return [int(getattr(self, c)) for c in DECISION_COLUMNS[1:]]


# -- building records -------------------------------------------------------------------
def counts_on_device(modes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(H, G, 3)`` counts and the row-pattern histogram (``None`` past ``MAX_PATTERN_GROUPS`` groups) of a
    ``(B, H, S, G)`` mode tensor, as int64 tensors on its device (no host copy, no sync)."""
    if modes.dim() != 4:
        raise ValueError(f"expected a (B, H, S, G) mode tensor, got shape {tuple(modes.shape)}")
    H, G = modes.shape[1], modes.shape[-1]
    dev = modes.device
    if dev.type == "cpu" and modes.dtype == torch.uint8:  # one compiled pass instead of a handful of ops
        from kaleido.reuse.cpu_kernels import mode_histograms

        return mode_histograms(modes, G <= MAX_PATTERN_GROUPS)
    m = modes.to(torch.int64)
    idx = m + 3 * torch.arange(G, device=dev).view(1, 1, 1, G) + 3 * G * torch.arange(H, device=dev).view(1, H, 1, 1)
    counts = torch.bincount(idx.reshape(-1), minlength=3 * G * H).view(H, G, 3)
    patterns = None
    if G <= MAX_PATTERN_GROUPS:
        w = torch.tensor([3**g for g in range(G)], dtype=torch.int64, device=dev)
        patterns = torch.bincount((m * w).sum(-1).reshape(-1), minlength=3**G)
    return counts, patterns


def dense_counts(batch: int, heads: int, rows: int, n_groups: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Counts of an all-COMPUTE GEMM."""
    c = np.zeros((heads, n_groups, 3), dtype=np.int64)
    c[:, :, int(Mode.COMPUTE)] = batch * rows
    p = None
    if n_groups <= MAX_PATTERN_GROUPS:
        p = np.zeros(3**n_groups, dtype=np.int64)
        p[0] = batch * heads * rows
    return c, p


def _mode_fractions(c: np.ndarray) -> dict[str, float]:
    tot = max(1, int(c.sum()))
    return {
        "compute": float(c[..., int(Mode.COMPUTE)].sum()) / tot,
        "partial": float(c[..., int(Mode.PARTIAL)].sum()) / tot,
        "full": float(c[..., int(Mode.FULL)].sum()) / tot,
    }


@dataclass
class MacTotals:
    """MAC totals that add across ops of different ``low_bits`` (8-bit equivalents kept as numbers)."""

    dense: int = 0
    mac8: int = 0
    mac_low: int = 0
    skipped: int = 0
    equiv8: float = 0.0

    @classmethod
    def of(cls, oc: OpCounts) -> "MacTotals":
        return cls(oc.dense_macs, oc.total_mac8, oc.total_mac_low, oc.total_skipped, float(oc.equiv8_macs))

    def __add__(self, o: "MacTotals") -> "MacTotals":
        return MacTotals(self.dense + o.dense, self.mac8 + o.mac8, self.mac_low + o.mac_low,
                         self.skipped + o.skipped, self.equiv8 + o.equiv8)

    @property
    def saved_fraction(self) -> float:
        return 0.0 if self.dense == 0 else 1.0 - self.equiv8 / self.dense

    def to_dict(self) -> dict[str, Any]:
        d = self.dense
        return {
            "dense_macs": int(d),
            "mac8": int(self.mac8),
            "mac_low": int(self.mac_low),
            "skipped_macs": int(self.skipped),
            "equiv8_macs": float(self.equiv8),
            "equiv8_saved_macs": float(d - self.equiv8),
            "saved_fraction": self.saved_fraction,
            "mac_fractions": {
                "compute": self.mac8 / d if d else 0.0,
                "partial": self.mac_low / d if d else 0.0,
                "full": self.skipped / d if d else 0.0,
            },
        }


class ReuseTrace:
    """The records of one generation plus metadata (model, config, grid, dtype)."""

    def __init__(self, records: list[TraceRecord], meta: dict[str, Any]):
        self.records = list(records)
        self.meta = dict(meta)

    # -- basic views ------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[TraceRecord]:
        return iter(self.records)

    @property
    def model_class(self) -> str:
        return str(self.meta.get("model_class", ""))

    @property
    def method(self) -> str:
        """The method whose decisions this trace holds (``"kaleido"`` when the meta has none)."""
        return str(self.meta.get("method", "kaleido"))

    @property
    def steps(self) -> list[int]:
        return sorted({r.step for r in self.records})

    @property
    def ops(self) -> list[str]:
        return sorted({r.op for r in self.records})

    def select(
        self, *, step: int | None = None, layer: int | None = None, op: str | None = None, context: str | None = None
    ) -> list[TraceRecord]:
        return [
            r
            for r in self.records
            if (step is None or r.step == step)
            and (layer is None or r.layer == layer)
            and (op is None or r.op == op)
            and (context is None or r.context == context)
        ]

    def mode_maps(self) -> Iterator[tuple[TraceRecord, ModeMap]]:
        """Records with their full mode maps (only those recorded with ``record_maps``)."""
        for r in self.records:
            if r.mode_map is not None:
                yield r, r.mode_map

    # -- aggregation ------------------------------------------------------------------
    def op_kind_stats(self, include_dense: bool = False) -> dict[str, ModeStats]:
        """Per op kind, the :class:`ModeStats` summed over steps, layers, contexts and heads.

        Ops Kaleido can reuse only (those a config switch controls: ``self_qk``, ``proj_q``,
        ...), disabled layers and warm-up steps included as COMPUTE rows; ``include_dense``
        adds the never-reused ones, :data:`DENSE_OP` and ``cross_proj_kv`` (not additive
        across their shapes: only when they share one layout).
        Raises ``ValueError`` when one op kind mixes channel-group layouts.
        """
        out: dict[str, ModeStats] = {}
        for r in self.records:
            if r.op not in SWITCH_OF and not include_dense:
                continue
            s = r.stats()
            if r.op in out:
                prev = out[r.op]
                if (prev.group_sizes, prev.low_bits) != (s.group_sizes, s.low_bits):
                    raise ValueError(
                        f"op {r.op!r} mixes channel-group layouts {prev.group_sizes}/low_bits {prev.low_bits} and "
                        f"{s.group_sizes}/{s.low_bits} (layer {r.layer}); aggregate per layer with select(op=..., layer=...)"
                    )
                out[r.op] = prev + s
            else:
                out[r.op] = s
        return out

    def op_kind_counts(self) -> dict[str, MacTotals]:
        """Per op kind (``dense`` included), MAC totals summed over the whole trace."""
        out: dict[str, MacTotals] = {}
        for r in self.records:
            m = MacTotals.of(r.op_counts())
            out[r.op] = out[r.op] + m if r.op in out else m
        return out

    def total_counts(self) -> MacTotals:
        """The whole transformer's MACs (every recorded GEMM, dense ones included)."""
        total = MacTotals()
        for m in self.op_kind_counts().values():
            total = total + m
        return total

    def summary(self) -> dict[str, Any]:
        """Reuse statistics for reports: per op kind and for the whole transformer.

        ``reusable_ops``: the ops a config switch controls (never-reused ones, :data:`DENSE_OP` and
        ``cross_proj_kv``, only in ``whole_transformer``);
        ``mode_fractions``: fraction of (row, group) decisions in each mode;
        ``mac_fractions``: fraction of dense MACs done at 8x8, at low_bits x 8, skipped;
        ``saved_fraction``: 8-bit-equivalent MACs saved against dense.
        """
        per_op: dict[str, Any] = {}
        counts: dict[str, np.ndarray] = {}
        for r in self.records:
            c = r.head_counts.sum(axis=(0, 1))
            counts[r.op] = counts[r.op] + c if r.op in counts else c
        kinds = self.op_kind_counts()
        for op, m in sorted(kinds.items()):
            per_op[op] = {**m.to_dict(), "mode_fractions": _mode_fractions(counts[op])}
            per_op[op]["switch"] = SWITCH_OF.get(op, None)
        reuse_total = MacTotals()
        for op, m in kinds.items():
            if op in SWITCH_OF:
                reuse_total = reuse_total + m
        return {
            "per_op": per_op,
            "reusable_ops": reuse_total.to_dict(),
            "whole_transformer": self.total_counts().to_dict(),
            "records": len(self.records),
            "steps": len(self.steps),
        }

    # -- serialisation ----------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Write one ``.safetensors`` file (tables as tensors, metadata as JSON in the header)."""
        from safetensors.torch import save_file

        from kaleido.atomic import atomic_path

        path = Path(path)
        contexts: list[str] = []
        ops: list[str] = []
        modules: list[str] = []
        layouts: list[dict] = []
        grids: list[dict | None] = []

        def idx(table: list, value: Any) -> int:
            if value not in table:
                table.append(value)
            return table.index(value)

        rows, counts, patterns, maps, decisions = [], [], [], [], []
        c_off = p_off = m_off = 0
        for i, r in enumerate(self.records):
            if r.decision is not None:
                decisions.append([i, *r.decision.row()])
            layout = {"groups": r.groups.to_dict(), "low_bits": int(r.low_bits)}
            c_here, p_here = c_off, -1
            if _all_compute(r):  # a dense or disabled GEMM: its counts follow from its shape
                c_here, hc = -1, np.zeros(0, np.int64)
            else:  # COMPUTE = batch x rows - PARTIAL - FULL
                hc = np.ascontiguousarray(np.asarray(r.head_counts, dtype=np.int64)[..., int(Mode.PARTIAL):]).reshape(-1)
            if c_here >= 0 and r.pattern_counts is not None:  # sparse: most of the 3**G row patterns never occur
                pc = np.asarray(r.pattern_counts, dtype=np.int64)
                nz = np.flatnonzero(pc)
                p_here = p_off
                patterns.append(np.concatenate([[nz.size], nz, pc[nz]]).astype(np.int64))
                p_off += 1 + 2 * nz.size
            m_here = -1
            if r.mode_map is not None:
                packed = r.mode_map.pack()
                m_here = m_off
                maps.append(packed)
                m_off += packed.numel()
            rows.append([
                r.step, idx(contexts, r.context), r.layer, idx(ops, r.op), idx(modules, r.module), r.batch,
                r.heads, r.rows, r.n_cols, idx(layouts, layout), idx(grids, None if r.grid is None else r.grid.to_dict()),
                int(r.enabled), c_here, p_here, m_here,
            ])
            counts.append(hc)
            c_off += hc.size
        hc_all = _narrow(np.concatenate(counts) if counts else np.zeros(0, np.int64))
        pc_all = _narrow(np.concatenate(patterns) if patterns else np.zeros(0, np.int64))
        tensors = {
            "records": torch.from_numpy(_narrow(np.asarray(rows, dtype=np.int64).reshape(-1, len(RECORD_COLUMNS)))),
            "head_counts": torch.from_numpy(hc_all),
            "pattern_counts": torch.from_numpy(pc_all),
            "mode_maps": torch.cat(maps) if maps else torch.zeros(0, dtype=torch.uint8),
        }
        if decisions:
            tensors["decisions"] = torch.tensor(decisions, dtype=torch.int64).reshape(-1, len(DECISION_COLUMNS))  # MACs: int64
        meta = dict(self.meta)
        meta.update({
            "format": TRACE_FORMAT,
            "format_version": TRACE_FORMAT_VERSION,
            "record_columns": list(RECORD_COLUMNS),
            "contexts": contexts,
            "ops": ops,
            "modules": modules,
            "layouts": layouts,
            "grids": grids,
        })
        if decisions:
            meta["decision_columns"] = list(DECISION_COLUMNS)
        with atomic_path(path) as tmp:  # a killed or failing write leaves the old trace, never half a file
            save_file({k: v.contiguous() for k, v in tensors.items()}, str(tmp), metadata={"kaleido_trace": json.dumps(meta)})
        return path

    @classmethod
    def load(cls, path: str | Path, expected_model_class: str | None = None) -> "ReuseTrace":
        """Read and validate a trace written by :meth:`save`.

        Raises ``ValueError`` for a missing, truncated or corrupt file, another format
        or version, or (with ``expected_model_class``) a trace of another model.
        """
        from safetensors import safe_open

        path = Path(path)
        if not path.is_file():
            raise ValueError(f"trace file {str(path)!r} does not exist")
        try:
            with safe_open(str(path), framework="pt") as f:
                header = f.metadata() or {}
                tensors = {k: f.get_tensor(k) for k in f.keys()}
        except Exception as e:  # safetensors raises its own error types for truncation/corruption
            raise ValueError(
                f"trace file {str(path)!r} is not a readable safetensors file ({type(e).__name__}: {e}); "
                "it is truncated or corrupt: record the trace again"
            ) from None
        if "kaleido_trace" not in header:
            raise ValueError(f"{str(path)!r} is a safetensors file but not a Kaleido trace (no 'kaleido_trace' metadata)")
        try:
            meta = json.loads(header["kaleido_trace"])
        except json.JSONDecodeError as e:
            raise ValueError(f"trace {str(path)!r}: metadata JSON is corrupt ({e})") from None
        if meta.get("format") != TRACE_FORMAT:
            raise ValueError(f"trace {str(path)!r}: format {meta.get('format')!r} is not {TRACE_FORMAT!r}")
        if meta.get("format_version") not in READABLE_VERSIONS:
            raise ValueError(
                f"trace {str(path)!r}: format version {meta.get('format_version')!r} is not supported "
                f"(this Kaleido reads versions {', '.join(map(str, READABLE_VERSIONS))}); re-record it with this version"
            )
        if expected_model_class is not None and meta.get("model_class") != expected_model_class:
            raise ValueError(
                f"trace {str(path)!r} was recorded on {meta.get('model_class')!r}, not on {expected_model_class!r}: "
                "use a trace of the same model"
            )
        return cls(_records_from_tables(tensors, meta, str(path)), meta)

    # -- hand-off to the simulator ----------------------------------------------------
    def to_profile(self, workload=None):
        """``(Profile, notes)``: this trace as the accelerator simulator's input.

        Delegates to :func:`kaleido.hw.trace_adapter.profile_from_trace` (owned by the
        simulator), which keeps video rows only and per-step statistics.  A trace of an
        accelerator baseline (``method`` not ``"kaleido"``) gives its
        :class:`kaleido.hw.baseline_replay.BaselineProfile` instead.
        """
        if self.method != "kaleido":
            from kaleido.hw.baseline_replay import baseline_profile_from_trace

            return baseline_profile_from_trace(self, workload)
        from kaleido.hw.trace_adapter import profile_from_trace

        return profile_from_trace(self, workload)


def _records_from_tables(t: dict[str, torch.Tensor], meta: dict, where: str) -> list[TraceRecord]:
    def bad(msg: str) -> ValueError:
        return ValueError(f"trace {where!r} is corrupt: {msg}; record the trace again")

    version = meta.get("format_version", TRACE_FORMAT_VERSION)
    count_dtypes = {1: (torch.int64,), 2: (torch.int32, torch.int64)}.get(version, NARROW_DTYPES)
    record_dtypes = (torch.int64,) if version in (1, 2) else NARROW_DTYPES
    for k, dts in (("records", record_dtypes), ("head_counts", count_dtypes), ("pattern_counts", count_dtypes),
                   ("mode_maps", (torch.uint8,))):
        if k not in t:
            raise bad(f"tensor {k!r} is missing")
        if t[k].dtype not in dts:
            raise bad(f"tensor {k!r} has dtype {t[k].dtype}, expected {' or '.join(str(d) for d in dts)}")
    if list(meta.get("record_columns", [])) != list(RECORD_COLUMNS):
        raise bad(f"record columns {meta.get('record_columns')} differ from {list(RECORD_COLUMNS)}")
    rec = t["records"]
    if rec.dim() != 2 or rec.shape[1] != len(RECORD_COLUMNS):
        raise bad(f"records table has shape {tuple(rec.shape)}")
    try:
        contexts, ops, modules = list(meta["contexts"]), list(meta["ops"]), list(meta["modules"])
        layouts = [(ChannelGroups.from_dict(x["groups"]), int(x["low_bits"])) for x in meta["layouts"]]
        grids = [None if g is None else TokenGrid.from_dict(g) for g in meta["grids"]]
    except (KeyError, TypeError, ValueError) as e:
        raise bad(f"metadata tables are incomplete ({e})") from None
    decisions = _decisions_from_table(t, meta, len(rec), bad)
    rec = rec.to(torch.int64)
    hc_all = t["head_counts"].numpy().astype(np.int64)
    pc_all = t["pattern_counts"].numpy().astype(np.int64)
    maps_all = t["mode_maps"]
    out = []
    for i, row in enumerate(rec.tolist()):
        r = dict(zip(RECORD_COLUMNS, row))
        try:
            groups, low_bits = layouts[r["layout"]]
            grid = grids[r["grid"]]
            ctx, op, module = contexts[r["context"]], ops[r["op"]], modules[r["module"]]
        except IndexError:
            raise bad(f"record {i} points past the metadata tables") from None
        G = len(groups)
        per_row = 3 if version < 3 else 2  # version 3 keeps (PARTIAL, FULL); COMPUTE is the rest
        n = r["heads"] * G * per_row
        off = r["counts_offset"]
        pc = None
        if off == -1 and version >= 3:  # an all-COMPUTE record
            hc, pc = dense_counts(r["batch"], r["heads"], r["rows"], G)
            if r["patterns_offset"] != -1:
                raise bad(f"record {i}: an all-COMPUTE record with stored pattern counts")
        elif off < 0 or off + n > hc_all.size:
            raise bad(f"record {i}: head counts [{off}, {off + n}) lie outside the {hc_all.size} stored")
        else:
            hc = hc_all[off : off + n].reshape(r["heads"], G, per_row)
            if per_row == 2:
                hc = np.concatenate([r["batch"] * r["rows"] - hc.sum(axis=2, keepdims=True), hc], axis=2)
            hc = hc.copy()
        if (hc < 0).any() or not (hc.sum(axis=2) == r["batch"] * r["rows"]).all():
            raise bad(f"record {i} ({op}, layer {r['layer']}): head counts do not add up to batch x rows")
        if r["patterns_offset"] >= 0:
            pc = _pattern_counts(pc_all, r["patterns_offset"], 3**G, version, lambda m: bad(f"record {i}: {m}"))
            if int(pc.sum()) != r["batch"] * r["heads"] * r["rows"]:
                raise bad(f"record {i} ({op}, layer {r['layer']}): pattern counts do not add up to batch x heads x rows")
        mm = None
        if r["map_offset"] >= 0:
            shape = (r["batch"], r["heads"], r["rows"], G)
            nbytes = (int(np.prod(shape)) + 3) // 4
            mo = r["map_offset"]
            if mo + nbytes > maps_all.numel():
                raise bad(f"record {i}: mode map bytes lie outside the stored table")
            if grid is None:
                raise bad(f"record {i}: a mode map without a grid")
            mm = ModeMap(ModeMap.unpack_modes(maps_all[mo : mo + nbytes], shape), grid, groups, low_bits)
        dec = decisions.get(i)
        if dec is not None:
            dense = r["batch"] * r["heads"] * r["rows"] * groups.dim * r["n_cols"]
            if dec.dense_macs != dense:
                raise bad(f"record {i} ({op}, layer {r['layer']}): its decision counts {dec.dense_macs} MACs, "
                          f"the GEMM has {dense}")
        out.append(
            TraceRecord(
                step=r["step"], context=ctx, layer=r["layer"], op=op, module=module, batch=r["batch"],
                heads=r["heads"], rows=r["rows"], n_cols=r["n_cols"], groups=groups, low_bits=low_bits, grid=grid,
                enabled=bool(r["enabled"]), head_counts=hc, pattern_counts=pc, mode_map=mm, decision=dec,
            )
        )
    return out


#: the integer types a version-3 table may be stored in (the narrowest its values fit)
NARROW_DTYPES = (torch.int16, torch.int32, torch.int64)


def _narrow(a: np.ndarray) -> np.ndarray:
    """``a`` in the narrowest of int16 / int32 / int64 that holds every value (counts of ``rows x batch``
    fit int16 up to 32,767 rows: Wan 2.1 480p's 32,760 tokens do)."""
    if a.size == 0:
        return a.astype(np.int16)
    lo, hi = int(a.min()), int(a.max())
    for dt in (np.int16, np.int32):
        if np.iinfo(dt).min <= lo and hi <= np.iinfo(dt).max:
            return a.astype(dt)
    return a.astype(np.int64)


def _all_compute(r: TraceRecord) -> bool:
    """Counts and histogram are those of :func:`dense_counts` (nothing to store)."""
    hc = r.head_counts
    if r.mode_map is not None or hc[..., int(Mode.PARTIAL):].any():
        return False
    G = len(r.groups)
    pc = r.pattern_counts
    if (pc is None) != (G > MAX_PATTERN_GROUPS):
        return False
    return pc is None or (int(pc[0]) == int(np.asarray(pc).sum()))


def _pattern_counts(table: np.ndarray, off: int, n_bins: int, version: int, bad) -> np.ndarray:
    """One record's dense ``(3**G,)`` histogram: stored whole (version 1) or as ``[nnz, bins, counts]`` (2)."""
    if version == 1:
        if off + n_bins > table.size:
            raise bad("pattern counts lie outside the stored table")
        return table[off : off + n_bins].copy()
    if off >= table.size:
        raise bad("pattern counts lie outside the stored table")
    nnz = int(table[off])
    if nnz < 0 or off + 1 + 2 * nnz > table.size:
        raise bad("pattern counts lie outside the stored table")
    bins, vals = table[off + 1 : off + 1 + nnz], table[off + 1 + nnz : off + 1 + 2 * nnz]
    if (bins < 0).any() or (bins >= n_bins).any() or (vals < 0).any():
        raise bad("pattern counts hold a bin outside 0..3**G-1 or a negative count")
    out = np.zeros(n_bins, dtype=np.int64)
    out[bins] = vals
    return out


def _decisions_from_table(t: dict[str, torch.Tensor], meta: dict, n_records: int, bad) -> dict[int, MethodDecision]:
    """record index -> decision, from the optional ``decisions`` tensor."""
    if "decisions" not in t:
        if meta.get("method", "kaleido") != "kaleido":
            raise bad(f"a trace of method {meta.get('method')!r} has no 'decisions' tensor")
        return {}
    d = t["decisions"]
    if d.dtype != torch.int64 or d.dim() != 2 or d.shape[1] != len(DECISION_COLUMNS):
        raise bad(f"tensor 'decisions' has dtype {d.dtype} and shape {tuple(d.shape)}, expected int64 "
                  f"(n, {len(DECISION_COLUMNS)})")
    if list(meta.get("decision_columns", [])) != list(DECISION_COLUMNS):
        raise bad(f"decision columns {meta.get('decision_columns')} differ from {list(DECISION_COLUMNS)}")
    out = {}
    for row in d.tolist():
        i = row[0]
        if not 0 <= i < n_records or i in out:
            raise bad(f"decision row points at record {i} (records: {n_records}, or twice)")
        try:
            out[i] = MethodDecision(*row[1:])
        except ValueError as e:
            raise bad(f"decision of record {i}: {e}") from None
    return out


def merge_summaries(traces: Iterable[ReuseTrace]) -> dict[str, Any]:
    """Summary of several traces taken together (e.g. many prompts and seeds)."""
    records: list[TraceRecord] = []
    meta: dict[str, Any] = {}
    for tr in traces:
        records.extend(tr.records)
        meta = meta or tr.meta
    return ReuseTrace(records, meta).summary()
