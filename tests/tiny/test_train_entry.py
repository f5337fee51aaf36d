"""`kaleido train-tiny` runs end to end on a toy budget, writes a loadable pipeline, and resumes."""

import json

import torch
from click.testing import CliRunner

from kaleido.cli.main import cli


def test_train_tiny_smoke_end_to_end_and_resume(tmp_path):
    out = tmp_path / "run"
    runner = CliRunner()
    result = runner.invoke(cli, ["train-tiny", "--preset", "smoke", "--out", str(out), "--quiet", "--threads", "1"])
    assert result.exit_code == 0, result.output + repr(result.exception)
    vae_log = [json.loads(line) for line in (out / "vae" / "log.jsonl").read_text().splitlines()]
    tr_log = [json.loads(line) for line in (out / "transformer" / "log.jsonl").read_text().splitlines()]
    assert vae_log[-1]["step"] == 2 and all(r["loss"] > 0 for r in vae_log)
    assert tr_log[-1]["step"] == 2 and "val_loss" in tr_log[-1]
    assert (out / "pipeline" / "model_index.json").exists()

    from diffusers import WanPipeline

    pipe = WanPipeline.from_pretrained(str(out / "pipeline"))
    frames = pipe("a red circle moving left", height=32, width=32, num_frames=5, num_inference_steps=2,
                  generator=torch.Generator().manual_seed(0), output_type="np").frames
    assert frames.shape == (1, 5, 32, 32, 3)

    # a second run with more transformer steps resumes from the checkpoint instead of restarting
    result = runner.invoke(cli, ["train-tiny", "--preset", "smoke", "--out", str(out), "--quiet", "--threads", "1",
                                 "--transformer-steps", "4"])
    assert result.exit_code == 0, result.output + repr(result.exception)
    steps = [json.loads(line)["step"] for line in (out / "transformer" / "log.jsonl").read_text().splitlines()]
    assert steps.count(0) == 1 and steps[-1] == 3


def test_train_tiny_rejects_bad_budgets():
    result = CliRunner().invoke(cli, ["train-tiny", "--vae-steps", "0"])
    assert result.exit_code != 0 and "--vae-steps" in result.output


def test_vae_config_names_the_bad_frame_count():
    import pytest

    from kaleido.tiny.train_vae import VaeTrainConfig

    with pytest.raises(ValueError, match="frames=6"):
        VaeTrainConfig(frames=6).validate()
