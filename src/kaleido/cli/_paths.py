"""Output paths checked when the command line is read: a folder that cannot be made or written into is one
line naming it (``--out /proc/nope``), before any model loads or any work is done - not an ``OSError``
traceback when the first result is written, minutes later."""

from __future__ import annotations

import tempfile
from pathlib import Path

import click

FIX = "choose a folder you can write to"


def folder_problem(folder: str | Path, keep: bool = False) -> str | None:
    """Why ``folder`` cannot be created (where missing) and written into, in one phrase (``"cannot create folder
    'x' (why)"``), or ``None`` when it can. The check tries both; unless ``keep``, the folders it made are removed again (the
    output-folder writers make them when they write)."""
    folder = Path(folder)
    made: list[Path] = []  # missing levels, deepest first: removed again after the check
    p = folder
    try:
        while p != p.parent and not p.exists():
            made.append(p)
            p = p.parent
        if p.exists() and not p.is_dir():
            where = "" if p == folder else f"cannot create folder {str(folder)!r}: "
            return f"{where}{str(p)!r} is a file, not a folder"
    except OSError:  # a level that cannot even be looked at: mkdir below names why
        pass
    try:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            return f"cannot create folder {str(folder)!r} ({e.strerror or type(e).__name__})"
        try:
            with tempfile.TemporaryFile(dir=folder):
                pass
        except OSError as e:
            return f"cannot write into folder {str(folder)!r} ({e.strerror or type(e).__name__})"
        return None
    finally:
        for d in [] if keep else made:
            try:
                d.rmdir()
            except OSError:
                break


def output_folder(ctx: click.Context, param: click.Parameter, value):
    """click callback of an output-folder option (``--out``, ``--results-dir``): refuse, in one line naming the
    folder and the fix, one that cannot be created or written into."""
    if value is not None:
        problem = folder_problem(value)
        if problem:
            raise click.BadParameter(f"{problem}; {FIX}", ctx=ctx, param=param)
    return value


def output_file(ctx: click.Context, param: click.Parameter, value):
    """click callback of an output-file option (``--out report.html``): refuse, in one line, a file whose folder
    cannot be created or written into; the folder is made here (not every file writer makes its parent)."""
    if value is not None:
        problem = folder_problem(Path(value).parent, keep=True)
        if problem:
            raise click.BadParameter(f"cannot write {str(value)!r}: {problem}; {FIX}", ctx=ctx, param=param)
    return value
