"""Re-timing the ranking's settings back to back with dense in one process (kaleido.compare.retime)."""

import json

import pytest

from kaleido.compare.analysis import RETIMED_FILE, aggregate, load_retimed, load_rows
from kaleido.compare.grids import build_points
from kaleido.compare.retime import retime
from kaleido.compare.worker import run_point

CALL = {"num_inference_steps": 2, "max_sequence_length": 16}


@pytest.fixture
def folder(tmp_path):
    grid = {"tome": [{"ratio": 0.3}]}
    for p in build_points("random-wan", ["tome"], 2, (0,), CALL, grid):
        run_point(p.to_dict(), str(tmp_path))  # no run id: rows a ratio must not be guessed for
    return tmp_path


def test_retime_times_the_ranked_setting_against_dense_and_the_analysis_uses_it(folder):
    rows = load_rows(folder)
    (before,) = aggregate(rows)
    assert before.wall_ratio_runs == 0  # no same-run dense time in rows without a run id
    lines = []
    out = retime(folder, runs=1, min_psnr=0.0, log=lines.append)
    (entry,) = out["points"].values()
    assert entry["method_s"] > 0 and entry["dense_s"] > 0 and entry["method"] == "tome" and len(lines) == 1
    assert entry["reproduced"] and entry["psnr_now"] == pytest.approx(entry["psnr_row"], abs=0.1)
    assert (folder / RETIMED_FILE).is_file() and load_retimed(folder) == out["points"]
    assert (folder / RETIMED_FILE).stat().st_mode & 0o777 == 0o644
    (after,) = aggregate(load_rows(folder), load_retimed(folder))
    assert after.wall_ratio_runs == 1 and after.wall_ratio == pytest.approx(entry["method_s"] / entry["dense_s"])
    assert len(load_rows(folder)) == len(rows)  # the timing file is not read as a row


def test_retime_flags_rows_that_this_code_does_not_reproduce(folder):
    for f in folder.glob("*.json"):
        row = json.loads(f.read_text())
        if row["point"]["method"] == "tome":
            row["quality"]["psnr"] = 12.345  # not what the generation gives
            f.write_text(json.dumps(row))
    lines = []
    out = retime(folder, runs=1, min_psnr=0.0, log=lines.append)
    (entry,) = out["points"].values()
    assert entry["reproduced"] is False and entry["psnr_row"] == 12.345 and entry["psnr_now"] != 12.345
    assert any(line.startswith("note: ") and "12.345 dB in its row" in line for line in lines)
