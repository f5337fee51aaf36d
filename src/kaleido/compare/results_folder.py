"""A results folder's state: which rows are finished, and one sweep at a time writing it.

:func:`row_done`: a row file counts only when it parses, so a file truncated (by a copy, a full disk, an
editor) is computed again and replaced whole instead of stopping the sweep.

Two sweeps writing one folder would each compute the points the other has not finished yet and write the
same rows twice (atomically, so no row is torn, but the work is doubled and the dense reference raced).
:func:`sweep_lock` holds an exclusive ``flock`` on ``<folder>/.sweep.lock`` while a sweep runs; a second
sweep on the folder is refused at once in one line naming the holder. The lock belongs to the open file, so
a sweep that dies (killed, out of memory) releases it with its process: no stale lock is left to delete.

A folder's tables compare each method with the dense rows beside it, so one folder holds one plan - one model
(weights fingerprint), one set of call settings (step count, sampler, size): :func:`check_plan` refuses, in one
line naming a row of the other plan, a sweep that would add rows of another plan to it.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

LOCK_NAME = ".sweep.lock"

Plan = tuple[str, str, str]  #: ``(pipeline, weights fingerprint, call settings as sorted JSON)``


def plan_of(point: dict) -> Plan:
    """The plan a row's (or a sweep point's) ``point`` belongs to."""
    return (point["pipeline"], str(point.get("model_id", "")), json.dumps(point.get("call") or {}, sort_keys=True))


def describe_plan(plan: Plan) -> str:
    pipeline, model_id, call = plan
    return f"{pipeline} {call}" + (f" (weights {model_id})" if model_id else "")


def folder_plans(folder: Path) -> dict[Plan, Path]:
    """Each plan the finished rows in ``folder`` belong to, with one row file of it."""
    plans: dict[Plan, Path] = {}
    for f in sorted(Path(folder).glob("*.json")):
        try:
            point = json.loads(f.read_text())["point"]
            plans.setdefault(plan_of(point), f)
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not a finished row: the sweep computes it again (:func:`row_done`)
    return plans


def check_plan(folder: Path, points: list[dict]) -> None:
    """``ValueError`` (one line) when ``points`` or the rows already in ``folder`` span more than one plan."""
    mine = {plan_of(p) for p in points}
    if len(mine) > 1:
        shown = "; ".join(describe_plan(p) for p in sorted(mine)[:2])
        raise ValueError(f"this sweep mixes {len(mine)} plans ({shown}): sweep each model / step count / sampler "
                         "into its own results folder")
    if not mine:
        return
    for plan, row in folder_plans(folder).items():
        if plan not in mine:
            raise ValueError(f"{folder} holds rows of another plan ({row.name}: {describe_plan(plan)}), not this "
                             f"sweep's ({describe_plan(next(iter(mine)))}): give this sweep its own results folder, "
                             "or move those rows out")


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
