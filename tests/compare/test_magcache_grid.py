"""MagCache in the sweep: its points carry the pipeline's calibrated ratios and the run's step count."""

import importlib.util
from pathlib import Path

import pytest

from kaleido.compare.grids import MAG_RATIOS, build_points, method_grid
from kaleido.compare.points import settings_label
from kaleido.compare.worker import run_point

ROOT = Path(__file__).resolve().parents[2]


def test_magcache_points_follow_the_runs_step_count():
    default = method_grid("random-wan")["magcache"]
    assert {p["num_inference_steps"] for p in default} == {4}  # RANDOM_WAN_SETTINGS' steps
    assert all(p["mag_ratios"] == list(MAG_RATIOS["random-wan"]) for p in default)
    pts = [p for p in build_points("random-wan", ["magcache"], 1, (0,), {"num_inference_steps": 2}) if p.method != "dense"]
    assert len(pts) == 2 and {p.settings["num_inference_steps"] for p in pts} == {2}
    tiny = method_grid("tiny")["magcache"][0]  # 25 steps, 25 ratios: a label names their count
    assert tiny["num_inference_steps"] == 25 and "mag_ratios=<25 values>" in settings_label("magcache", tiny)
    assert "magcache" not in method_grid("some/other-wan-folder")  # no calibrated ratios: no points
    with pytest.raises(ValueError, match=r"no settings grid for method\(s\) \['magcache'\]"):
        build_points("some/other-wan-folder", ["magcache"], 1, (0,), {}, grid=method_grid("some/other-wan-folder"))


def test_the_random_pipelines_ratios_are_what_calibration_measures():
    spec = importlib.util.spec_from_file_location("calibrate_magcache", ROOT / "benchmarks" / "calibrate_magcache.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    measured = mod.calibrate("random-wan")
    assert measured["cond"] == pytest.approx(MAG_RATIOS["random-wan"], abs=1e-5)


def test_a_magcache_point_runs_in_the_sweep(tmp_path):
    call = {"num_inference_steps": 4, "max_sequence_length": 16}
    (pt,) = [p for p in build_points("random-wan", ["magcache"], 1, (0,), call) if p.method != "dense"][:1]
    row = run_point(pt.to_dict(), str(tmp_path))
    assert "error" not in row, row.get("error")
    assert row["report"]["total_saved_fraction"] > 0
    assert row["report"]["extra"]["served_steps"]["cond"]
