"""Every registered technique behind one :class:`Method` interface: ``METHODS`` and ``make_method``.

``make_method("tome", ratio=0.5).apply(pipe.transformer)`` (Wan, HunyuanVideo or CogVideoX) -> a handle with
``remove()`` and ``report()`` (MACs per op kind, 8-bit-equivalent, as Kaleido's
:class:`~kaleido.reuse.OpCounts`).  One module per technique, each registering itself in
:mod:`kaleido.techniques.registry` (imported below, in the order the comparison lists them);
:data:`METHODS` and :func:`make_method` read the registry.  See docs/baselines.md.
"""

from __future__ import annotations

from typing import Iterator, Mapping

# Importing a technique's module registers it; this order is the registry's (and the sweep's) order.
from kaleido.techniques.kaleido_reuse.method import KaleidoMethod
from kaleido.techniques.sparse_videogen import SparseVideoGen
from kaleido.techniques.block_topk import BlockTopK
from kaleido.techniques.tome import ToMe
from kaleido.techniques.adaptiv import AdapTiV
from kaleido.techniques.step_cache import FirstBlockCache, MagCache, PyramidAttentionBroadcast, TaylorSeer
from kaleido.techniques.exion import Exion
from kaleido.techniques.cambricon_d import CambriconD
from kaleido.techniques.cache_dit_peer import CacheDiT
from kaleido.techniques.stack import Stack  # last: it stacks the others

from kaleido.techniques.base import Method
from kaleido.techniques.handle import MethodHandle
from kaleido.techniques.method_report import MethodReport
from kaleido.techniques.registry import TECHNIQUES, Technique, technique
from kaleido.ops import BLOCK_KINDS
from kaleido.techniques.shapes import ESTIMATE, ModelShapes


class _MethodClasses(Mapping):
    """name -> Method class of every registered technique (a live, read-only view of the registry)."""

    def __getitem__(self, name: str) -> type[Method]:
        return TECHNIQUES[name].method

    def __iter__(self) -> Iterator[str]:
        return iter(TECHNIQUES)

    def __len__(self) -> int:
        return len(TECHNIQUES)

    def __repr__(self) -> str:
        return f"METHODS({list(TECHNIQUES)})"


#: name -> Method class
METHODS: Mapping[str, type[Method]] = _MethodClasses()


def make_method(name: str, **settings) -> Method:
    """The baseline ``name`` with ``settings`` (validated; unknown names and keys raise ``ValueError``).

    ``make_method("stack", techniques=[{"technique": "taylorseer"}, {"technique": "kaleido", ...}])``
    stacks techniques (:mod:`kaleido.techniques.stack`)."""
    t = TECHNIQUES.get(name)
    if t is None:
        raise ValueError(f"unknown baseline {name!r}; known: {sorted(TECHNIQUES)}")
    if t.method is Stack:
        return Stack(resolve=make_method, **settings)
    return t.method(**settings)


__all__ = ["METHODS", "TECHNIQUES", "Technique", "technique", "make_method", "Method", "MethodHandle", "MethodReport",
           "ModelShapes", "BLOCK_KINDS", "ESTIMATE", "Stack", "KaleidoMethod", "SparseVideoGen", "BlockTopK", "ToMe",
           "AdapTiV", "PyramidAttentionBroadcast", "FirstBlockCache", "TaylorSeer", "MagCache", "Exion", "CambriconD",
           "CacheDiT"]
