"""Memory of a calibration spread over a real Dask cluster, against the same calibration in one process.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/sweep_memory_soak.py            # about 8 minutes on 2 cores

Starts ``dask scheduler`` and two ``dask worker --nthreads 1`` processes on localhost (no nanny, so no
``MALLOC_TRIM_THRESHOLD_`` either: the environment the sweep's local cluster gives its workers), runs
``kaleido calibrate --target-psnr`` on the shipped model at 8 steps through ``--scheduler`` (every candidate
on every calibration prompt, then the held-out measurements: at least 40 sweep points), then the same command
with ``--workers 0`` (in this process's child, no Dask). Each process's resident memory is sampled every 0.2 s.
Prints, per worker and for the single process: peak RSS, RSS over the first and the last quarter of its points,
and the ratio of each worker's peak to the single process's (target: within 1.5x, and flat across tasks).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Sampler(threading.Thread):
    """Samples the RSS of ``procs`` (name -> psutil.Process, children included) until stopped."""

    def __init__(self, procs: dict[str, psutil.Process], period: float = 0.2):
        super().__init__(daemon=True)
        self.procs, self.period, self.samples = procs, period, {n: [] for n in procs}
        self._halt = threading.Event()

    @staticmethod
    def _rss(p: psutil.Process) -> int:
        try:
            return p.memory_info().rss + sum(c.memory_info().rss for c in p.children(recursive=True))
        except psutil.Error:
            return 0

    def run(self) -> None:
        while not self._halt.is_set():
            t = time.monotonic()
            for n, p in self.procs.items():
                self.samples[n].append((t, self._rss(p)))
            self._halt.wait(self.period)

    def stop(self) -> None:
        self._halt.set()
        self.join()


def _calibrate_args(out: Path, steps: int, budget: int) -> list[str]:
    return [shutil.which("kaleido") or "kaleido", "calibrate", "--model", "tiny", "--steps", str(steps),
            "--target-psnr", "30", "--prompts", str(ROOT / "configs/calibration/prompts.txt"),
            "--heldout", str(ROOT / "configs/calibration/heldout.txt"), "--budget", str(budget),
            "--out", str(out / "config.yaml")]


def _done_times(results: Path) -> list[float]:
    """Modification times of the sweep's method rows: when each point finished."""
    out = []
    for f in results.glob("*.json"):
        try:
            if json.loads(f.read_text())["point"]["method"] != "dense":
                out.append(f.stat().st_mtime)
        except (OSError, ValueError, KeyError):
            pass
    return sorted(out)


def _quarters(samples: list[tuple[float, int]], start: float, end: float) -> tuple[float, float, float]:
    """Peak RSS (GiB) overall, in the first and in the last quarter of [start, end]."""
    q = (end - start) / 4
    first = [r for t, r in samples if start <= t <= start + q] or [0]
    last = [r for t, r in samples if end - q <= t <= end] or [0]
    return max(r for _, r in samples) / 2**30, max(first) / 2**30, max(last) / 2**30


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--budget", type=int, default=8, help="candidates of the target search (default 8)")
    a = ap.parse_args(argv)
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", HF_HUB_OFFLINE="1")
    env.pop("MALLOC_TRIM_THRESHOLD_", None)
    port = _free_port()
    addr = f"tcp://127.0.0.1:{port}"
    work = Path(tempfile.mkdtemp(prefix="kaleido-soak-"))
    procs: list[subprocess.Popen] = []
    log = open(work / "cluster.log", "w")
    try:
        procs.append(subprocess.Popen(["dask", "scheduler", "--host", "127.0.0.1", "--port", str(port),
                                       "--no-dashboard"], env=env, stdout=log, stderr=log))
        time.sleep(3)
        for i in (1, 2):
            procs.append(subprocess.Popen(["dask", "worker", addr, "--nthreads", "1", "--no-nanny", "--name",
                                           f"w{i}", "--memory-limit", "0", "--no-dashboard"], env=env, stdout=log,
                                          stderr=log))
        time.sleep(5)
        (work / "dask").mkdir()
        watch = Sampler({f"worker {i}": psutil.Process(p.pid) for i, p in enumerate(procs[1:], 1)})
        watch.start()
        t0 = time.monotonic()
        wall0 = time.time()
        res = subprocess.run(_calibrate_args(work / "dask", a.steps, a.budget) + ["--scheduler", addr], env=env,
                             capture_output=True, text=True)
        t1 = time.monotonic()
        watch.stop()
        if res.returncode != 0:
            print(res.stdout[-2000:], res.stderr[-2000:], file=sys.stderr)
            return 1
        done = _done_times(work / "dask" / "calibration_runs")
        start, end = t0 + (done[0] - wall0), t0 + (done[-1] - wall0)
        print(f"Dask: {len(done)} method points (plus dense references) in {t1 - t0:.0f} s on 2 workers")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        log.close()
    (work / "one").mkdir()
    child = subprocess.Popen(_calibrate_args(work / "one", a.steps, a.budget) + ["--workers", "0"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    one = Sampler({"one process": psutil.Process(child.pid)})
    one.start()
    u0 = time.monotonic()
    _, err = child.communicate()
    u1 = time.monotonic()
    one.stop()
    if child.returncode != 0:
        print(err[-2000:], file=sys.stderr)
        return 1
    print(f"one process: the same calibration in {u1 - u0:.0f} s")
    peak_one, f_one, l_one = _quarters(one.samples["one process"], u0, u1)
    print(f"{'process':14s} {'peak GiB':>9s} {'first quarter':>14s} {'last quarter':>13s} {'peak / one process':>19s}")
    for name, s in watch.samples.items():
        peak, first, last = _quarters(s, start, end)
        print(f"{name:14s} {peak:9.2f} {first:14.2f} {last:13.2f} {peak / peak_one:18.2f}x")
    print(f"{'one process':14s} {peak_one:9.2f} {f_one:14.2f} {l_one:13.2f} {1.0:18.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
