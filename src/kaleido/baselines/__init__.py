"""Baselines Kaleido is compared with, all behind one :class:`Method` interface.

``make_method("tome", ratio=0.5).apply(pipe.transformer)`` (Wan, HunyuanVideo or CogVideoX) -> a handle with
``remove()`` and ``report()`` (MACs per op kind, 8-bit-equivalent, as Kaleido's
:class:`~kaleido.reuse.OpCounts`).  One module per technique; see docs/baselines.md.
"""

from __future__ import annotations

from .adaptiv import AdapTiV
from .base import ESTIMATE, OP_KINDS, Method, MethodHandle, MethodReport, ModelShapes
from .block_topk import BlockTopK
from .cambricon_d import CambriconD
from .exion import Exion
from .kaleido_method import KaleidoMethod
from .sparse_videogen import SparseVideoGen
from .stack import Stack
from .step_cache import FirstBlockCache, MagCache, PyramidAttentionBroadcast, TaylorSeer
from .tome import ToMe

#: name -> Method class
METHODS: dict[str, type[Method]] = {
    m.name: m
    for m in (SparseVideoGen, BlockTopK, ToMe, AdapTiV, PyramidAttentionBroadcast, FirstBlockCache, TaylorSeer,
              MagCache, Exion, CambriconD, KaleidoMethod, Stack)
}


def make_method(name: str, **settings) -> Method:
    """The baseline ``name`` with ``settings`` (validated; unknown names and keys raise ``ValueError``).

    ``make_method("stack", techniques=[{"technique": "taylorseer"}, {"technique": "kaleido", ...}])``
    stacks techniques (:mod:`kaleido.baselines.stack`)."""
    cls = METHODS.get(name)
    if cls is None:
        raise ValueError(f"unknown baseline {name!r}; known: {sorted(METHODS)}")
    if cls is Stack:
        return Stack(resolve=make_method, **settings)
    return cls(**settings)


__all__ = ["METHODS", "make_method", "Method", "MethodHandle", "MethodReport", "ModelShapes", "OP_KINDS", "ESTIMATE", "Stack"]
