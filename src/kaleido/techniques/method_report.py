"""What a method computed while applied: per-op-kind MAC counts and extras (:class:`MethodReport`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kaleido.reuse import OpCounts

from kaleido.ops import BLOCK_KINDS
from kaleido.techniques.shapes import ESTIMATE


@dataclass
class MethodReport:
    """Per-op-kind counts of everything that ran while a method was applied."""

    method: str
    settings: dict
    op_counts: dict[str, OpCounts]
    calls: int
    extra: dict = field(default_factory=dict)

    def saved_fraction(self, kind: str) -> float:
        """8-bit-equivalent MACs saved on ``kind`` (its own work only, estimates excluded)."""
        oc = self.op_counts.get(kind)
        return 0.0 if oc is None else oc.saved_fraction

    @property
    def dense_macs(self) -> int:
        return sum(oc.dense_macs for k, oc in self.op_counts.items() if k != ESTIMATE)

    @property
    def estimate_macs(self) -> float:
        oc = self.op_counts.get(ESTIMATE)
        return 0.0 if oc is None else oc.equiv8_macs

    @property
    def equiv8_macs(self) -> float:
        """8-bit-equivalent MACs of the whole transformer's blocks, estimates included."""
        return sum(oc.equiv8_macs for oc in self.op_counts.values())

    @property
    def total_saved_fraction(self) -> float:
        d = self.dense_macs
        return 0.0 if d == 0 else 1.0 - self.equiv8_macs / d

    def to_dict(self) -> dict:
        return {
            "method": self.method,
            "settings": dict(self.settings),
            "calls": self.calls,
            "op_counts": {k: v.to_dict() for k, v in sorted(self.op_counts.items())},
            "saved_fraction": {k: self.saved_fraction(k) for k in BLOCK_KINDS if k in self.op_counts},
            "dense_macs": self.dense_macs,
            "estimate_macs": self.estimate_macs,
            "equiv8_macs": self.equiv8_macs,
            "total_saved_fraction": self.total_saved_fraction,
            "extra": dict(self.extra),
        }
