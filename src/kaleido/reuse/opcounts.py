"""Operation counts of one (or many) reuse GEMMs.

Every row ``i`` and group ``g`` of ``C = A B`` (``A``: rows x K, ``B``: K x n_cols)
costs ``sizes[g] * n_cols`` multiply-accumulates, counted by the row's mode:

* COMPUTE: 8x8-bit MACs (``mac8``);
* PARTIAL: ``low_bits`` x 8-bit MACs (``mac_low``), accumulated onto the reference;
* FULL: no multiplies (``skipped``).

``mac8 + mac_low + skipped`` is always the dense MAC count.  The 8-bit-equivalent
cost weighs a ``low_bits x 8`` MAC as ``low_bits / 8`` of an 8x8 MAC (multiplier
energy and area scale with the product of the operand widths).
"""

from __future__ import annotations

from dataclasses import dataclass


def _fmt_macs(n: float) -> str:
    for unit, div in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= div:
            return f"{n / div:.3g} {unit}MAC"
    return f"{n:.0f} MAC"


@dataclass(frozen=True)
class OpCounts:
    """MAC counts per channel group; see the module docstring for the definitions."""

    group_names: tuple[str, ...]
    mac8: tuple[int, ...]
    mac_low: tuple[int, ...]
    skipped: tuple[int, ...]
    low_bits: int

    def __post_init__(self) -> None:
        n = len(self.group_names)
        for name in ("mac8", "mac_low", "skipped"):
            v = tuple(int(x) for x in getattr(self, name))
            if len(v) != n:
                raise ValueError(f"OpCounts.{name} has {len(v)} entries for {n} groups")
            if any(x < 0 for x in v):
                raise ValueError(f"OpCounts.{name} has a negative count: {v}")
            object.__setattr__(self, name, v)
        object.__setattr__(self, "group_names", tuple(self.group_names))

    @classmethod
    def zeros(cls, group_names: tuple[str, ...], low_bits: int) -> "OpCounts":
        z = (0,) * len(group_names)
        return cls(tuple(group_names), z, z, z, low_bits)

    # -- totals -------------------------------------------------------------------------
    @property
    def total_mac8(self) -> int:
        return sum(self.mac8)

    @property
    def total_mac_low(self) -> int:
        return sum(self.mac_low)

    @property
    def total_skipped(self) -> int:
        return sum(self.skipped)

    @property
    def dense_macs(self) -> int:
        """MACs of the same GEMM(s) computed densely."""
        return self.total_mac8 + self.total_mac_low + self.total_skipped

    @property
    def equiv8_macs(self) -> float:
        """8-bit-equivalent MACs: ``mac8 + mac_low * low_bits / 8``."""
        return self.total_mac8 + self.total_mac_low * self.low_bits / 8

    @property
    def saved_fraction(self) -> float:
        """Fraction of 8-bit-equivalent MACs saved against dense (0 when there is no work)."""
        d = self.dense_macs
        return 0.0 if d == 0 else 1.0 - self.equiv8_macs / d

    def group_saved_fraction(self, g: int) -> float:
        d = self.mac8[g] + self.mac_low[g] + self.skipped[g]
        return 0.0 if d == 0 else 1.0 - (self.mac8[g] + self.mac_low[g] * self.low_bits / 8) / d

    # -- combination --------------------------------------------------------------------
    def total(self) -> "OpCounts":
        """The same counts collapsed into one group named ``total``."""
        return OpCounts(("total",), (self.total_mac8,), (self.total_mac_low,), (self.total_skipped,), self.low_bits)

    def __add__(self, other: "OpCounts") -> "OpCounts":
        if not isinstance(other, OpCounts):
            return NotImplemented
        if other.low_bits != self.low_bits:
            raise ValueError(
                f"cannot add OpCounts with low_bits {self.low_bits} and {other.low_bits}: "
                "their 8-bit equivalents differ"
            )
        a, b = self, other
        if a.group_names != b.group_names:
            a, b = a.total(), b.total()
        return OpCounts(
            a.group_names,
            tuple(x + y for x, y in zip(a.mac8, b.mac8)),
            tuple(x + y for x, y in zip(a.mac_low, b.mac_low)),
            tuple(x + y for x, y in zip(a.skipped, b.skipped)),
            a.low_bits,
        )

    # -- reporting ----------------------------------------------------------------------
    def summary(self) -> str:
        """One line: dense MACs, the mode split, and the 8-bit-equivalent saving."""
        d = self.dense_macs or 1
        return (
            f"dense {_fmt_macs(self.dense_macs)} | 8x8 {100 * self.total_mac8 / d:.1f}% | "
            f"{self.low_bits}x8 {100 * self.total_mac_low / d:.1f}% | "
            f"skipped {100 * self.total_skipped / d:.1f}% | "
            f"8-bit-equivalent saving {100 * self.saved_fraction:.1f}%"
        )

    def to_dict(self) -> dict:
        return {
            "group_names": list(self.group_names),
            "mac8": list(self.mac8),
            "mac_low": list(self.mac_low),
            "skipped": list(self.skipped),
            "low_bits": self.low_bits,
            "dense_macs": self.dense_macs,
            "equiv8_macs": self.equiv8_macs,
            "saved_fraction": self.saved_fraction,
        }

    @classmethod
    def from_dict(cls, d: dict) -> "OpCounts":
        try:
            return cls(tuple(d["group_names"]), tuple(d["mac8"]), tuple(d["mac_low"]), tuple(d["skipped"]), int(d["low_bits"]))
        except KeyError as e:
            raise ValueError(f"OpCounts dict is missing key {e.args[0]!r}") from None
