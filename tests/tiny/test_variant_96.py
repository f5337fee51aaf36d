"""The second resolution of the miniature pipeline: ``tiny-96`` loads offline by its name,
generates at its own size deterministically, shares every component but the transformer with ``tiny``,
and the fine-tuning that made it runs end to end and resumes."""

import json

import numpy as np
import pytest
import torch

from kaleido.tiny.pipeline import TINY_96_DEMO, TINY_VARIANTS, demo_settings, load_pipeline, variant_transformer_path


def _frames(pipe, seed=0):
    out = pipe("a red circle moving left on a striped background", num_inference_steps=2,
               generator=torch.Generator().manual_seed(seed), output_type="np")
    return np.asarray(out.frames[0])


def test_tiny_96_loads_offline_and_generates_deterministically_at_96px():
    pipe = load_pipeline("tiny-96")
    pipe.set_progress_bar_config(disable=True)
    assert pipe.demo == TINY_96_DEMO and demo_settings("tiny-96").height == 96
    a, b = _frames(pipe), _frames(pipe)
    assert a.shape == (17, 96, 96, 3)
    assert np.array_equal(a, b)
    assert np.isfinite(a).all() and a.std() > 0.01  # not a constant image


def test_tiny_96_shares_everything_but_the_transformer():
    tiny, big = load_pipeline("tiny"), load_pipeline("tiny-96")
    for name in ("vae", "text_encoder"):
        sa, sb = getattr(tiny, name).state_dict(), getattr(big, name).state_dict()
        assert all(torch.equal(sa[k], sb[k]) for k in sa)
    ta, tb = tiny.transformer.state_dict(), big.transformer.state_dict()
    assert ta.keys() == tb.keys() and not all(torch.equal(ta[k], tb[k]) for k in ta)  # fine-tuned weights
    record = json.loads((variant_transformer_path("tiny-96").parent / "variant.json").read_text())
    assert record["size"] == 96 and record["latent_grid"] == [5, 24, 24]


def test_shipped_total_stays_under_40_mib():
    from kaleido.tiny.pipeline import tiny_pipeline_path
    from kaleido.tiny.recipe import SHIP_LIMIT_BYTES, folder_bytes

    total = folder_bytes(tiny_pipeline_path()) + sum(
        folder_bytes(variant_transformer_path(n).parent) for n, v in TINY_VARIANTS.items() if v.transformer)
    assert total <= SHIP_LIMIT_BYTES


def test_finetune_runs_end_to_end_and_resumes(tmp_path):
    from kaleido.tiny.finetune import FinetuneConfig, run_finetune

    def cfg(steps):
        c = FinetuneConfig(out_dir=str(tmp_path / "ft"), size=32, n_train_procedural=2, n_train_real=1,
                           n_val_procedural=2, n_val_real=0, clip_frames=5)
        c.transformer.steps, c.transformer.batch, c.transformer.val_every = steps, 2, 2
        return c

    variant = run_finetune(cfg(2), progress=False)
    log = [json.loads(line) for line in (tmp_path / "ft" / "transformer" / "log.jsonl").read_text().splitlines()]
    assert log[-1]["step"] == 1 and "val_loss" in log[-1]
    record = json.loads((variant / "variant.json").read_text())
    assert record["size"] == 32 and record["steps"] == 2 and record["latent_grid"] == [2, 8, 8]
    from diffusers import WanTransformer3DModel

    tuned = WanTransformer3DModel.from_pretrained(str(variant / "transformer"))
    base = load_pipeline("tiny").transformer
    assert not all(torch.equal(a, b) for a, b in zip(tuned.state_dict().values(), base.state_dict().values()))
    run_finetune(cfg(3), progress=False)  # resumes from its checkpoint: one more step, not three
    log = [json.loads(line) for line in (tmp_path / "ft" / "transformer" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log if "loss" in r] == [0, 1, 2]


def test_init_from_an_incompatible_transformer_is_one_line(tmp_path):
    from kaleido.tiny.build import TransformerArch
    from kaleido.tiny.finetune import FinetuneConfig, run_finetune

    c = FinetuneConfig(out_dir=str(tmp_path / "ft"), size=32, n_train_procedural=2, n_train_real=0,
                       n_val_procedural=1, n_val_real=0, clip_frames=5)
    c.transformer.steps, c.transformer.batch = 1, 1
    c.transformer.arch = TransformerArch(num_layers=1)
    with pytest.raises(ValueError, match="do not fit this run's architecture") as e:
        run_finetune(c, progress=False)
    assert "\n" not in str(e.value)


def test_bad_finetune_size_is_refused():
    from kaleido.tiny.finetune import FinetuneConfig

    with pytest.raises(ValueError, match="multiple of 16"):
        FinetuneConfig(size=100).validate()
