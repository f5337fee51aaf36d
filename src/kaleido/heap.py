"""Give the C heap's free pages back to the operating system after each generation.

A generation allocates and frees hundreds of MB of tensors. glibc's allocator raises its mmap threshold after
the first large free (up to 32 MiB), so later tensors below it come from the heap, and the heap keeps the pages
of what was freed: measured on the miniature model at 8 steps, a process running one sweep point after another
grew by about 120 MiB per point (0.85 -> 1.9 GiB over 12 points) while Python held nothing more; with
``malloc_trim(0)`` after each point it stayed at 0.6 GiB. A Dask worker that runs a few hundred points, or a
calibration in one process (5.8 GiB after 48 candidate runs, ``benchmarks/sweep_memory_soak.py``), grows the same
way; :func:`kaleido.evaluation.generate.generate` and each sweep point trim. ``distributed`` counters this by starting workers with ``MALLOC_TRIM_THRESHOLD_=65536``,
which also pins the mmap threshold and made each generation about 1.7x slower (the sweep's local cluster drops
it, :mod:`kaleido.compare.sweep`); trimming once per point costs a few milliseconds instead.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys


@functools.lru_cache(maxsize=1)
def _malloc_trim():
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):  # no C library found, or one without malloc_trim (musl)
        return None


def return_free_heap() -> bool:
    """Return the heap's free pages to the OS (glibc's ``malloc_trim(0)``, every arena); ``False`` where the C
    library has no such call (then nothing happens)."""
    trim = _malloc_trim()
    return bool(trim(0)) if trim is not None else False
