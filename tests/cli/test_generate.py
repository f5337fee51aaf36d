"""`kaleido generate` / `kaleido sweep` on a tiny random Wan pipeline saved to a folder (offline)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from kaleido.cli.main import cli

FAST = ["--steps", "2", "--frames", "5", "--height", "32", "--width", "32"]


@pytest.fixture(scope="module")
def pipe_dir(tmp_path_factory):
    from kaleido.models.testing import tiny_random_wan_pipeline

    d = tmp_path_factory.mktemp("pipe") / "tiny-random-wan"
    tiny_random_wan_pipeline().save_pretrained(str(d), safe_serialization=True)
    return d


def test_generate_writes_videos_metrics_and_trace(tmp_path, pipe_dir):
    from kaleido.techniques.kaleido_reuse import KaleidoConfig
    from kaleido.trace import ReuseTrace
    from kaleido.video_io import read_video

    cfg = tmp_path / "cfg.yaml"
    KaleidoConfig.from_dict({"reuse": {"theta1": 2, "theta2": 8, "dense_steps": 1}}).save(cfg)
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, ["generate", "--model", str(pipe_dir), "--prompt", "a red circle", "--seed", "3",
                                   "--config", str(cfg), "--out", str(out), *FAST])
    assert res.exit_code == 0, res.output
    for name in ("dense", "kaleido", "side_by_side"):
        assert (out / f"{name}.mp4").stat().st_size > 0 and (out / f"{name}.gif").stat().st_size > 0
    v = read_video(out / "side_by_side.mp4")
    assert v.shape[0] == 5 and v.shape[2] == 3 * 32 + 2 * 2  # [dense | kaleido | diff]
    m = json.loads((out / "metrics.json").read_text())
    run = m["runs"][0]
    assert len(run["psnr_db"]) == len(run["ssim"]) == 5
    assert run["lpips"]["status"] in ("skipped", "computed")
    if run["lpips"]["status"] == "skipped":
        assert run["lpips"]["reason"]
    reuse = run["reuse"]
    assert {"self_qk", "cross_qk", "proj_q", "ffn_in", "ffn_out", "dense"} <= set(reuse["per_op"])
    for d in reuse["per_op"].values():
        assert abs(sum(d["mac_fractions"].values()) - 1) < 1e-9
    assert reuse["whole_transformer"]["dense_macs"] > reuse["reusable_ops"]["dense_macs"]
    assert set(run["wall_s"]) == {"dense_pipeline", "kaleido_pipeline", "dense_transformer", "kaleido_transformer"}
    assert m["aggregate"]["wall_ratio_pipeline"] > 0
    trace = ReuseTrace.load(out / "trace.safetensors", expected_model_class="WanTransformer3DModel")
    assert trace.steps == [0, 1]
    assert KaleidoConfig.load(out / "config.yaml") == KaleidoConfig.load(cfg)


def test_generate_zero_thresholds_give_the_dense_video(tmp_path, pipe_dir):
    from kaleido.techniques.kaleido_reuse import KaleidoConfig

    cfg = tmp_path / "dense.json"
    KaleidoConfig.dense().save(cfg)
    res = CliRunner().invoke(cli, ["generate", "--model", str(pipe_dir), "--config", str(cfg), "--out",
                                   str(tmp_path / "o"), "--prompt", "a", "--prompt", "b", *FAST])
    assert res.exit_code == 0, res.output
    m = json.loads((tmp_path / "o" / "metrics.json").read_text())
    assert len(m["runs"]) == 2 and (tmp_path / "o" / "run-1" / "kaleido.gif").exists()
    assert m["aggregate"]["max_abs_diff"] < 1e-5


def test_generate_bad_input(tmp_path, pipe_dir):
    r = CliRunner().invoke(cli, ["generate", "--model", str(tmp_path), "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "model_index.json" in r.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("reuse: {theta1: 9, theta2: 1}\n")
    r = CliRunner().invoke(cli, ["generate", "--model", str(pipe_dir), "--config", str(bad), "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "theta1" in r.output


def test_sweep_writes_csv_and_plot(tmp_path, pipe_dir):
    out = tmp_path / "sweep"
    r = CliRunner().invoke(cli, ["sweep", "--model", str(pipe_dir), "--points", "0:0,4:8",
                                 "--prompts", "1", "--seeds", "1", "--out", str(out), *FAST])
    assert r.exit_code == 0, r.output
    rows = json.loads((out / "sweep.json").read_text())
    assert [(x["theta1"], x["theta2"]) for x in rows] == [(0, 0), (4, 8)]
    assert rows[0]["max_abs_diff"] < 1e-5 and rows[0]["saved_whole_transformer"] == 0
    assert rows[1]["saved_self_qk"] >= rows[0]["saved_self_qk"]
    assert (out / "sweep.png").stat().st_size > 0 and "saved_self_qk" in (out / "sweep.csv").read_text()
    r = CliRunner().invoke(cli, ["sweep", "--model", str(pipe_dir), "--points", "1-2", "--out", str(out)])
    assert r.exit_code == 2 and "THETA1:THETA2" in r.output


def test_sweep_on_the_comparisons_workers_measures_what_the_process_measures(tmp_path, pipe_dir):
    """--workers 1: every (point, prompt, seed) a comparison row in --results-dir, the same figures as in process;
    a rerun computes nothing; a GPU option with workers, and a rows folder without them, are refused in one line."""
    args = ["sweep", "--model", str(pipe_dir), "--points", "4:8", "--prompts", "1", "--seeds", "1", *FAST]
    local = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "local")])
    assert local.exit_code == 0, local.output
    rows_dir = tmp_path / "rows"
    for _ in range(2):
        r = CliRunner().invoke(cli, [*args, "--workers", "1", "--results-dir", str(rows_dir), "--out",
                                     str(tmp_path / "dask")])
        assert r.exit_code == 0, r.output
    kept = sorted(p.name for p in rows_dir.glob("*.json"))
    assert len(kept) == 2  # the dense reference and the point's one run, computed once
    (a,), (b,) = (json.loads((tmp_path / d / "sweep.json").read_text()) for d in ("local", "dask"))
    assert b["psnr_mean_db"] == pytest.approx(min(a["psnr_mean_db"], 100.0), abs=1e-9)  # rows cap PSNR at 100 dB
    for k in ("saved_self_qk", "ssim_mean", "max_abs_diff"):
        assert b[k] == pytest.approx(a[k], abs=1e-9), k
    r = CliRunner().invoke(cli, [*args, "--workers", "1", "--dtype", "bf16", "--out", str(tmp_path / "x")])
    assert r.exit_code == 2 and "add --workers 0" in r.output
    r = CliRunner().invoke(cli, [*args, "--results-dir", str(rows_dir), "--out", str(tmp_path / "y")])
    assert r.exit_code == 2 and "add --workers N" in r.output  # rows are only kept by workers: not ignored silently


def test_calibrate_writes_a_config_with_axes(tmp_path, pipe_dir):
    from kaleido.techniques.kaleido_reuse import KaleidoConfig

    out = tmp_path / "cal.yaml"
    r = CliRunner().invoke(cli, ["calibrate", "--model", str(pipe_dir), "--prompts", "1", "--out", str(out), *FAST])
    assert r.exit_code == 0, r.output
    cfg = KaleidoConfig.load(out)
    assert all(cfg.op_config("proj", layer).axes is not None for layer in (0, 1))
    table = json.loads((tmp_path / "calibration.json").read_text())["saved_fraction"]
    assert set(table["proj"]["0"]) == {"t", "h", "w"}


def _tiny_shipped() -> bool:
    from kaleido.tiny.pipeline import tiny_pipeline_path

    return (tiny_pipeline_path() / "model_index.json").exists()


@pytest.mark.skipif(not _tiny_shipped(), reason="the shipped tiny pipeline is not in src/kaleido/assets/tiny-wan yet")
def test_generate_on_the_shipped_tiny_pipeline(tmp_path):
    r = CliRunner().invoke(cli, ["generate", "--model", "tiny", "--steps", "2", "--out", str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    m = json.loads((tmp_path / "o" / "metrics.json").read_text())
    assert m["transformer_class"] == "WanTransformer3DModel"
    assert m["runs"][0]["reuse"]["per_op"]["self_qk"]["dense_macs"] > 0


def test_generate_on_the_distilled_student_uses_its_defaults_and_config(tmp_path):
    """``--model tiny-turbo`` offline: 4 steps, one transformer call per step, its calibrated config."""
    from kaleido.techniques.kaleido_reuse.config import KaleidoConfig

    r = CliRunner().invoke(cli, ["generate", "--model", "tiny-turbo", "--out", str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    assert "distilled for" not in r.output  # its own defaults: no warning
    m = json.loads((tmp_path / "o" / "metrics.json").read_text())
    assert m["settings"]["num_inference_steps"] == 4 and m["settings"]["guidance_scale"] == 1.0
    per_op = m["runs"][0]["reuse"]["per_op"]["self_qk"]
    # 4 calls x 4 layers x batch 1 of (2 heads x 1280 x 1280 x 64): one call per step, no unconditional half
    assert per_op["dense_macs"] == 4 * 4 * 2 * 1280 * 1280 * 64
    used = KaleidoConfig.load(str(tmp_path / "o" / "config.yaml"))
    assert used.to_dict() == KaleidoConfig.load("tiny-turbo-default").to_dict()
    off = CliRunner().invoke(cli, ["generate", "--model", "tiny-turbo", "--steps", "2", "--out", str(tmp_path / "p")])
    assert off.exit_code == 0, off.output
    assert sum("distilled for 4 steps" in line for line in off.output.splitlines()) == 1


def test_generate_on_the_consistency_student_is_one_video_per_seed(tmp_path):
    """``--model tiny-rcm`` offline with its defaults: the same seed twice gives bit-identical videos."""
    from kaleido.video_io import read_video

    runs = []
    for name in ("a", "b"):
        r = CliRunner().invoke(cli, ["generate", "--model", "tiny-rcm", "--out", str(tmp_path / name)])
        assert r.exit_code == 0, r.output
        assert "distilled for" not in r.output  # its own sampler and steps: no warning
        runs.append(read_video(tmp_path / name / "dense.mp4"))
    m = json.loads((tmp_path / "a" / "metrics.json").read_text())
    assert m["settings"]["num_inference_steps"] == 4 and m["settings"]["sampler"] is None  # the model's own
    assert (runs[0] == runs[1]).all()
    assert (tmp_path / "a" / "dense.gif").read_bytes() == (tmp_path / "b" / "dense.gif").read_bytes()


def test_sampler_bad_input_is_one_line(tmp_path, pipe_dir):
    r = CliRunner().invoke(cli, ["generate", "--model", str(pipe_dir), "--sampler", "ddim", *FAST,
                                 "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "'ddim' is not one of 'euler', 'consistency'" in r.output
    off = CliRunner().invoke(cli, ["generate", "--model", "tiny-rcm", "--sampler", "euler",
                                   "--out", str(tmp_path / "p")])
    assert off.exit_code == 0, off.output
    assert sum("with the consistency sampler" in line for line in off.output.splitlines()) == 1
