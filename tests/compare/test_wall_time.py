"""Wall time beside MACs: each setting's median wall-time ratio against dense (paired by prompt and seed), the
device it was measured on, where its saving is real, and all three in `kaleido compare`'s printed table."""

import json
import math

from click.testing import CliRunner

from kaleido.compare.analysis import (NEEDS_ACCELERATOR, TODAY, UNKNOWN_DEVICE,
                                      accelerator_speedups, aggregate, device_label, ranking_at_quality,
                                      saving_realised, wall_ratios)
from kaleido.compare.points import SweepPoint

CPU = {"type": "cpu", "name": "Test CPU 9000", "threads": 1, "cpus": 2}
GPU = {"type": "cuda", "name": "NVIDIA H200", "threads": 16, "cpus": 16}


def dense_row(prompt, seed, wall, device=None, run="run-1"):
    p = SweepPoint("tiny", "dense", prompt, seed, {}, {"num_inference_steps": 4}, "tiny:abc")
    r = {"point": p.to_dict(), "wall_s": wall, "frames": 5, "host": "h", "run": run}
    if device:
        r["device"] = device
    return r


def method_row(method, settings, prompt, seed, wall, psnr=32.0, saved=0.4, device=None, dense_wall=None, run="run-1"):
    p = SweepPoint("tiny", method, prompt, seed, settings, {"num_inference_steps": 4}, "tiny:abc")
    r = {"point": p.to_dict(), "method": method, "settings": settings, "prompt": prompt, "seed": seed,
         "quality": {"psnr": psnr, "ssim": 0.95},
         "report": {"saved_fraction": {"self_qk": saved}, "total_saved_fraction": saved, "estimate_macs": 0,
                    "op_counts": {"self_qk": {"dense_macs": 100, "equiv8_macs": 100 * (1 - saved)}}},
         "wall_s": wall, "dense_wall_s": dense_wall, "host": "h", "run": run}
    if device:
        r["device"] = device
    return r


def sweep_rows():
    """Dense 10 s / 20 s / 8 s on three prompts; taylorseer 5 s / 16 s / 8 s (ratios 0.5, 0.8, 1.0: median
    0.8x); kaleido 15 s / 30 s / 12 s (ratios 1.5 each: 1.5x)."""
    rows = [dense_row("a", 0, 10.0, CPU), dense_row("b", 0, 20.0, CPU), dense_row("c", 0, 8.0, CPU)]
    for p, t in (("a", 5.0), ("b", 16.0), ("c", 8.0)):
        rows.append(method_row("taylorseer", {"cache_interval": 2}, p, 0, t, saved=0.5, device=CPU))
    for p, t in (("a", 15.0), ("b", 30.0), ("c", 12.0)):
        rows.append(method_row("kaleido", {"theta1": 8}, p, 0, t, saved=0.1, device=CPU))
    return rows


def by_method(aggs):
    return {a.method: a for a in aggs}


def test_the_ratio_is_the_median_of_method_time_over_dense_time_for_the_same_prompt_and_seed():
    aggs = by_method(aggregate(sweep_rows()))
    ts, k = aggs["taylorseer"], aggs["kaleido"]
    assert math.isclose(ts.wall_ratio, 0.8) and ts.wall_ratio_runs == 3
    assert math.isclose(k.wall_ratio, 1.5) and k.wall_ratio_runs == 3
    assert ts.wall_device == "cpu: Test CPU 9000, 1 thread"
    d = ts.to_dict()
    assert math.isclose(d["wall_ratio"], 0.8) and d["saving_realised"] == TODAY


def test_a_single_dense_10s_against_a_method_5s_reads_half():
    rows = [dense_row("a", 0, 10.0), method_row("tome", {"ratio": 0.3}, "a", 0, 5.0)]
    (a,) = aggregate(rows)
    assert a.wall_ratio == 0.5 and a.wall_ratio_runs == 1


def test_a_rows_own_dense_time_is_used_when_it_has_one():
    # measured in the same process (run_against_dense without a stored reference): 4 s / 8 s, not 4 s / 10 s
    rows = [dense_row("a", 0, 10.0), method_row("tome", {"ratio": 0.3}, "a", 0, 4.0, dense_wall=8.0)]
    assert aggregate(rows)[0].wall_ratio == 0.5


def test_rows_without_device_info_pair_and_read_unknown_device():
    rows = [dense_row("a", 0, 10.0), dense_row("a", 1, 10.0),
            method_row("tome", {"ratio": 0.3}, "a", 0, 12.0), method_row("tome", {"ratio": 0.3}, "a", 1, 14.0)]
    (a,) = aggregate(rows)
    assert math.isclose(a.wall_ratio, 1.3) and a.wall_ratio_runs == 2
    assert a.wall_device == UNKNOWN_DEVICE == "unknown device"
    assert device_label(rows[2]) == UNKNOWN_DEVICE and device_label({"device": None}) == UNKNOWN_DEVICE


def test_a_pair_measured_on_two_different_devices_is_left_out():
    rows = [dense_row("a", 0, 10.0, GPU), dense_row("b", 0, 10.0, CPU),
            method_row("tome", {"ratio": 0.3}, "a", 0, 5.0, device=CPU),  # dense on the GPU: no ratio
            method_row("tome", {"ratio": 0.3}, "b", 0, 7.0, device=CPU)]
    (a,) = aggregate(rows)
    assert a.wall_ratio == 0.7 and a.wall_ratio_runs == 1
    assert len(wall_ratios(rows)) == 1


def test_rows_of_different_sweep_runs_never_pair():
    # a row re-used from another run (another day, another load on the machine) is not compared with today's dense
    rows = [dense_row("a", 0, 10.0, CPU, run="run-2"), method_row("tome", {"ratio": 0.3}, "a", 0, 5.0, device=CPU),
            dense_row("b", 0, 10.0, CPU, run=None), method_row("tome", {"ratio": 0.3}, "b", 0, 5.0, run=None)]
    assert wall_ratios(rows) == {}
    (a,) = aggregate(rows)
    assert math.isnan(a.wall_ratio) and a.wall_ratio_runs == 0


def test_a_retimed_point_wins_over_its_rows():
    rows = [dense_row("a", 0, 10.0, CPU), method_row("tome", {"ratio": 0.3}, "a", 0, 5.0, device=CPU),
            method_row("tome", {"ratio": 0.3}, "b", 0, 5.0, run=None)]
    retimed = {rows[2]["point"]["key"]: {"method_s": 6.0, "dense_s": 4.0, "device_label": "cpu: X, 1 thread"},
               rows[1]["point"]["key"]: {"method_s": 3.0, "dense_s": 12.0, "device_label": "cpu: X, 1 thread"}}
    w = wall_ratios(rows, retimed)
    assert w == {rows[1]["point"]["key"]: (0.25, "cpu: X, 1 thread"), rows[2]["point"]["key"]: (1.5, "cpu: X, 1 thread")}
    (a,) = aggregate(rows, retimed)
    assert a.wall_ratio == (0.25 + 1.5) / 2 and a.wall_ratio_runs == 2


def test_no_dense_row_gives_no_ratio():
    (a,) = aggregate([method_row("tome", {"ratio": 0.3}, "a", 0, 5.0)])
    assert math.isnan(a.wall_ratio) and a.wall_ratio_runs == 0 and a.wall_device == UNKNOWN_DEVICE


def test_the_device_label_names_the_machine():
    assert device_label({"device": GPU}) == "cuda: NVIDIA H200, 16 threads"
    assert device_label({"device": CPU}) == "cpu: Test CPU 9000, 1 thread"


def test_every_registered_method_is_classified_in_one_place():
    from kaleido.techniques import METHODS

    assert all(saving_realised(m) in (TODAY, NEEDS_ACCELERATOR) for m in set(METHODS) - {"stack"})
    for m in ("kaleido", "adaptiv", "exion", "cambricon_d"):
        assert saving_realised(m) == NEEDS_ACCELERATOR
    for m in ("taylorseer", "magcache", "fbcache", "pab", "sparse_videogen", "block_topk", "tome", "cache_dit"):
        assert saving_realised(m) == TODAY
    assert saving_realised("nobody") == "unclassified"
    stack = {"techniques": [{"technique": "taylorseer"}, {"technique": "kaleido"}]}
    assert saving_realised("stack", stack) == "mixed: taylorseer on today's hardware; kaleido needs the accelerator"
    assert saving_realised("stack", {"techniques": [{"technique": "taylorseer"}, {"technique": "tome"}]}) == TODAY


def test_the_ranking_carries_the_wall_ratio_and_the_simulated_speedup_of_accelerator_methods():
    tables = [{"workload": "wan-1.3b-480p", "designs": [
        {"design": "dense 128x128 int8 array", "method": None, "source": "dense", "speedup_vs_dense": 1.0},
        {"design": "Kaleido (scheduler + matcher)", "method": "kaleido", "source": "measured: kaleido ...",
         "speedup_vs_dense": 1.12},
        {"design": "AdapTiV-class", "method": "adaptiv", "source": "UPPER BOUND: ...", "replayed": False,
         "speedup_vs_dense": 1.3}]}]
    accel = accelerator_speedups(tables)
    assert accel["kaleido"] == [{"workload": "wan-1.3b-480p", "speedup_vs_dense": 1.12, "figure": "measured profile"}]
    assert accel["adaptiv"][0]["figure"] == "upper bound" and None not in accel
    # a Kaleido design simulated from the synthetic example profile is no figure of Kaleido's rows
    synthetic = [{"workload": "w", "designs": [{"method": "kaleido", "source": "SYNTHETIC example profile",
                                                "speedup_vs_dense": 2.0}]}]
    assert accelerator_speedups(synthetic) == {}

    ranking = {r.method: r for r in ranking_at_quality(aggregate(sweep_rows()), 30.0, accel=accel)}
    k, ts = ranking["kaleido"], ranking["taylorseer"]
    assert k.where == "needs the accelerator (simulated: 1.12x wan-1.3b-480p)"
    assert ts.where == TODAY and ts.accel == []
    d = k.to_dict()
    assert math.isclose(d["wall_ratio"], 1.5) and d["wall_ratio_runs"] == 3
    assert d["wall_device"] == "cpu: Test CPU 9000, 1 thread" and d["saving_realised"] == NEEDS_ACCELERATOR
    assert d["accelerator_speedups"][0]["speedup_vs_dense"] == 1.12
    json.dumps(d)  # --json prints it


def test_compare_prints_the_wall_ratio_and_where_the_saving_is_real(tmp_path):
    from kaleido.cli.compare import compare

    rows = sweep_rows() + [dense_row("a", 1, 10.0), method_row("tome", {"ratio": 0.3}, "a", 1, 20.0)]
    for r in rows:
        (tmp_path / f"{r['point']['key']}.json").write_text(json.dumps(r))
    wide = CliRunner(env={"COLUMNS": "300"})  # rich wraps headers to the terminal's width
    res = wide.invoke(compare, ["--plot-only", "--results", str(tmp_path), "--workloads", "none"])
    assert res.exit_code == 0, res.output
    out = res.output
    assert "wall vs dense (runs)" in out and "where the saving is real" in out and "saving real on" in out
    assert "0.80x (3)" in out and "1.50x (3)" in out and "2.00x (1)" in out  # taylorseer, kaleido, tome (old row)
    assert "cpu: Test CPU 9000, 1 thread" in out and "unknown device" in out
    assert "today's hardware" in out and "needs the accelerator" in out

    res = CliRunner().invoke(compare, ["--plot-only", "--results", str(tmp_path), "--workloads", "none", "--json"])
    ranking = {m["method"]: m for m in json.loads(res.output)["ranking"]["methods"]}
    assert ranking["taylorseer"]["wall_ratio"] == 0.8 and ranking["taylorseer"]["saving_realised"] == TODAY


def test_new_rows_record_the_device_outside_the_point():
    import torch

    from kaleido.compare.provenance import device_info

    class Pipe:
        device = torch.device("cpu")

    d = device_info(Pipe())
    assert d["type"] == "cpu" and d["name"] and d["threads"] == torch.get_num_threads() and d["cpus"] >= 1
    assert device_label({"device": d}).startswith("cpu: ")
    # the row key is the point's: it does not change with the device the row was measured on
    assert "device" not in SweepPoint("tiny", "tome", "a", 0).identity()
