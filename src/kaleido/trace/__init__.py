"""The trace: what a technique decided in one generation, in one format (``docs/trace-format.md``).

* :mod:`~kaleido.trace.records`: :class:`TraceRecord` (one GEMM call), :class:`MethodDecision` (another method's
  decision on it), :data:`DENSE_OP`;
* :mod:`~kaleido.trace.counting`: mode counts on the device (:func:`counts_on_device`) or of a dense GEMM;
* :mod:`~kaleido.trace.summary`: MAC totals and summaries (:class:`MacTotals`, :func:`merge_summaries`);
* :mod:`~kaleido.trace.formats`: the safetensors file, versions 1-3 (:func:`save_trace`, :func:`read_trace`);
* :mod:`~kaleido.trace.reuse_trace`: :class:`ReuseTrace`, records plus metadata.

A layer of its own below the runtime: it imports neither diffusers, the runtime (``kaleido.techniques.kaleido_reuse``) nor the
simulator. The simulator's profile of a trace: :func:`kaleido.hw.inputs.trace_adapter.profile_from_trace`.
"""

from .counting import counts_on_device, dense_counts
from .formats import READABLE_VERSIONS, RECORD_COLUMNS, TRACE_FORMAT, TRACE_FORMAT_VERSION, read_trace, save_trace
from .records import DECISION_COLUMNS, DENSE_OP, MethodDecision, TraceRecord
from .reuse_trace import ReuseTrace
from .summary import MacTotals, merge_summaries

__all__ = [
    "DECISION_COLUMNS", "DENSE_OP", "MacTotals", "MethodDecision", "READABLE_VERSIONS", "RECORD_COLUMNS", "ReuseTrace",
    "TRACE_FORMAT", "TRACE_FORMAT_VERSION", "TraceRecord", "counts_on_device", "dense_counts", "merge_summaries",
    "read_trace", "save_trace",
]
