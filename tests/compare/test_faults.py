"""A worker process killed mid-sweep: finished rows stay on disk and a rerun computes only the missing points.

The task is a stand-in for :func:`kaleido.compare.worker.run_point` (same contract: write the point's row
atomically, return it) that ends its own worker process with ``os._exit`` when it reaches the point named
in a marker file, so the kill is real (a spawned LocalCluster worker dies, its nanny restarts it) and
lands on a chosen point instead of at a random moment.
"""

import json
import os
import sys
from pathlib import Path

import cloudpickle
import dask
import distributed  # noqa: F401 - loads the distributed.* config defaults that the tests override
import pytest

from kaleido.compare.points import SweepPoint
from kaleido.compare.results_folder import LOCK_NAME
from kaleido.compare.sweep import run_sweep

# the workers cannot import this test module: ship its functions by value
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def fake_point(point_dict: dict, results_dir: str) -> dict:
    """Like run_point: an existing row is returned as it is; otherwise log the computation, die for the point
    named in ``kill-<key>`` (once if the marker says so), or write its row."""
    from kaleido.compare.worker import write_json_atomic

    results = Path(results_dir)
    key = point_dict["key"]
    if (results / f"{key}.json").exists():
        return json.loads((results / f"{key}.json").read_text())
    with open(results.parent / "calls.log", "a") as log:
        log.write(f"{key} {os.getpid()}\n")
    marker = results.parent / f"kill-{key}"
    if marker.exists():
        if marker.read_text() == "once":
            marker.unlink()
        os._exit(1)  # the worker process dies here, without any clean-up
    row = {"point": point_dict, "psnr": 30.0, "pid": os.getpid()}
    write_json_atomic(results / f"{key}.json", row)
    return row


def make_points() -> list[SweepPoint]:
    dense = SweepPoint("random-wan", "dense", "a red ball", 0)
    return [dense] + [SweepPoint("random-wan", "tome", "a red ball", 0, {"ratio": r}) for r in (0.1, 0.2, 0.3, 0.4)]


def calls(tmp_path) -> list[str]:
    return [ln.split()[0] for ln in (tmp_path / "calls.log").read_text().splitlines()]


def test_killed_worker_keeps_finished_rows_and_a_rerun_computes_only_the_missing_point(tmp_path):
    results = tmp_path / "rows"
    pts = make_points()
    victim = pts[2]  # the second method point: one method row finishes before it dies, two after
    (tmp_path / f"kill-{victim.key}").write_text("always")
    # no retry of the doomed point, and one task per worker thread at a time (by default the scheduler hands a
    # worker one more, which its death would count against too)
    with dask.config.set({"distributed.scheduler.allowed-failures": 0, "distributed.scheduler.worker-saturation": 1.0}):
        summary = run_sweep(pts, results, n_workers=1, progress=False, compute=fake_point)
    assert summary.keys_failed == [victim.key]
    assert "worker process died" in summary.failed[0] and "tome ratio=0.2" in summary.failed[0]
    assert sorted(summary.keys_computed) == sorted(p.key for p in pts if p is not victim)
    assert sorted(calls(tmp_path)) == sorted(p.key for p in pts)  # each point computed once, the victim included
    rows = {f.stem: json.loads(f.read_text()) for f in results.glob("*.json")}
    assert set(rows) == {p.key for p in pts if p is not victim}  # every finished row is on disk, whole
    assert len({r["pid"] for r in rows.values()}) == 2  # rows from the worker that died and from its replacement
    # no half row, no temporary file (only the folder's sweep lock beside the rows)
    assert sorted(n for n in os.listdir(results) if n != LOCK_NAME) == sorted(f"{k}.json" for k in rows)
    mtimes = {f.name: f.stat().st_mtime_ns for f in results.iterdir() if f.name != LOCK_NAME}

    (tmp_path / f"kill-{victim.key}").unlink()
    (tmp_path / "calls.log").unlink()
    again = run_sweep(pts, results, n_workers=1, progress=False, compute=fake_point)
    assert (again.total, again.already_done, again.computed, again.failed) == (5, 4, 1, [])
    assert calls(tmp_path) == [victim.key]  # only the missing point was computed
    assert all(f.stat().st_mtime_ns == mtimes[f.name] for f in results.iterdir() if f.name in mtimes)
    assert len(list(results.glob("*.json"))) == 5


def test_a_worker_that_dies_once_costs_nothing_but_the_retry(tmp_path):
    results = tmp_path / "rows"
    pts = make_points()
    victim = pts[3]
    (tmp_path / f"kill-{victim.key}").write_text("once")
    summary = run_sweep(pts, results, n_workers=1, progress=False, compute=fake_point)  # default retries
    assert (summary.computed, summary.failed) == (5, [])
    log = calls(tmp_path)
    assert log.count(victim.key) == 2 and all(log.count(p.key) == 1 for p in pts if p is not victim)
    assert len(list(results.glob("*.json"))) == 5


def test_a_sweep_whose_plan_is_wrong_still_stops(tmp_path):
    """A ValueError from a task (e.g. the weights changed mid-sweep) is not a fault to skip: it stops the sweep."""

    def wrong_plan(point_dict, results_dir):
        raise ValueError("the weights changed mid-sweep; plan the sweep again")

    with pytest.raises(ValueError, match="plan the sweep again"):
        run_sweep(make_points()[:1], tmp_path, n_workers=1, progress=False, compute=wrong_plan)


def test_compare_cli_lists_the_missing_points_and_exits_1(tmp_path, monkeypatch):
    """What `kaleido compare` prints for a sweep that lost points (the sweep itself is stubbed: tested above)."""
    import kaleido.compare.sweep as sweep
    from click.testing import CliRunner

    from kaleido.cli.main import cli
    from kaleido.compare.sweep import SweepSummary

    def lost_one(points, results, **kw):
        return SweepSummary(len(points), 0, len(points) - 1, failed=["tome ratio=0.3, prompt 'p', seed 0 [abc]: its "
                                                                      "worker process died while computing it"],
                            keys_failed=["abc"])

    monkeypatch.setattr(sweep, "run_sweep", lost_one)
    res = CliRunner().invoke(cli, ["compare", "--pipeline", "random-wan", "--methods", "tome", "--prompts", "1",
                                   "--results", str(tmp_path), "--workloads", "none", "--json"])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert "1 failed" in res.output and "failed: tome ratio=0.3, prompt 'p', seed 0 [abc]" in res.output
    assert "run the same command again to compute only the 1 missing point(s)" in res.output


def slow_point(point_dict: dict, results_dir: str) -> dict:
    """Like run_point, 0.5 s per point, logging each computation."""
    import time

    from kaleido.compare.worker import write_json_atomic

    results = Path(results_dir)
    out = results / f"{point_dict['key']}.json"
    if out.exists():
        return json.loads(out.read_text())
    with open(results.parent / "calls.log", "a") as log:
        log.write(f"{point_dict['key']} {os.getpid()}\n")
    time.sleep(0.5)
    row = {"point": point_dict, "psnr": 30.0}
    write_json_atomic(out, row)
    return row


def test_a_scheduler_restarted_mid_sweep_loses_nothing(tmp_path):
    """A real `dask scheduler` killed while the sweep runs: the finished rows stay, the others are listed as lost in
    one line each, and the same sweep against the restarted scheduler computes exactly the missing points."""
    import socket
    import subprocess
    import threading
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    addr = f"tcp://127.0.0.1:{port}"
    # the scheduler unpickles the task graph, which names this module: let both processes import it
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]))

    def start():
        sch = subprocess.Popen(["dask", "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                               stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env)
        time.sleep(2)
        wk = subprocess.Popen(["dask", "worker", addr, "--nthreads", "1", "--no-dashboard"],
                              stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env)
        time.sleep(4)
        return sch, wk

    results = tmp_path / "rows"
    results.mkdir()
    pts = [SweepPoint("random-wan", "dense", "a red ball", 0)] + [
        SweepPoint("random-wan", "tome", "a red ball", 0, {"ratio": r / 100}) for r in range(1, 10)]
    sch, wk = start()

    def stop_when_three_rows():
        while len(list(results.glob("*.json"))) < 3:
            time.sleep(0.05)
        sch.kill()

    try:
        threading.Thread(target=stop_when_three_rows, daemon=True).start()
        first = run_sweep(pts, results, scheduler=addr, progress=False, compute=slow_point)
        done = {f.name: f.read_bytes() for f in results.glob("*.json")}
        assert len(done) >= 3, first.failed[:1]
        # a row can reach the disk while its result is lost with the scheduler: it is reported lost, kept, and
        # not computed again; every point is either reported computed (its row on disk) or lost
        assert first.computed + len(first.failed) == len(pts) and first.computed <= len(done)
        assert {f"{k}.json" for k in first.keys_computed} <= set(done)
        assert all("the connection to the Dask scheduler was lost" in f and "\n" not in f for f in first.failed)
    finally:
        sch.kill()
        wk.kill()
        sch.wait()
        wk.wait()
    sch, wk = start()  # the scheduler restarted, at the same address
    try:
        again = run_sweep(pts, results, scheduler=addr, progress=False, compute=slow_point)
    finally:
        sch.kill()
        wk.kill()
    assert (again.already_done, again.computed, again.failed) == (len(done), len(pts) - len(done), [])
    assert all((results / n).read_bytes() == b for n, b in done.items())  # the kept rows untouched
    assert sorted(f.stem for f in results.glob("*.json")) == sorted(p.key for p in pts)
    log = calls(tmp_path)
    assert all(log.count(p.key) <= 2 for p in pts) and all(log.count(k[:-5]) == 1 for k in done)
