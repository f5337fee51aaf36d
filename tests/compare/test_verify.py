"""``kaleido compare --verify``: stored rows re-run with today's code, drift judged against a tolerance.

The folder is a real small sweep (random-wan, 2 steps). Its rows reproduce exactly when re-run on the same
machine; a row edited by hand (PSNR up 0.5 dB, saving up 1 percentage point) is what another machine's
drift looks like, and must be flagged - while the stored rows stay byte for byte as they were.
"""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kaleido.cli.compare import compare
from kaleido.compare.grids import build_points
from kaleido.compare.points import SweepPoint
from kaleido.compare.provenance import NUMERIC_FIELDS, environment, environment_difference
from kaleido.compare.verify import choose_pairs, verify_rows
from kaleido.compare.worker import run_point

CALL = {"num_inference_steps": 2, "max_sequence_length": 16}


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("rows")
    grid = {"tome": [{"ratio": 0.3}], "block_topk": [{"density": 0.5, "block_size": 8}]}
    for p in build_points("random-wan", ["tome", "block_topk"], 1, (0, 1), CALL, grid):
        run_point(p.to_dict(), str(d))
    return d


def _snapshot(d: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted(d.iterdir()) if f.is_file()}


def _copy(src: Path, dst: Path) -> Path:
    dst.mkdir()
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    return dst


def _method_rows(d: Path, method: str) -> list[Path]:
    return [f for f in sorted(d.glob("*.json")) if json.loads(f.read_text())["point"]["method"] == method]


def test_rows_record_what_their_figures_depend_on(folder):
    row = json.loads(_method_rows(folder, "tome")[0].read_text())
    env = row["env"]
    assert set(NUMERIC_FIELDS) <= set(env) and env["code"].startswith("kaleido ")
    assert env["threads"] == 1 and env["sampler"] == "euler" and env["cpu_capability"]
    # outside the point: the key does not move with the machine
    assert SweepPoint.from_dict(row["point"]).key == row["point"]["key"]


def test_environment_difference_names_what_moved():
    now = {"torch": "2.13.0", "numpy": "2.1", "cpu_capability": "AVX2", "threads": 1, "sampler": "euler", "code": "b"}
    assert environment_difference(None, now) == "not recorded"
    assert environment_difference(dict(now, code="a"), now) == "same"  # the code version names a run, not a figure
    assert environment_difference(dict(now, cpu_capability="AVX512"), now) == "cpu_capability AVX512 -> AVX2"
    assert set(environment(None)) >= set(NUMERIC_FIELDS)


def test_pairs_are_shared_by_every_setting():
    rows = lambda pairs: [{"point": {"prompt": p, "seed": s}} for p, s in pairs]  # noqa: E731
    groups = {"a": rows([("x", 0), ("x", 1), ("y", 0)]), "b": rows([("x", 1), ("y", 0)]), "c": rows([("y", 0)])}
    assert choose_pairs(groups, 2) == [("y", 0), ("x", 1)]  # in every setting first, then in most of them


def test_a_folder_reproduced_here_has_no_drift_and_is_left_untouched(folder):
    before = _snapshot(folder)
    rep = verify_rows(folder, 2, n_workers=0)
    assert _snapshot(folder) == before
    assert {d.method for d in rep.settings} == {"tome", "block_topk"} and rep.flagged == []
    assert all(d.checked == 2 and d.psnr_drift_db < 1e-6 and d.saved_drift < 1e-9 for d in rep.settings)
    assert all(d.environment == "same" for d in rep.settings)
    assert len(rep.dense) == 2 and all(dd.max_abs_diff is not None and dd.max_abs_diff < 1e-6 for dd in rep.dense)


def test_drift_beyond_tolerance_is_flagged_and_exits_1(folder, tmp_path):
    d = _copy(folder, tmp_path / "drifted")
    f = _method_rows(d, "tome")[1]
    row = json.loads(f.read_text())
    row["quality"]["psnr"] += 0.5  # as another machine's rounding would move it
    f.write_text(json.dumps(row))
    g = _method_rows(d, "block_topk")[0]
    row = json.loads(g.read_text())
    row["report"]["total_saved_fraction"] += 0.01
    g.write_text(json.dumps(row))
    before = _snapshot(d)
    res = CliRunner().invoke(compare, ["--results", str(d), "--verify", "2", "--workers", "0"])
    assert res.exit_code == 1, res.output
    assert "drift: tome ratio=0.3: PSNR drift 0.500 dB > 0.1 dB" in res.output
    assert "drift: block_topk block_size=8 density=0.5: saving drift 1.00 pp > 0.50 pp" in res.output
    assert "2 settings, 2 beyond tolerance" in res.output and "Traceback" not in res.output
    assert _snapshot(d) == before  # nothing stored is rewritten
    # a looser tolerance accepts the same folder
    res = CliRunner().invoke(compare, ["--results", str(d), "--verify", "2", "--workers", "0", "--tolerance-db", "0.6",
                                       "--tolerance-saved", "1.5", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["flagged"] == 0


def test_a_folder_mixing_step_counts_or_other_weights_is_refused_in_one_line(folder, tmp_path):
    d = _copy(folder, tmp_path / "mixed")
    run_point(SweepPoint("random-wan", "tome", "a red ball", 0, {"ratio": 0.3},
                         {"num_inference_steps": 3, "max_sequence_length": 16}).to_dict(), str(d))
    res = CliRunner().invoke(compare, ["--results", str(d), "--verify", "1", "--workers", "0"])
    assert res.exit_code == 2 and "mixes rows of 2 models / step counts / samplers" in res.output
    assert "Traceback" not in res.output

    d = _copy(folder, tmp_path / "other-weights")
    for f in d.glob("*.json"):
        row = json.loads(f.read_text())
        row["point"]["model_id"] = "random-wan:0000"
        f.write_text(json.dumps(row))
    res = CliRunner().invoke(compare, ["--results", str(d), "--verify", "1", "--workers", "0"])
    assert res.exit_code == 2 and "were computed with random-wan:0000" in res.output and "new folder" in res.output
    res = CliRunner().invoke(compare, ["--results", str(d), "--verify", "0"])
    assert res.exit_code == 2 and "--verify 0" in res.output
