"""Figures every design on the array reports the same way: speedup over the dense array and PE utilisation."""

from __future__ import annotations


class ArrayFigures:
    """Mixin for a dataclass with ``cycles``, ``dense_cycles`` and ``array_macs`` (the 8-bit-equivalent MACs
    the array performed; low-bit ones weighted b/8)."""

    cycles: float
    dense_cycles: float

    @property
    def array_macs(self) -> float:  # pragma: no cover - each result names its own field
        raise NotImplementedError

    def utilisation(self, pes: int) -> float:
        """Useful MACs per PE-cycle, in [0, 1]."""
        return self.array_macs / max(1.0, pes * self.cycles)

    @property
    def speedup_vs_dense(self) -> float:
        return self.dense_cycles / max(1.0, self.cycles)

    def figures_dict(self, pes: int | None = None) -> dict:
        """The dataclass fields plus ``speedup_vs_dense`` (and ``utilisation`` when ``pes`` is given)."""
        d = dict(self.__dict__)
        d["speedup_vs_dense"] = self.speedup_vs_dense
        if pes:
            d["utilisation"] = self.utilisation(pes)
        return d
