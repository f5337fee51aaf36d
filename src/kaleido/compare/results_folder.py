"""A results folder's state: which rows are finished, and one sweep at a time writing it.

:func:`row_done`: a row file counts only when it parses, so a file truncated (by a copy, a full disk, an
editor) is computed again and replaced whole instead of stopping the sweep.

Two sweeps writing one folder would each compute the points the other has not finished yet and write the
same rows twice (atomically, so no row is torn, but the work is doubled and the dense reference raced).
:func:`sweep_lock` holds an exclusive ``flock`` on ``<folder>/.sweep.lock`` while a sweep runs; a second
sweep on the folder is refused at once in one line naming the holder. The lock belongs to the open file, so
a sweep that dies (killed, out of memory) releases it with its process: no stale lock is left to delete.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

LOCK_NAME = ".sweep.lock"


def row_done(path: Path) -> bool:
    """Whether ``path`` holds a finished row: it exists and parses (a file truncated by a copy or a full disk
    does not count, so the sweep computes that point again and replaces it whole)."""
    try:
        json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return True


@contextmanager
def sweep_lock(folder: Path) -> Iterator[None]:
    """Hold ``folder``'s sweep lock for the body; ``ValueError`` (one line) when another sweep holds it."""
    try:
        import fcntl
    except ImportError:  # no POSIX locks (Windows): one sweep per folder is then the user's to keep
        yield
        return
    path = Path(folder) / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
            raise ValueError(f"another sweep ({holder}) is writing {folder}: wait for it to finish, or give this "
                             "one its own results folder") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {os.uname().nodename}".encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
