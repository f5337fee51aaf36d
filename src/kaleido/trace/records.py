"""The records of a trace: one :class:`TraceRecord` per GEMM call, and another method's :class:`MethodDecision` on it.

One record per GEMM call: (denoising step, cache context, layer, op, module), the GEMM's shape, its channel groups,
and per-head mode counts ``head_counts[h, g, m]`` (rows of head ``h`` and group ``g`` in mode ``m``, summed over the
batch).  Dense GEMMs that Kaleido does not touch (text-side projections, embeddings, warm-up steps, disabled ops) are
recorded too, as all-COMPUTE, so whole-transformer MAC totals include them.  Optionally each record keeps its full
:class:`~kaleido.reuse.ModeMap`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kaleido.ops import OpKind
from kaleido.reuse.groups import ChannelGroups
from kaleido.reuse.grid import TokenGrid
from kaleido.reuse.modes import ModeMap, ModeStats
from kaleido.reuse.opcounts import OpCounts

#: Op name of GEMMs Kaleido never reuses (text tokens, embeddings, other linears): :attr:`OpKind.DENSE`.
DENSE_OP = OpKind.DENSE.value
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

