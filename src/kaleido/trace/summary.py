"""What a trace adds up to: MAC totals per op kind and for the whole transformer, and mode statistics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

from kaleido.ops import SWITCH_OF
from kaleido.reuse.modes import Mode, ModeStats
from kaleido.reuse.opcounts import OpCounts

from .records import TraceRecord


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


def op_kind_stats(records: Iterable[TraceRecord], include_dense: bool = False) -> dict[str, ModeStats]:
    """Per op kind, the :class:`ModeStats` of ``records`` (see :meth:`ReuseTrace.op_kind_stats`)."""
    out: dict[str, ModeStats] = {}
    for r in records:
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


def op_kind_counts(records: Iterable[TraceRecord]) -> dict[str, MacTotals]:
    """Per op kind (``dense`` included), MAC totals summed over ``records``."""
    out: dict[str, MacTotals] = {}
    for r in records:
        m = MacTotals.of(r.op_counts())
        out[r.op] = out[r.op] + m if r.op in out else m
    return out


def total_counts(records: Iterable[TraceRecord]) -> MacTotals:
    """The whole transformer's MACs (every recorded GEMM, dense ones included)."""
    total = MacTotals()
    for m in op_kind_counts(records).values():
        total = total + m
    return total


def summarize(records: list[TraceRecord]) -> dict[str, Any]:
    """Reuse statistics of ``records`` for reports (see :meth:`ReuseTrace.summary`)."""
    per_op: dict[str, Any] = {}
    counts: dict[str, np.ndarray] = {}
    for r in records:
        c = r.head_counts.sum(axis=(0, 1))
        counts[r.op] = counts[r.op] + c if r.op in counts else c
    kinds = op_kind_counts(records)
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
        "whole_transformer": total_counts(records).to_dict(),
        "records": len(records),
        "steps": len({r.step for r in records}),
    }


def merge_summaries(traces: Iterable[Any]) -> dict[str, Any]:
    """Summary of several traces (:class:`ReuseTrace`) taken together (e.g. many prompts and seeds)."""
    records: list[TraceRecord] = []
    for tr in traces:
        records.extend(tr.records)
    return summarize(records)
