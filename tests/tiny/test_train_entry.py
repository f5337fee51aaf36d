"""`kaleido train-tiny` runs end to end on a toy budget, writes a loadable pipeline, and resumes."""

import json

import numpy as np

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
    assert vae_log[0]["code"] > 0  # the pooled-code latent target is part of the recipe
    assert tr_log[-1]["step"] == 2 and "val_loss" in tr_log[-1]
    assert (out / "pipeline" / "model_index.json").exists()

    from diffusers import WanPipeline

    pipe = WanPipeline.from_pretrained(str(out / "pipeline"))
    frames = pipe("a red circle moving left", height=32, width=32, num_frames=5, num_inference_steps=2,
                  generator=torch.Generator().manual_seed(0), output_type="np").frames
    assert frames.shape == (1, 5, 32, 32, 3)

    # the word-use measurement of the report runs on the run's held-out moving clips
    import numpy as np

    from kaleido.tiny.report import TinyReport, measure_word_use

    report = TinyReport()
    measure_word_use(pipe, out, report, n_clips=2)
    use = report.word_use
    assert use["clips"] >= 1 and len(use["true"]) == len(use["direction"]) == len(use["colour"]) == len(use["sigmas"])
    assert np.isfinite(use["true"] + use["direction"] + use["colour"]).all()

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


def test_pooled_code_is_the_causal_chunk_layout_of_4x4_means():
    from kaleido.tiny.train_vae import pooled_code

    x = torch.randn(2, 3, 9, 8, 12)
    code = pooled_code(x)
    assert code.shape == (2, 12, 3, 2, 3)
    block_mean = x[:, :, :, 4:8, 8:12].mean((-1, -2))  # (B, 3, T) for the block at (1, 2)
    # latent frame 0: frame 0 in all four RGB slots; latent frame 1: frames 1..4, one per slot
    torch.testing.assert_close(code[:, :, 0, 1, 2], block_mean[:, :, 0].repeat(1, 4))
    torch.testing.assert_close(code[:, :, 1, 1, 2], block_mean[:, :, 1:5].transpose(1, 2).reshape(2, 12))
    import pytest

    with pytest.raises(ValueError, match="1 \\+ 4k frames"):
        pooled_code(torch.zeros(1, 3, 6, 8, 8))


def test_code_weight_decays_to_zero_and_needs_12_latent_channels():
    import pytest

    from kaleido.tiny.train_vae import VaeArch, VaeTrainConfig, code_weight_at

    cfg = VaeTrainConfig(code_weight=2.0, code_steps=100)
    assert code_weight_at(cfg, 0) == 2.0 and code_weight_at(cfg, 50) == 1.0 and code_weight_at(cfg, 100) == 0.0
    assert code_weight_at(cfg, 10_000) == 0.0
    with pytest.raises(ValueError, match="z_dim >= 12"):
        VaeTrainConfig(arch=VaeArch(z_dim=8)).validate()
    VaeTrainConfig(code_weight=0.0, arch=VaeArch(z_dim=8)).validate()


def test_recipe_options_direction_groups_trails_and_low_resolution_steps(tmp_path):
    """The options the shipped recipe leaves off (moving_fraction, trail, pan, lowres_steps,
    frame_noise) run end to end."""
    from kaleido.cli.train_tiny import make_config
    from kaleido.tiny.latents import LatentSet
    from kaleido.tiny.train import run_training

    torch.set_num_threads(1)
    cfg = make_config("smoke", str(tmp_path / "run"), 0, None, None, None)
    cfg.moving_fraction, cfg.trail, cfg.pan, cfg.lowres_size = 1.0, True, True, 16
    cfg.transformer.lowres_steps, cfg.transformer.lowres_batch, cfg.transformer.frame_noise = 2, 3, 1.0
    run_training(cfg, progress=False)
    train = LatentSet.load(tmp_path / "run" / "latents" / "train")
    low = LatentSet.load(tmp_path / "run" / "latents" / "train_lowres")
    assert train.latents.shape[-2:] == (8, 8) and low.latents.shape[-2:] == (4, 4)  # 32 and 16 px clips / 4
    assert low.prompts == train.prompts  # same draws, smaller renders
    moving = [s for s in train.specs if s]
    assert [s["direction"] for s in moving] == ["left", "right", "up", "down"]  # one scene, four directions
    log = [json.loads(line) for line in (tmp_path / "run" / "transformer" / "log.jsonl").read_text().splitlines()]
    assert log[-1]["step"] == 2
    assert np.isfinite(log[-1]["val_direction_swap_gain"])  # the word probe runs on the moving held-out clips

    # the cached latents are reused for the same recipe and refused for another (not silently reused)
    import pytest

    from kaleido.tiny.train import prepare_latents, prepare_lowres_latents

    assert prepare_latents(cfg, None, progress=False)[0].prompts == train.prompts
    cfg.pan = False
    with pytest.raises(ValueError, match="encoded with"):
        prepare_latents(cfg, None, progress=False)
    with pytest.raises(ValueError, match="train_lowres"):
        prepare_lowres_latents(cfg, None, progress=False)
    (tmp_path / "run" / "latents" / "recipe.json").unlink()  # a cache from before the record: warned about
    with pytest.warns(UserWarning, match="recipe.json"):
        prepare_latents(cfg, None, progress=False)


def test_direction_swap_gain_is_zero_for_a_model_that_ignores_its_text():
    from kaleido.tiny.data import ShapeSpec
    from kaleido.tiny.latents import LatentSet
    from kaleido.tiny.train_transformer import (VAL_SIGMAS, direction_swap_gain, fixed_validation_draws,
                                                word_probe_set)

    specs = [ShapeSpec("red", "circle", "moving", "left", "plain").to_dict(), None,
             ShapeSpec("blue", "square", "growing", None, "plain").to_dict()]
    val = LatentSet(torch.randn(3, 4, 2, 2, 2), ["p0", "real", "p2"], specs)
    probe = word_probe_set(val, 3)
    assert probe == ([0], ["a red circle moving left on a plain background"],
                     ["a red circle moving right on a plain background"])

    class Emb:  # prompt -> a one-token embedding that differs per prompt
        def batch(self, prompts):
            return torch.tensor([[[float(len(p) + ("right" in p))]] for p in prompts])

    noise = fixed_validation_draws(3, (4, 2, 2, 2), VAL_SIGMAS)
    blind = lambda x, s, t: torch.zeros_like(x)  # noqa: E731
    assert direction_swap_gain(blind, val.latents, noise, probe, Emb()) == 0.0
    reads = lambda x, s, t: x * t.mean()  # noqa: E731 - output depends on the text
    assert direction_swap_gain(reads, val.latents, noise, probe, Emb()) != 0.0
    assert word_probe_set(LatentSet(torch.zeros(1, 4, 2, 2, 2), ["real"], [None]), 1) is None


def test_word_probe_without_moving_held_out_clips_says_so(tmp_path):
    import pytest

    from kaleido.cli.train_tiny import make_config
    from kaleido.tiny.train import run_training

    torch.set_num_threads(1)
    cfg = make_config("smoke", str(tmp_path / "run"), 0, None, None, None)
    cfg.n_val_procedural, cfg.moving_fraction = 1, 0.0  # the only procedural held-out clip rotates or grows
    with pytest.warns(UserWarning, match="val_direction_swap_gain"):
        run_training(cfg, progress=False)


def test_low_resolution_steps_need_a_low_resolution_set(tmp_path):
    import pytest

    from kaleido.tiny.train_transformer import TransformerTrainConfig, train_transformer

    cfg = TransformerTrainConfig(out_dir=str(tmp_path), steps=4, lowres_steps=2)
    with pytest.raises(ValueError, match="train_lowres"):
        train_transformer(cfg, None, None, None, None, None)
    with pytest.raises(ValueError, match="lowres_steps"):
        TransformerTrainConfig(steps=4, lowres_steps=5).validate()


def test_training_sigmas_share_one_level_per_clip_unless_frame_noise():
    from kaleido.tiny.train_transformer import shifted_sigma, training_sigmas

    plain = training_sigmas(torch.Generator().manual_seed(3), 64, 5, 2.0, 0.0)
    assert plain.shape == (64, 5) and bool((plain == plain[:, :1]).all())
    # frame_noise 0 draws exactly what one sigma per clip drew before the option existed
    assert torch.equal(plain[:, 0], shifted_sigma(torch.rand(64, 1, generator=torch.Generator().manual_seed(3)), 2.0)[:, 0])
    mixed = training_sigmas(torch.Generator().manual_seed(3), 400, 5, 2.0, 0.5)
    own = ~(mixed == mixed[:, :1]).all(1)
    assert 0.4 < float(own.float().mean()) < 0.6  # about half the clips draw a level per frame
    assert bool(((mixed > 0) & (mixed < 1)).all())
    assert bool((~(training_sigmas(torch.Generator(), 8, 5, 2.0, 1.0) == 0).any()))


def test_per_frame_sigmas_reach_each_frames_tokens():
    """One level for all frames takes the sampler's (B,) path exactly; different levels change the
    prediction; flow_matching_pair noises each latent frame at its own level."""
    from kaleido.tiny.build import TransformerArch, build_transformer
    from kaleido.tiny.train_transformer import flow_matching_pair, predict

    torch.manual_seed(0)
    model = build_transformer(TransformerArch(num_layers=1, ffn_dim=32), text_dim=8, z_dim=4, seed=0).eval()
    x = torch.randn(1, 4, 3, 4, 4)
    text = torch.randn(1, 5, 8)
    same = predict(model, x, torch.full((1, 3), 0.4), text)
    assert torch.equal(same, predict(model, x, torch.tensor([0.4]), text))
    per_frame = predict(model, x, torch.tensor([[0.1, 0.5, 0.9]]), text)
    assert not torch.allclose(per_frame, same)
    x0, noise = torch.randn(2, 4, 3, 4, 4), torch.randn(2, 4, 3, 4, 4)
    x_t, v = flow_matching_pair(x0, noise, torch.tensor([[0.0, 0.5, 1.0], [0.2, 0.2, 0.2]]))
    assert torch.allclose(x_t[0, :, 0], x0[0, :, 0]) and torch.allclose(x_t[0, :, 2], noise[0, :, 2])
    assert torch.allclose(x_t[1], 0.8 * x0[1] + 0.2 * noise[1]) and torch.equal(v, noise - x0)


def test_frame_noise_must_be_a_probability():
    import pytest

    from kaleido.tiny.train_transformer import TransformerTrainConfig

    with pytest.raises(ValueError, match="frame_noise"):
        TransformerTrainConfig(frame_noise=1.5).validate()


def test_clean_first_frames_are_given_at_sigma_zero_and_left_out_of_the_loss():
    import pytest

    from kaleido.tiny.train_transformer import validation_loss_per_sigma

    x0, noise = torch.randn(3, 4, 5, 2, 2), torch.randn(1, 3, 4, 5, 2, 2)
    seen = []

    def blind(x_t, sigma, text):  # predicts 0: the loss is the mean of v^2 over the scored frames
        seen.append(sigma.clone())
        return torch.zeros_like(x_t)

    loss = validation_loss_per_sigma(blind, x0, torch.zeros(3, 1, 1), [0.7], noise, clean_frames=1)[0]
    assert loss == pytest.approx(float(((noise[0] - x0)[:, :, 1:] ** 2).mean()), rel=1e-6)
    assert torch.equal(seen[0], torch.tensor([[0.0, 0.7, 0.7, 0.7, 0.7]] * 3))
    with pytest.raises(ValueError, match="clean_frames"):
        validation_loss_per_sigma(blind, x0, torch.zeros(3, 1, 1), [0.7], noise, clean_frames=5)


def test_per_frame_sigmas_refuse_a_transformer_that_patches_frames_together():
    import dataclasses

    import pytest

    from kaleido.tiny.build import TransformerArch, build_transformer
    from kaleido.tiny.train_transformer import predict

    arch = dataclasses.replace(TransformerArch(num_layers=1, ffn_dim=32), patch_size=(2, 1, 1))
    model = build_transformer(arch, text_dim=8, z_dim=4, seed=0).eval()
    with pytest.raises(ValueError, match="temporal patch size"):
        predict(model, torch.randn(1, 4, 4, 2, 2), torch.tensor([[0.1, 0.1, 0.9, 0.9]]), torch.randn(1, 5, 8))
