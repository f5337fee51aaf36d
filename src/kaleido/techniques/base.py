"""The one interface every baseline implements: :class:`Method`, a technique with validated settings.

``method.apply(transformer)`` patches a diffusers vDiT transformer of any family Kaleido
has an adapter for (:func:`kaleido.models.adapter.adapter_for`: Wan, HunyuanVideo,
CogVideoX) in place and returns a :class:`~kaleido.techniques.handle.MethodHandle`;
``handle.remove()`` restores the model exactly, and ``handle.report()`` says what the
technique computed, per op kind, in the same 8-bit-equivalent MAC units as Kaleido's
:class:`~kaleido.reuse.OpCounts` (a :class:`~kaleido.techniques.method_report.MethodReport`).

The bookkeeping they share lives one concept per module: :mod:`.shapes` (op kinds, a call's
GEMMs from the adapter's sites), :mod:`.ledger` (MAC counts per op kind), :mod:`.method_report`
(what a report holds), :mod:`.handle` (the applied method: accounting, steps and slots,
observers).  A technique registers itself with :func:`kaleido.techniques.registry.register_technique`.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import torch

from kaleido.techniques.call_context import CallInfo
from kaleido.techniques.handle import EVENTS, MethodHandle
from kaleido.techniques.ledger import OpLedger
from kaleido.techniques.method_report import MethodReport
from kaleido.ops import BLOCK_KINDS
from kaleido.techniques.shapes import ESTIMATE, JOINT, TEXT, UNIT_KINDS, VIDEO, CallGemm, ModelShapes, claims_of, kind_unit

# The bookkeeping's names stay reachable here: the techniques' docstrings and the docs name them
# ``kaleido.techniques.base.X``.
__all__ = ["Method", "check_range", "MethodHandle", "CallInfo", "EVENTS", "OpLedger", "MethodReport", "CallGemm",
           "ModelShapes", "BLOCK_KINDS", "ESTIMATE", "UNIT_KINDS", "VIDEO", "TEXT", "JOINT", "claims_of", "kind_unit"]


class Method(ABC):
    """A technique with validated settings; see the module docstring.

    Subclasses declare ``name``, a frozen ``Settings`` dataclass (validated in
    ``__post_init__``), ``claims`` (the ``(unit, op kind)`` pairs whose MACs they may
    record themselves, at the sites they :meth:`~MethodHandle.take_over`) and implement
    :meth:`_install`.
    """

    name: ClassVar[str]
    Settings: ClassVar[type]
    claims: frozenset = frozenset()
    low_bits: int = 8

    def __init__(self, **settings: Any) -> None:
        names = {f.name for f in dataclasses.fields(self.Settings)}
        bad = sorted(set(settings) - names)
        if bad:
            raise ValueError(f"{self.name}: unknown setting(s) {bad}; allowed: {sorted(names)}")
        self.settings = self.Settings(**settings)

    def settings_dict(self) -> dict:
        return dataclasses.asdict(self.settings)

    def apply(self, transformer: torch.nn.Module) -> MethodHandle:
        handle = MethodHandle(self, transformer)
        try:
            self._install(handle)
        except Exception:
            handle.remove()
            raise
        return handle

    @abstractmethod
    def _install(self, handle: MethodHandle) -> None:
        """Patch ``handle.transformer``; register every undo with ``handle.add_undo``."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.settings_dict()})"


def check_range(method: str, name: str, value: float, lo: float, hi: float, hint: str = "") -> None:
    """``ValueError`` naming the setting, its value and the allowed range unless ``lo <= value <= hi``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
        raise ValueError(f"{method}: {name}={value!r} is out of range; allowed [{lo}, {hi}]{'; ' + hint if hint else ''}")
