"""Sweeps: keys, resume without recomputation, the Dask local-cluster path, analysis."""

import pytest

from kaleido.compare.analysis import aggregate, load_rows, matched_savings, pareto_figure, pareto_front
from kaleido.compare.grids import build_points
from kaleido.compare.points import SweepPoint
from kaleido.compare.sweep import pending, run_sweep
from kaleido.compare.worker import run_point

CALL = {"num_inference_steps": 2, "max_sequence_length": 16}


def small_points():
    grid = {"tome": [{"ratio": 0.3}, {"ratio": 0.6}], "block_topk": [{"density": 0.5, "block_size": 8}]}
    return build_points("random-wan", ["tome", "block_topk"], 1, (0,), CALL, grid)


def test_keys_depend_on_every_setting():
    a = SweepPoint("random-wan", "tome", "p", 0, {"ratio": 0.3})
    assert a.key == SweepPoint.from_dict(a.to_dict()).key
    assert a.key != SweepPoint("random-wan", "tome", "p", 1, {"ratio": 0.3}).key
    assert a.key != SweepPoint("random-wan", "tome", "p", 0, {"ratio": 0.31}).key
    assert a.dense().key == SweepPoint("random-wan", "tome", "p", 0, {"ratio": 0.9}).dense().key


def test_resumed_sweep_computes_nothing_twice(tmp_path):
    pts = small_points()
    assert len(pts) == 4  # 1 dense + 3 method points
    # "interrupted" sweep: only the dense reference and the first method point ran
    for p in pts[:2]:
        run_point(p.to_dict(), str(tmp_path))
    done = {f.name: f.stat().st_mtime_ns for f in tmp_path.glob("*.json")}
    assert len(done) == 2
    todo = pending(pts, tmp_path)
    assert [p.key for p in todo] == [p.key for p in pts[2:]]
    (reference,) = tmp_path.glob("dense-*.npy")
    written = (reference.stat().st_ino, reference.stat().st_mtime_ns)
    for p in todo:  # what run_sweep submits, run in-process
        run_point(p.to_dict(), str(tmp_path))
    after = {f.name: f.stat().st_mtime_ns for f in tmp_path.glob("*.json")}
    assert len(after) == 4
    assert all(after[n] == t for n, t in done.items())  # earlier rows untouched
    assert not list(tmp_path.glob("*.tmp"))  # no temporary file of a row or reference left behind
    # the reference was reused, not generated and written again (an atomic rewrite is a new file)
    assert list(tmp_path.glob("dense-*.npy")) == [reference]
    assert (reference.stat().st_ino, reference.stat().st_mtime_ns) == written
    # a finished sweep submits nothing at all (no cluster is even started)
    summary = run_sweep(pts, tmp_path, n_workers=1, progress=False)
    assert (summary.total, summary.already_done, summary.computed) == (4, 4, 0)


def test_dask_local_cluster_runs_the_sweep(tmp_path):
    pts = small_points()
    summary = run_sweep(pts, tmp_path, n_workers=1, progress=False)
    assert (summary.computed, summary.errors) == (4, [])
    rows = load_rows(tmp_path)
    assert len(rows) == 4
    hosts_pids = {r.get("host") for r in rows}
    assert hosts_pids  # rows came back from the worker process
    runs = {r.get("run") for r in rows}
    assert len(runs) == 1 and None not in runs  # one run id on every row: its wall times pair with its dense
    aggs = aggregate(rows)
    tome = {a.settings["ratio"]: a for a in aggs if a.method == "tome"}
    assert tome[0.3].self_qk_saved == pytest.approx(1 - (56 / 80) ** 2)
    assert tome[0.6].self_qk_saved > tome[0.3].self_qk_saved
    matched = matched_savings(aggs, targets=(0.6,))
    assert matched["tome"][0].psnr is not None and "interpolated" in matched["tome"][0].how
    assert matched["block_topk"][0].psnr is None and "not reached" in matched["block_topk"][0].how
    assert pareto_figure(aggs)[:4] == b"\x89PNG"


def test_existing_scheduler_takes_the_same_path(tmp_path):
    from distributed import LocalCluster

    pts = small_points()[:2]  # the dense reference and one method point
    # an in-process cluster started by "someone else" (threads: quick to start); only its address is passed
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        summary = run_sweep(pts, tmp_path, scheduler=cluster.scheduler_address, progress=False)
    assert summary.computed == 2 and len(load_rows(tmp_path)) == 2


def test_bad_scheduler_address_is_refused(tmp_path):
    with pytest.raises(ValueError, match="tcp://HOST:PORT"):
        run_sweep(small_points(), tmp_path, scheduler="localhost:8786", progress=False)


def test_pareto_front():
    assert sorted(pareto_front([(0.5, 30), (0.7, 25), (0.6, 20), (0.5, 29)])) == [0, 1]


def test_kaleido_setting_families_are_plotted_as_separate_series():
    from kaleido.compare.analysis import SettingAggregate, plot_series

    def agg(method, settings):
        return SettingAggregate(method, settings, 1, 30.0, 0.9, 30.0, 0.5, 0.5, 0.3)

    every_op = agg("kaleido", dict(theta1=16, theta2=32, low_bits=6))
    qk_only = agg("kaleido", dict(theta1=32, theta2=64, low_bits=7, cross_qk=False, proj=False, ffn=False))
    assert plot_series(every_op) == "kaleido"
    assert plot_series(qk_only) == "kaleido (self-attn q.k^T only)"
    assert plot_series(agg("tome", dict(ratio=0.3, proj=False, ffn=False))) == "tome"


def _trim_threshold():
    import os

    return os.environ.get("MALLOC_TRIM_THRESHOLD_")


def test_local_workers_keep_glibcs_dynamic_mmap_threshold():
    """distributed's MALLOC_TRIM_THRESHOLD_=65536 made every generation in a worker ~1.7x slower: not set."""
    from kaleido.compare.sweep import close_client, open_client

    client, cluster = open_client(None, 1)
    try:
        assert client.submit(_trim_threshold, pure=False).result() is None
    finally:
        close_client(client, cluster)
