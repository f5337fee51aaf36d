"""The trace file: one safetensors file, tables as tensors, metadata as JSON in its header (versions 1-3).

Written in version 3; versions 1 and 2 still load.  The format is documented in ``docs/trace-format.md``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from kaleido.reuse.groups import ChannelGroups
from kaleido.reuse.grid import TokenGrid
from kaleido.reuse.modes import MAX_PATTERN_GROUPS, Mode, ModeMap

from .counting import dense_counts
from .records import DECISION_COLUMNS, MethodDecision, TraceRecord

TRACE_FORMAT = "kaleido-reuse-trace"
#: version 3 stores only the PARTIAL and FULL counts of each (head, group) (COMPUTE is the rest of
#: ``batch x rows``), none at all for an all-COMPUTE record (``counts_offset`` -1), and every table in the
#: narrowest signed integer type its values fit; version 2 (sparse histograms, int32 counts with COMPUTE)
#: and version 1 (dense histograms, int64) still load
TRACE_FORMAT_VERSION = 3
READABLE_VERSIONS = (1, 2, 3)
#: Columns of the ``records`` table, in order.
RECORD_COLUMNS = (
    "step", "context", "layer", "op", "module", "batch", "heads", "rows", "n_cols",
    "layout", "grid", "enabled", "counts_offset", "patterns_offset", "map_offset",
)


def save_trace(records: list[TraceRecord], meta: dict[str, Any], path: str | Path) -> Path:
    """Write ``records`` and ``meta`` as one ``.safetensors`` file (tables as tensors, metadata as JSON in the header)."""
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
    for i, r in enumerate(records):
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
    meta = dict(meta)
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


def read_trace(path: str | Path, expected_model_class: str | None = None) -> tuple[list[TraceRecord], dict[str, Any]]:
    """``(records, meta)`` of a trace written by :func:`save_trace`, validated.

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
    return _records_from_tables(tensors, meta, str(path)), meta


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
