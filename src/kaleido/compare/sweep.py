"""Run a sweep on Dask: a LocalCluster of spawned worker processes, or an existing scheduler.

Both paths share the same code: a ``distributed.Client`` is created either for a
fresh ``LocalCluster(n_workers, threads_per_worker=1, processes=True)`` on the loopback
interface or for ``scheduler`` (``tcp://HOST:PORT``); every pending point becomes one
task running :func:`kaleido.compare.worker.run_point`.  Points whose row already exists
in ``results_dir`` are not submitted at all (resume).  Dense references run first so
method points never race to compute the same reference.

A script that calls :func:`run_sweep` with the local cluster must guard its entry
point with ``if __name__ == "__main__":`` (workers are spawned and re-import it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .points import DENSE, SweepPoint
from .worker import run_point


@dataclass
class SweepSummary:
    total: int
    already_done: int
    computed: int
    errors: list[str] = field(default_factory=list)
    keys_computed: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"total": self.total, "already_done": self.already_done, "computed": self.computed,
                "errors": list(self.errors)}


def pending(points: list[SweepPoint], results_dir: Path) -> list[SweepPoint]:
    """Points without a row file in ``results_dir`` (duplicates removed, order kept)."""
    seen, out = set(), []
    for p in points:
        k = p.key
        if k in seen:
            continue
        seen.add(k)
        if not (results_dir / f"{k}.json").exists():
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
    cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                           dashboard_address=None)
    return Client(cluster), cluster


def run_sweep(points: list[SweepPoint], results_dir: str | Path, scheduler: str | None = None, n_workers: int = 1,
              progress: bool = True) -> SweepSummary:
    """Compute every point of ``points`` that has no row yet; rows go to ``results_dir/<key>.json``."""
    results = Path(results_dir)
    results.mkdir(parents=True, exist_ok=True)
    unique = {p.key: p for p in points}
    todo = pending(list(unique.values()), results)
    summary = SweepSummary(len(unique), len(unique) - len(todo), 0)
    if not todo:
        return summary
    from distributed import as_completed

    client, cluster = _client(scheduler, n_workers)
    try:
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=len(todo), desc="sweep points", unit="pt")
        phases = [[p for p in todo if p.method == DENSE], [p for p in todo if p.method != DENSE]]
        for phase in phases:
            if not phase:
                continue
            futures = [client.submit(run_point, p.to_dict(), str(results), key=f"kaleido-point-{p.key}", pure=False)
                       for p in phase]
            for fut in as_completed(futures):
                row = fut.result()
                summary.computed += 1
                summary.keys_computed.append(row["point"]["key"])
                if row.get("error"):
                    summary.errors.append(f"{row['point']['method']} {row['point']['settings']}: {row['error']}")
                if bar is not None:
                    bar.update(1)
        if bar is not None:
            bar.close()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    return summary
