"""Backward-compatible alias of :mod:`kaleido.trace`, kept for user code that imports ``kaleido.integrations.trace``.

The trace is its own package now (records, counting, formats, summaries); import from :mod:`kaleido.trace`.
``ReuseTrace.to_profile()`` is gone: call :func:`kaleido.hw.trace_adapter.profile_from_trace` (a baseline's trace:
:func:`kaleido.hw.baseline_replay.baseline_profile_from_trace`).
"""

from kaleido.reuse.modes import MAX_PATTERN_GROUPS  # noqa: F401  (this module's namespace had it)
from kaleido.trace import *  # noqa: F401,F403
from kaleido.trace import __all__ as _trace_all
from kaleido.trace.formats import NARROW_DTYPES  # noqa: F401

__all__ = [*_trace_all, "MAX_PATTERN_GROUPS", "NARROW_DTYPES"]
