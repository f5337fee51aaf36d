"""``ReuseTrace``: what Kaleido (or another method) decided and skipped in one generation.

The records (:mod:`kaleido.trace.records`) of one generation plus metadata (model, config, grid, dtype), with views,
summaries (:mod:`kaleido.trace.summary`) and the file (:mod:`kaleido.trace.formats`, ``docs/trace-format.md``).
The simulator's profile of a trace is :func:`kaleido.hw.inputs.trace_adapter.profile_from_trace` (a baseline's:
:func:`kaleido.hw.inputs.baseline_profile.baseline_profile_from_trace`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from kaleido.reuse.modes import ModeMap, ModeStats

from . import formats, summary
from .records import TraceRecord
from .summary import MacTotals


class ReuseTrace:
    """The records of one generation plus metadata (model, config, grid, dtype)."""

    def __init__(self, records: list[TraceRecord], meta: dict[str, Any]):
        self.records = list(records)
        self.meta = dict(meta)

    # -- basic views ------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[TraceRecord]:
        return iter(self.records)

    @property
    def model_class(self) -> str:
        return str(self.meta.get("model_class", ""))

    @property
    def method(self) -> str:
        """The method whose decisions this trace holds (``"kaleido"`` when the meta has none)."""
        return str(self.meta.get("method", "kaleido"))

    @property
    def steps(self) -> list[int]:
        return sorted({r.step for r in self.records})

    @property
    def ops(self) -> list[str]:
        return sorted({r.op for r in self.records})

    def select(
        self, *, step: int | None = None, layer: int | None = None, op: str | None = None, context: str | None = None
    ) -> list[TraceRecord]:
        return [
            r
            for r in self.records
            if (step is None or r.step == step)
            and (layer is None or r.layer == layer)
            and (op is None or r.op == op)
            and (context is None or r.context == context)
        ]

    def mode_maps(self) -> Iterator[tuple[TraceRecord, ModeMap]]:
        """Records with their full mode maps (only those recorded with ``record_maps``)."""
        for r in self.records:
            if r.mode_map is not None:
                yield r, r.mode_map

    # -- aggregation ------------------------------------------------------------------
    def op_kind_stats(self, include_dense: bool = False) -> dict[str, ModeStats]:
        """Per op kind, the :class:`ModeStats` summed over steps, layers, contexts and heads.

        Ops Kaleido can reuse only (those a config switch controls: ``self_qk``, ``proj_q``,
        ...), disabled layers and warm-up steps included as COMPUTE rows; ``include_dense``
        adds the never-reused ones, :data:`DENSE_OP` and ``cross_proj_kv`` (not additive
        across their shapes: only when they share one layout).
        Raises ``ValueError`` when one op kind mixes channel-group layouts.
        """
        return summary.op_kind_stats(self.records, include_dense)

    def op_kind_counts(self) -> dict[str, MacTotals]:
        """Per op kind (``dense`` included), MAC totals summed over the whole trace."""
        return summary.op_kind_counts(self.records)

    def total_counts(self) -> MacTotals:
        """The whole transformer's MACs (every recorded GEMM, dense ones included)."""
        return summary.total_counts(self.records)

    def summary(self) -> dict[str, Any]:
        """Reuse statistics for reports: per op kind and for the whole transformer.

        ``reusable_ops``: the ops a config switch controls (never-reused ones, :data:`DENSE_OP` and
        ``cross_proj_kv``, only in ``whole_transformer``);
        ``mode_fractions``: fraction of (row, group) decisions in each mode;
        ``mac_fractions``: fraction of dense MACs done at 8x8, at low_bits x 8, skipped;
        ``saved_fraction``: 8-bit-equivalent MACs saved against dense.
        """
        return summary.summarize(self.records)

    # -- serialisation ----------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Write one ``.safetensors`` file (tables as tensors, metadata as JSON in the header)."""
        return formats.save_trace(self.records, self.meta, path)

    @classmethod
    def load(cls, path: str | Path, expected_model_class: str | None = None) -> "ReuseTrace":
        """Read and validate a trace written by :meth:`save`.

        Raises ``ValueError`` for a missing, truncated or corrupt file, another format
        or version, or (with ``expected_model_class``) a trace of another model.
        """
        records, meta = formats.read_trace(path, expected_model_class)
        return cls(records, meta)
