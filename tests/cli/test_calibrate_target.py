"""`kaleido calibrate --target-psnr / --target-savings` on a tiny random Wan pipeline; bad input."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from kaleido.cli.main import cli

FAST = ["--steps", "2", "--frames", "5", "--height", "32", "--width", "32"]
PROMPTS = ["a red circle", "a blue square", "a green triangle", "a yellow circle"]


@pytest.fixture(scope="module")
def pipe_dir(tmp_path_factory):
    from kaleido.models.testing import tiny_random_wan_pipeline

    d = tmp_path_factory.mktemp("pipe") / "tiny-random-wan"
    tiny_random_wan_pipeline().save_pretrained(str(d), safe_serialization=True)
    return d


@pytest.fixture
def prompts(tmp_path):
    p = tmp_path / "prompts.txt"
    p.write_text("\n".join(PROMPTS) + "\n")
    return p


def test_psnr_target_writes_a_loadable_config_that_meets_it(tmp_path, pipe_dir, prompts):
    import kaleido
    from kaleido.techniques.kaleido_reuse import KaleidoConfig
    from kaleido.models.testing import tiny_random_wan_pipeline

    out = tmp_path / "cal" / "calibrated.yaml"
    r = CliRunner().invoke(cli, ["calibrate", "--model", str(pipe_dir), "--target-psnr", "25", "--prompts",
                                 str(prompts), "--seeds", "0", "--budget", "4", "--margin", "1", "--out", str(out), *FAST])
    assert r.exit_code == 0, r.output
    cfg = KaleidoConfig.load(out)
    rep = json.loads((out.parent / "calibration_target.json").read_text())
    assert rep["calibration_prompts"] == PROMPTS[:2] and rep["heldout_prompts"] == PROMPTS[2:]
    assert rep["met_on_calibration"] and rep["chosen"]["feasible"]
    psnr = rep["chosen"]["psnr_mean_db"]
    assert psnr == "inf" or psnr >= 26  # the search aimed at target + margin
    assert rep["target"]["value"] == 26 and rep["heldout_target"]["value"] == 25 and rep["margin"] == 1
    assert 1 <= len(rep["search_trace"]) <= 4 and rep["search_trace"][0]["stage"] == "default"
    assert set(rep["heldout"]) >= {"calibrated", "default"}
    assert isinstance(rep["heldout_target_met"], bool) and rep["heldout_shortfall"] >= 0
    assert rep["heldout"]["calibrated"]["runs"] == 2
    assert ("met" in r.output) or ("MISSED by" in r.output)
    assert KaleidoConfig.from_dict(rep["chosen"]["config"]) == cfg
    kaleido.apply(tiny_random_wan_pipeline().transformer, str(out))  # kaleido.apply accepts the file
    # the candidates ran as `kaleido compare` rows: the same command again computes none of them
    ev = rep["evaluation"]
    assert ev["path"] == "dask" and ev["points_computed"] > 0
    assert any((out.parent / "calibration_runs").glob("*.json"))
    again = CliRunner().invoke(cli, ["calibrate", "--model", str(pipe_dir), "--target-psnr", "25", "--prompts",
                                     str(prompts), "--seeds", "0", "--budget", "4", "--margin", "1", "--out", str(out),
                                     *FAST])
    assert again.exit_code == 0, again.output
    rep2 = json.loads((out.parent / "calibration_target.json").read_text())
    assert rep2["evaluation"]["points_computed"] == 0
    assert rep2["chosen"]["config"] == rep["chosen"]["config"] and rep2["heldout"] == rep["heldout"]


def test_savings_target_with_a_heldout_file(tmp_path, pipe_dir):
    prompts = tmp_path / "calib.txt"
    prompts.write_text("a red circle\n")
    held = tmp_path / "held.json"
    held.write_text(json.dumps(["a purple square"]))
    out = tmp_path / "cal.json"
    r = CliRunner().invoke(cli, ["calibrate", "--model", str(pipe_dir), "--target-savings", "0.001", "--prompts",
                                 str(prompts), "--heldout", str(held), "--budget", "2", "--out", str(out),
                                 "--report", str(tmp_path / "rep.json"), "--workers", "0", *FAST])
    assert r.exit_code == 0, r.output
    rep = json.loads((tmp_path / "rep.json").read_text())
    assert "evaluation" not in rep  # --workers 0: the candidates ran in this process
    assert rep["calibration_prompts"] == ["a red circle"] and rep["heldout_prompts"] == ["a purple square"]
    assert rep["target"] == {"kind": "savings", "value": 0.001, "savings_of": "self_qk", "text": rep["target"]["text"]}
    assert rep["met_on_calibration"] and rep["chosen"]["saved_fraction"]["self_qk"] >= 0.001


@pytest.mark.parametrize("args, match", [
    (["--target-psnr", "200"], "impossible"),
    (["--target-savings", "1.5"], "(0, 1)"),
    (["--target-savings", "0"], "(0, 1)"),
    (["--target-psnr", "30", "--target-savings", "0.5"], "not both"),
    (["--target-psnr", "30", "--prompts", "2"], "not a count"),
    (["--target-psnr", "30", "--prompts", "{missing}"], "does not exist"),
    (["--target-psnr", "30", "--prompts", "{one}"], "at least 2"),
    (["--target-psnr", "30", "--prompts", "{one}", "--heldout", "{one}"], "disjoint"),
    (["--heldout", "{one}"], "belong to --target-psnr"),
    (["--margin", "1"], "belong to --target-psnr"),
    (["--target-savings", "0.9", "--margin", "0.2"], "target + margin"),
])
def test_bad_input_is_a_clear_usage_error(tmp_path, args, match):
    one = tmp_path / "one.txt"
    one.write_text("a red circle\n")
    args = [a.format(one=one, missing=tmp_path / "nope.txt") for a in args]
    r = CliRunner().invoke(cli, ["calibrate", "--model", "tiny", "--out", str(tmp_path / "c.yaml"), *args])
    assert r.exit_code == 2, r.output
    assert match in r.output


def test_a_target_without_prompts_is_refused(tmp_path):
    r = CliRunner().invoke(cli, ["calibrate", "--model", "tiny", "--target-psnr", "30", "--out", str(tmp_path / "c.yaml")])
    assert r.exit_code == 2 and "needs calibration prompts" in r.output


def test_an_interrupted_calibration_resumes_to_the_uninterrupted_result(tmp_path, pipe_dir, prompts):
    """`kaleido calibrate` killed (SIGKILL, its Dask workers with it) once some candidate rows exist: the same
    command again computes only the missing points and writes the config and held-out figures of a run that
    was never interrupted."""
    import os
    import shutil
    import signal
    import subprocess
    import sys
    import time

    args = ["calibrate", "--model", str(pipe_dir), "--target-psnr", "25", "--prompts", str(prompts), "--seeds", "0",
            "--budget", "4", *FAST]
    whole = tmp_path / "whole" / "c.yaml"
    r = CliRunner().invoke(cli, [*args, "--out", str(whole)])
    assert r.exit_code == 0, r.output
    ref = json.loads((whole.parent / "calibration_target.json").read_text())

    cut = tmp_path / "cut" / "c.yaml"
    runs = cut.parent / "calibration_runs"
    kaleido = shutil.which("kaleido") or sys.exit("the kaleido command is not installed")
    proc = subprocess.Popen([kaleido, *args, "--out", str(cut)], start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=dict(os.environ, OMP_WAIT_POLICY="PASSIVE"))
    try:
        deadline = time.monotonic() + 300
        while len([f for f in runs.glob("*.json") if not f.name.startswith("dense")]) < 4 and proc.poll() is None:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    kept = {f.name: f.read_bytes() for f in runs.glob("*.json")}
    assert kept and not cut.exists()  # interrupted mid-search: no config yet
    total = len(list((whole.parent / "calibration_runs").glob("*.json")))
    assert len(kept) < total

    r = CliRunner().invoke(cli, [*args, "--out", str(cut)])
    assert r.exit_code == 0, r.output
    rep = json.loads((cut.parent / "calibration_target.json").read_text())
    assert rep["chosen"]["config"] == ref["chosen"]["config"] and rep["heldout"] == ref["heldout"]
    assert cut.read_text() == whole.read_text()
    assert all((runs / n).read_bytes() == b for n, b in kept.items())  # nothing kept was recomputed
    assert len(list(runs.glob("*.json"))) == total and not list(runs.glob(".*.tmp"))
    assert rep["evaluation"]["points_computed"] == total - len(kept)
