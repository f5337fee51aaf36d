"""MagCache in the sweep: its points carry the ratios calibrated for the pipeline at the run's step count."""

import importlib.util
import json
from pathlib import Path

import pytest

from kaleido.techniques.step_cache import calibrated_mag_ratios, write_mag_ratios
from kaleido.compare.grids import build_points, method_grid
from kaleido.compare.points import settings_label
from kaleido.compare.worker import run_point

ROOT = Path(__file__).resolve().parents[2]


def _calibration_script():
    spec = importlib.util.spec_from_file_location("calibrate_magcache", ROOT / "benchmarks" / "calibrate_magcache.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_magcache_points_carry_the_ratios_of_the_runs_step_count():
    default = method_grid("random-wan")["magcache"]
    assert {p["num_inference_steps"] for p in default} == {4}  # RANDOM_WAN_SETTINGS' steps
    assert all(p["mag_ratios"] == list(calibrated_mag_ratios("random-wan", 4)) for p in default)
    tiny = method_grid("tiny")["magcache"][0]  # 25 steps, 25 ratios: a label names their count
    assert tiny["num_inference_steps"] == 25 and "mag_ratios=<25 values>" in settings_label("magcache", tiny)
    assert tiny["mag_ratios"] == list(calibrated_mag_ratios("tiny", 25)) and calibrated_mag_ratios("tiny", 24) is None


@pytest.mark.parametrize("pipeline, call", [("random-wan", {"num_inference_steps": 2}), ("tiny", {"num_inference_steps": 10}),
                                            ("some/other-wan-folder", {})])
def test_magcache_without_calibrated_ratios_is_refused_when_asked_and_left_out_otherwise(pipeline, call):
    with pytest.raises(ValueError, match=r"magcache: no magnitude ratios calibrated for pipeline .* measure them with "
                                         r"`python benchmarks/calibrate_magcache.py --model |magcache: the number of "
                                         r"steps .*\(kaleido compare --steps N\)") as e:
        build_points(pipeline, ["magcache"], 1, (0,), call)
    assert "\n" not in str(e.value)
    notes: list[str] = []
    grid = method_grid(pipeline, call.get("num_inference_steps"), notes=notes)
    assert "magcache" not in grid and "tome" in grid
    (note,) = [n for n in notes if n.startswith("magcache")]
    assert "\n" not in note and note.endswith("magcache is left out of this sweep")
    # its stacks go with it; TaylorSeer's stay
    stacked = {t["techniques"][0]["technique"] for t in grid["stack"]}
    assert "taylorseer" in stacked and "magcache" not in stacked
    with pytest.raises(ValueError, match=r"no settings grid for method\(s\) \['magcache'\]"):  # a grid given
        build_points(pipeline, ["magcache"], 1, (0,), call, grid=grid)


def test_calibration_measures_at_any_step_count_and_writes_the_file(tmp_path):
    mod = _calibration_script()
    measured = mod.calibrate("random-wan")  # the shipped ratios are what calibration measures
    assert measured["cond"] == pytest.approx(calibrated_mag_ratios("random-wan", 4), abs=1e-5)
    two = mod.calibrate("random-wan", steps=2)["cond"]
    assert len(two) == 2
    f = tmp_path / "ratios.json"
    f.write_text((ROOT / "src" / "kaleido" / "assets" / "magcache_ratios.json").read_text())
    write_mag_ratios("random-wan", 2, two, f)
    doc = json.loads(f.read_text())
    assert doc["ratios"]["random-wan"]["2"] == [round(r, 5) for r in two]
    assert doc["ratios"]["random-wan"]["4"] == list(calibrated_mag_ratios("random-wan", 4))  # others kept


def test_a_magcache_point_runs_in_the_sweep(tmp_path):
    call = {"num_inference_steps": 4, "max_sequence_length": 16}
    (pt,) = [p for p in build_points("random-wan", ["magcache"], 1, (0,), call) if p.method != "dense"][:1]
    row = run_point(pt.to_dict(), str(tmp_path))
    assert "error" not in row, row.get("error")
    assert row["report"]["total_saved_fraction"] > 0
    assert row["report"]["extra"]["served_steps"]["cond"]


def test_kaleido_compare_says_in_one_line_that_magcache_is_left_out(tmp_path, monkeypatch):
    from click.testing import CliRunner

    import kaleido.compare.sweep as sweep
    from kaleido.cli.compare import compare

    planned = []

    def plan_only(points, results, **kw):
        planned.extend(points)
        return sweep.SweepSummary(len(points), len(points), 0)

    monkeypatch.setattr(sweep, "run_sweep", plan_only)
    r = CliRunner().invoke(compare, ["--pipeline", "random-wan", "--steps", "2", "--prompts", "1",
                                     "--results", str(tmp_path / "rows"), "--workloads", "none"])
    lines = [line for line in r.output.splitlines() if line.startswith("magcache:")]
    assert len(lines) == 1 and "calibrate_magcache.py --model random-wan --steps 2" in lines[0], r.output
    assert {p.method for p in planned} >= {"dense", "kaleido", "tome", "stack"} and "magcache" not in {p.method for p in planned}


def test_ratios_and_rows_are_kept_apart_by_sampler(tmp_path):
    """Ratios under another sampler are their own entry; a sweep's rows are keyed by the sampler, and the model's
    own sampler adds nothing to the key (rows computed before samplers were a setting keep theirs)."""
    mod = _calibration_script()
    euler = mod.calibrate("random-wan")["cond"]
    renoised = mod.calibrate("random-wan", sampler="consistency")["cond"]
    assert len(renoised) == 4 and renoised != pytest.approx(euler, abs=1e-4)  # fresh noise moves the residuals
    f = tmp_path / "ratios.json"
    f.write_text((ROOT / "src" / "kaleido" / "assets" / "magcache_ratios.json").read_text())
    write_mag_ratios("random-wan", 4, renoised, f, sampler="consistency")
    doc = json.loads(f.read_text())
    assert doc["ratios"]["random-wan"]["4-consistency"] == [round(r, 5) for r in renoised]
    assert doc["ratios"]["random-wan"]["4"] == list(calibrated_mag_ratios("random-wan", 4))
    # the shipped file: the Euler student's ratios under the consistency sampler are not its Euler ones
    assert calibrated_mag_ratios("tiny-turbo", 4, "consistency") != calibrated_mag_ratios("tiny-turbo", 4)
    grid = method_grid("tiny-turbo", 4, ["magcache"], sampler="consistency")["magcache"]
    assert grid[0]["mag_ratios"] == list(calibrated_mag_ratios("tiny-turbo", 4, "consistency"))
    with pytest.raises(ValueError, match=r"with the consistency sampler .*--sampler consistency --write"):
        method_grid("tiny", 8, ["magcache"], sampler="consistency")
    own = build_points("random-wan", ["tome"], 1, (0,), {"num_inference_steps": 4})
    other = build_points("random-wan", ["tome"], 1, (0,), {"num_inference_steps": 4, "sampler": "consistency"})
    assert all("sampler" not in p.call for p in own) and all(p.call["sampler"] == "consistency" for p in other)
    assert not {p.key for p in own} & {p.key for p in other}
