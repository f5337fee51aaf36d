"""Run a sweep on Dask: a LocalCluster of spawned worker processes, or an existing scheduler.

Both paths share the same code: a ``distributed.Client`` is created either for a
fresh ``LocalCluster(n_workers, threads_per_worker=1, processes=True)`` on the loopback
interface or for ``scheduler`` (``tcp://HOST:PORT``); every pending point becomes one
task running :func:`kaleido.compare.worker.run_point`.  Points whose row already exists
in ``results_dir`` are not submitted at all (resume).  Dense references run first so
method points never race to compute the same reference.

Faults: each task writes its own row atomically as soon as it finishes, so a worker
that dies (killed, out of memory, a crashing library) loses at most the points it was
computing.  Dask retries such a point on another (or the restarted) worker up to
``distributed.scheduler.allowed-failures`` times; a point that still fails is listed in
:attr:`SweepSummary.failed` and the sweep goes on with the others.  Running the same
sweep again computes only the points without a row.

A script that calls :func:`run_sweep` with the local cluster must guard its entry
point with ``if __name__ == "__main__":`` (workers are spawned and re-import it).
"""

from __future__ import annotations

import functools
import inspect
import uuid
from datetime import datetime, timezone

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .results_folder import check_plan, row_done, sweep_lock
from .points import DENSE, SweepPoint, settings_label
from .worker import run_point


@dataclass
class SweepSummary:
    total: int
    already_done: int
    computed: int
    errors: list[str] = field(default_factory=list)  # points a method refused (their rows record why)
    keys_computed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # points without a row: "<label> [<key>]: <why>"
    keys_failed: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"total": self.total, "already_done": self.already_done, "computed": self.computed,
                "errors": list(self.errors), "failed": list(self.failed)}


def pending(points: list[SweepPoint], results_dir: Path) -> list[SweepPoint]:
    """Points without a finished row in ``results_dir`` (:func:`row_done`; duplicates removed, order kept)."""
    seen, out = set(), []
    for p in points:
        k = p.key
        if k in seen:
            continue
        seen.add(k)
        if not row_done(results_dir / f"{k}.json"):
            out.append(p)
    return out


def _client(scheduler: str | None, n_workers: int):
    from distributed import Client, LocalCluster

    if scheduler:
        if not scheduler.startswith(("tcp://", "tls://", "inproc://", "ucx://")):
            raise ValueError(f"--scheduler {scheduler!r}: give an address like tcp://HOST:PORT")
        return Client(scheduler, timeout="20s"), None
    if n_workers < 1:
        raise ValueError(f"n_workers={n_workers}: need at least 1 worker process")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import dask

    # distributed starts its workers with MALLOC_TRIM_THRESHOLD_=65536, which fixes glibc's mmap threshold
    # too, so every large tensor is mapped and unmapped afresh: a miniature-model generation took 18.8 s
    # in such a worker and 11.0 s without it (1 thread each, this 2-core machine)
    env = {k: v for k, v in dask.config.get("distributed.nanny.pre-spawn-environ", {}).items()
           if k != "MALLOC_TRIM_THRESHOLD_"}
    with dask.config.set({"distributed.nanny.pre-spawn-environ": env}):
        cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                               dashboard_address=None)
    return Client(cluster), cluster


def _why_failed(exc: BaseException) -> str:
    from distributed import KilledWorker

    if isinstance(exc, KilledWorker):
        return "its worker process died while computing it (killed, out of memory or crashed)"
    if "scheduler-connection-lost" in str(exc):
        return "the connection to the Dask scheduler was lost (stopped or restarted) before it ran"
    return " ".join(f"{type(exc).__name__}: {exc}".split())  # one line


def new_run_id() -> str:
    """An id for one sweep run: its start time (UTC) and a random suffix."""
    return f"{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"


def run_sweep(points: list[SweepPoint], results_dir: str | Path, scheduler: str | None = None, n_workers: int = 1,
              progress: bool = True, compute: Callable[[dict, str], dict] = run_point, client=None) -> SweepSummary:
    """Compute every point of ``points`` that has no row yet; rows go to ``results_dir/<key>.json``.

    ``compute(point_dict, results_dir) -> row`` is what each task runs; it must write the
    point's row itself (:func:`kaleido.compare.worker.run_point` does).  A point whose task
    fails or whose worker dies is reported in ``failed``, not raised: the other points go on.  ``client``: a
    Dask client to use (and leave open) instead of one made from ``scheduler`` / ``n_workers`` for this call
    (:func:`open_client`).  One sweep at a time writes a folder (:func:`kaleido.compare.results_folder.sweep_lock`):
    a second is refused with a ``ValueError``, and so is a sweep whose plan (model, call settings) is not that of
    the rows already there (:func:`kaleido.compare.results_folder.check_plan`)."""
    results = Path(results_dir)
    results.mkdir(parents=True, exist_ok=True)
    with sweep_lock(results):
        check_plan(results, [p.to_dict() for p in points])
        return _run_sweep(points, results, scheduler, n_workers, progress, compute, client)


def _run_sweep(points, results: Path, scheduler, n_workers, progress, compute, client) -> SweepSummary:
    unique = {p.key: p for p in points}
    todo = pending(list(unique.values()), results)
    summary = SweepSummary(len(unique), len(unique) - len(todo), 0)
    if not todo:
        return summary
    from distributed import as_completed

    own = client is None
    client, cluster = _client(scheduler, n_workers) if own else (client, None)
    try:
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=len(todo), desc="sweep points", unit="pt")
        phases = [[p for p in todo if p.method == DENSE], [p for p in todo if p.method != DENSE]]
        task = compute
        if "run" in inspect.signature(compute).parameters:  # the rows of this run carry its id (wall-time pairing)
            task = functools.partial(compute, run=new_run_id())
        for phase in phases:
            if not phase:
                continue
            futures = [client.submit(task, p.to_dict(), str(results), key=f"kaleido-point-{p.key}", pure=False)
                       for p in phase]
            point_of = {f.key: p for f, p in zip(futures, phase)}
            done = as_completed(futures)
            del futures  # each result is released once read: a worker that dies later holds none to recompute
            for fut in done:
                try:
                    row = fut.result()
                except ValueError:  # the sweep's own plan is wrong (unknown pipeline, weights changed): stop
                    raise
                except Exception as e:  # noqa: BLE001 - a dead worker or a crash: the point stays pending for a rerun
                    p = point_of[fut.key]
                    summary.failed.append(f"{settings_label(p.method, p.settings)}, prompt {p.prompt!r}, seed {p.seed} "
                                          f"[{p.key}]: {_why_failed(e)}")
                    summary.keys_failed.append(p.key)
                    if bar is not None:
                        bar.update(1)
                    continue
                finally:
                    fut.release()
                summary.computed += 1
                summary.keys_computed.append(row["point"]["key"])
                if row.get("error"):
                    summary.errors.append(f"{row['point']['method']} {row['point']['settings']}: {row['error']}")
                if bar is not None:
                    bar.update(1)
        if bar is not None:
            bar.close()
    finally:
        if own:
            close_client(client, cluster)
    return summary


def open_client(scheduler: str | None, n_workers: int):
    """``(client, cluster)`` for several :func:`run_sweep` calls (``cluster`` is ``None`` with a scheduler)."""
    return _client(scheduler, n_workers)


def close_client(client, cluster) -> None:
    client.close()
    if cluster is not None:
        cluster.close()
