"""Faults of a results folder: a truncated row, a full disk, two sweeps on one folder, rows of another plan.

Each is survived with nothing lost (the sweep recomputes exactly what is missing and the rows equal an
uninterrupted run's) or refused in one line that names the file and the fix - never a traceback, never a
half-written row.
"""

import errno
import json
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

import kaleido.atomic
from kaleido.cli.compare import compare
from kaleido.compare.grids import build_points
from kaleido.compare.results_folder import LOCK_NAME, row_done, sweep_lock
from kaleido.compare.sweep import pending, run_sweep
from kaleido.compare.worker import run_point

CALL = {"num_inference_steps": 2, "max_sequence_length": 16}


def points():
    return build_points("random-wan", ["tome"], 1, (0,), CALL, {"tome": [{"ratio": 0.3}, {"ratio": 0.5}]})


def _figures(row: dict) -> tuple:
    return row["quality"]["psnr"], row["report"]["total_saved_fraction"], row["report"]["op_counts"]


def test_a_truncated_row_is_computed_again_and_replaced_whole(tmp_path):
    pts = points()
    for p in pts:
        run_point(p.to_dict(), str(tmp_path))
    victim = tmp_path / f"{pts[1].key}.json"
    whole = json.loads(victim.read_text())
    victim.write_text(victim.read_text()[: len(victim.read_text()) // 2])  # a copy or a disk cut it short
    assert not row_done(victim) and [p.key for p in pending(pts, tmp_path)] == [pts[1].key]
    res = CliRunner().invoke(compare, ["--plot-only", "--results", str(tmp_path), "--workloads", "none"])
    assert res.exit_code == 2 and f"{victim} is not a valid result row" in res.output
    assert "delete it and resume the sweep" in res.output and "Traceback" not in res.output
    run_point(pts[1].to_dict(), str(tmp_path))  # the resumed sweep's task for it
    again = json.loads(victim.read_text())
    assert _figures(again) == _figures(whole)


def test_a_full_disk_leaves_no_half_row_and_one_line_naming_the_file(tmp_path, monkeypatch):
    pts = points()
    run_point(pts[0].to_dict(), str(tmp_path))  # the dense reference fits on the disk
    real_replace = kaleido.atomic.os.replace

    def full_disk(src, dst):
        if str(dst).endswith(".json"):
            raise OSError(errno.ENOSPC, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(kaleido.atomic.os, "replace", full_disk)
    with pytest.raises(OSError) as e:
        run_point(pts[1].to_dict(), str(tmp_path))
    msg = str(e.value)
    assert f"could not write {tmp_path / (pts[1].key + '.json')}" in msg and "No space left on device" in msg
    assert "free space there" in msg and "\n" not in msg
    assert not (tmp_path / f"{pts[1].key}.json").exists() and not list(tmp_path.glob(".*.tmp"))
    monkeypatch.setattr(kaleido.atomic.os, "replace", real_replace)  # space freed: the same point again
    row = run_point(pts[1].to_dict(), str(tmp_path))
    assert row_done(tmp_path / f"{pts[1].key}.json") and row["quality"]["psnr"] > 0


def test_a_second_sweep_on_a_folder_is_refused_while_the_first_runs(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time, pathlib\n"
        "from kaleido.compare.results_folder import sweep_lock\n"
        f"with sweep_lock(pathlib.Path({str(tmp_path)!r})):\n"
        "    print('held', flush=True)\n"
        "    time.sleep(60)\n")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        before = {f.name for f in tmp_path.iterdir()}
        res = CliRunner().invoke(compare, ["--pipeline", "random-wan", "--methods", "tome", "--prompts", "1",
                                           "--steps", "2", "--results", str(tmp_path), "--workloads", "none"])
        assert res.exit_code == 2, res.output
        assert f"another sweep (pid {holder.pid} on " in res.output and f"is writing {tmp_path}" in res.output
        assert "give this one its own results folder" in res.output and "Traceback" not in res.output
        assert {f.name for f in tmp_path.iterdir()} == before  # nothing computed, nothing written
    finally:
        holder.kill()
        holder.wait()
    # the holder died without releasing anything: the lock went with its process
    summary = run_sweep(points(), tmp_path, n_workers=1, progress=False)
    assert summary.computed == 3 and (tmp_path / LOCK_NAME).read_text() == ""


def test_the_lock_is_exclusive_within_one_process_too(tmp_path):
    with sweep_lock(tmp_path):
        with pytest.raises(ValueError, match="another sweep .* is writing"):
            with sweep_lock(tmp_path):
                pass
    t = time.monotonic()
    with sweep_lock(tmp_path):  # released on exit: taken again at once
        assert time.monotonic() - t < 5


@pytest.mark.parametrize("other", [["--steps", "3"], ["--steps", "2", "--sampler", "consistency"],
                                   ["--steps", "2", "--pipeline", "tiny"]],
                         ids=["step count", "sampler", "model"])
def test_a_folder_of_another_plan_is_refused_in_one_line_and_left_as_it_was(tmp_path, other):
    dense = build_points("random-wan", ["tome"], 1, (0,), {"num_inference_steps": 2})[0]
    run_point(dense.to_dict(), str(tmp_path))  # the folder holds a row of random-wan at 2 steps, Euler
    before = {f.name: f.read_bytes() for f in tmp_path.iterdir()}
    args = ["--pipeline", "random-wan", "--methods", "tome", "--prompts", "1", "--results", str(tmp_path),
            "--workloads", "none"]
    res = CliRunner().invoke(compare, args + other)
    assert res.exit_code == 2, res.output
    line = " ".join(res.output.split())  # click wraps the usage error's line
    assert f"{tmp_path} holds rows of another plan ({dense.key}.json: random-wan" in line
    assert "give this sweep its own results folder" in line and "Traceback" not in res.output
    assert {f.name: f.read_bytes() for f in tmp_path.iterdir() if f.name != LOCK_NAME} == \
        {n: b for n, b in before.items() if n != LOCK_NAME}  # nothing computed, nothing overwritten


def test_a_sweep_of_the_folder_s_own_plan_goes_on(tmp_path):
    dense = build_points("random-wan", ["tome"], 1, (0,), {"num_inference_steps": 2})[0]
    run_point(dense.to_dict(), str(tmp_path))
    res = CliRunner().invoke(compare, ["--pipeline", "random-wan", "--methods", "tome", "--prompts", "1", "--steps",
                                       "2", "--results", str(tmp_path), "--workloads", "none", "--json"])
    assert res.exit_code == 0, res.output
    assert "1 already done" in res.output and len(list(tmp_path.glob("*.json"))) > 1


def test_one_sweep_mixing_plans_is_refused_before_it_computes(tmp_path):
    mixed = points() + build_points("random-wan", ["tome"], 1, (0,), {**CALL, "num_inference_steps": 3},
                                    {"tome": [{"ratio": 0.3}]})
    with pytest.raises(ValueError, match="this sweep mixes 2 plans"):
        run_sweep(mixed, tmp_path, n_workers=1, progress=False)
    assert not list(tmp_path.glob("*.json"))
