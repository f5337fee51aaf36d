"""Additive MAC counts per op kind, as every baseline's handle keeps them (:class:`OpLedger`)."""

from __future__ import annotations

from typing import Callable

from kaleido.reuse import OpCounts

from kaleido.ops import BLOCK_KINDS
from kaleido.techniques.shapes import ESTIMATE


def check_new_name(what: str, name: str, taken) -> None:
    """``ValueError`` unless ``name`` is a non-empty string not in ``taken`` (observers, extras, providers)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"{what} name must be a non-empty string, got {name!r}")
    if name in taken:
        raise ValueError(f"{what} {name!r} is already registered; pick another name or remove that one first")


class OpLedger:
    """Additive MAC counts per op kind (one ``total`` group each)."""

    def __init__(self, low_bits: int = 8) -> None:
        self.low_bits = int(low_bits)
        self._c: dict[str, list[int]] = {}
        self._observers: dict[str, Callable[[str, int, int, int], None]] = {}

    def add_observer(self, name: str, fn: Callable[[str, int, int, int], None]) -> None:
        """Call ``fn(kind, mac8, mac_low, skipped)`` after every :meth:`add`, in registration order."""
        check_new_name("ledger observer", name, self._observers)
        self._observers[name] = fn

    def remove_observer(self, name: str) -> None:
        self._observers.pop(name, None)

    def add(self, kind: str, mac8: int = 0, mac_low: int = 0, skipped: int = 0) -> None:
        if kind not in BLOCK_KINDS and kind != ESTIMATE:
            raise ValueError(f"unknown op kind {kind!r}; known: {list(BLOCK_KINDS) + [ESTIMATE]}")
        if min(mac8, mac_low, skipped) < 0:
            raise ValueError(f"negative MAC count for {kind}: {mac8}, {mac_low}, {skipped}")
        c = self._c.setdefault(kind, [0, 0, 0])
        c[0] += int(mac8)
        c[1] += int(mac_low)
        c[2] += int(skipped)
        for fn in self._observers.values():
            fn(kind, mac8, mac_low, skipped)

    def _charged(self, kind: str, macs: int) -> list[int]:
        c = self._c.get(kind)
        if c is None or c[2] < macs:
            raise ValueError(f"{kind}: {macs} MACs ran that the call did not charge as skipped")
        return c

    def ran(self, kind: str, macs: int) -> None:
        """``macs`` of ``kind`` charged as skipped at the call's start ran: computed (no observer sees it;
        the handle announces it as ``"gemm ran"``)."""
        c = self._charged(kind, macs)
        c[0] += int(macs)
        c[2] -= int(macs)

    def uncharge(self, kind: str, macs: int) -> None:
        """Take back ``macs`` of ``kind`` charged as skipped: the method that ran them records them itself."""
        self._charged(kind, macs)[2] -= int(macs)

    def op_counts(self) -> dict[str, OpCounts]:
        return {k: OpCounts(("total",), (c[0],), (c[1],), (c[2],), self.low_bits) for k, c in self._c.items()}
