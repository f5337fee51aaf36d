"""Atomic result files: write a temporary file in the same folder, then ``os.replace`` it.

Every result file Kaleido writes (sweep rows, traces, ``metrics.json``, CSVs, plots,
reports, configs) goes through this module, so a process that dies or raises mid-write
leaves either the complete new file or the old one (or none), never a half file:

* :func:`atomic_path` - for writers that need a path (``safetensors.save_file``): yields
  a temporary path, renamed onto the target on success;
* :func:`open_atomic` - a file object, for streaming writers (``csv.writer``,
  ``json.dump``) and for those that pick a format by extension, which then take it
  explicitly: ``fig.savefig(f, format="png")``, ``image.save(f, format="GIF")``,
  ``np.save(f, array)``;
* :func:`write_atomic` - ``str`` (UTF-8) or ``bytes`` contents in one call.

The temporary file is ``.<name>.<pid>.<random>.tmp`` beside the target (the same file
system, so the rename is atomic; it ends in ``.tmp``, so globs such as ``*.json`` that
collect results never see one) and is removed if the writer raises.  Before the rename it gets
the permissions of any ordinary new file, ``0o666`` less the umask (``0644`` under the usual
``022``), whatever mode the writer created it with (``safetensors`` creates ``0600``).  The
rename makes a write atomic for readers and against a killed process; it is not a durability
guarantee across power loss (no ``fsync``).
"""

from __future__ import annotations

import os
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator


def _temporary_beside(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")


def _umask() -> int:
    """The process's umask, read without changing it where Linux shows it (``os.umask`` sets it to read
    it, so another thread creating a file meanwhile would get the wrong mode)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def new_file_mode() -> int:
    """The permission bits an ordinary new file gets (``open(path, "w")``): ``0o666`` less the umask."""
    return 0o666 & ~_umask()


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on normal exit it replaces ``path``.

    If the body raises, the temporary file is deleted and ``path`` is left as it was.
    The parent folder must exist.  Example::

        with atomic_path(out / "trace.safetensors") as tmp:
            save_file(tensors, str(tmp))
    """
    target = Path(path)
    tmp = _temporary_beside(target)
    try:
        yield tmp
        if not tmp.exists():
            raise FileNotFoundError(f"{tmp}: the writer created no file, so {target} was not written")
        try:
            os.chmod(tmp, new_file_mode())
        except OSError:  # a file system without Unix modes: the write itself still counts
            pass
        os.replace(tmp, target)
    finally:
        # left behind only when the body raised or the rename failed
        tmp.unlink(missing_ok=True)


@contextmanager
def open_atomic(path: str | os.PathLike, mode: str = "w", **kwargs) -> Iterator[IO]:
    """``open(tmp, mode, **kwargs)`` on a temporary file that replaces ``path`` when the block ends.

    ``mode`` is ``"w"`` (text; ``encoding`` defaults to UTF-8) or ``"wb"``."""
    if mode not in ("w", "wb"):
        raise ValueError(f"open_atomic mode {mode!r}: use 'w' (text) or 'wb' (binary)")
    if mode == "w":
        kwargs.setdefault("encoding", "utf-8")
    with atomic_path(path) as tmp, open(tmp, mode, **kwargs) as f:
        yield f


def write_atomic(path: str | os.PathLike, data: str | bytes) -> Path:
    """Write ``data`` (``str`` as UTF-8, or ``bytes``) to ``path`` atomically; returns ``path``."""
    path = Path(path)
    with open_atomic(path, "wb") as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)
    return path
