"""The few-step student ``tiny-turbo`` (:mod:`kaleido.tiny.distill`): loads offline by its name with its own
call defaults and schedule, generates deterministically at its 4 steps with one transformer call per step, and
says in one line when it is run off what it was distilled for."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

from kaleido.tiny.pipeline import (TINY_TURBO_DEMO, DistillationWarning, demo_settings, distillation_message,
                                   load_pipeline, variant_transformer_path)


@pytest.fixture(scope="module")
def turbo():
    pipe = load_pipeline("tiny-turbo")
    pipe.set_progress_bar_config(disable=True)
    return pipe


def test_loads_by_name_with_its_own_defaults_and_schedule(turbo):
    assert turbo.demo == TINY_TURBO_DEMO and demo_settings("tiny-turbo").num_inference_steps == 4
    assert turbo.demo.guidance_scale == 1.0 and turbo.distilled
    record = json.loads((variant_transformer_path("tiny-turbo").parent / "variant.json").read_text())
    assert record["num_inference_steps"] == 4 and record["guidance_scale"] == 1.0
    turbo.scheduler.set_timesteps(4)
    # the schedule it was distilled for ships with it (and differs from the teacher's own 4-step sigmas)
    assert [round(float(s), 4) for s in turbo.scheduler.sigmas] == [round(s, 4) for s in record["sigmas"]]
    teacher = load_pipeline("tiny")
    teacher.scheduler.set_timesteps(4)
    assert float(teacher.scheduler.sigmas[3]) < 0.01 < float(turbo.scheduler.sigmas[3])
    # its own weights, not the teacher's
    a = dict(turbo.transformer.named_parameters())["blocks.0.attn1.to_q.weight"]
    b = dict(teacher.transformer.named_parameters())["blocks.0.attn1.to_q.weight"]
    assert not torch.equal(a, b)


def test_one_transformer_call_per_step_and_deterministic(turbo):
    calls = []
    h = turbo.transformer.register_forward_pre_hook(lambda m, a, k: calls.append(k["hidden_states"].shape[0]),
                                                with_kwargs=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", DistillationWarning)  # its own defaults: no warning
            a = turbo("a red circle moving left on a plain background", generator=torch.Generator().manual_seed(3),
                      output_type="latent").frames
    finally:
        h.remove()
    assert calls == [1, 1, 1, 1]  # 4 steps, batch 1: no unconditional half
    b = turbo("a red circle moving left on a plain background", generator=torch.Generator().manual_seed(3),
              output_type="latent").frames
    assert torch.equal(a, b)


def test_off_its_training_it_runs_and_says_so_in_one_line(turbo):
    with pytest.warns(DistillationWarning, match="distilled for 4 steps at guidance 1") as rec:
        turbo("a red circle moving left on a plain background", num_inference_steps=2,
              generator=torch.Generator().manual_seed(0), output_type="latent")
    assert len(rec) == 1 and "\n" not in str(rec[0].message) and "2 steps" in str(rec[0].message)
    msg = distillation_message(TINY_TURBO_DEMO, 4, 5.0)
    assert msg is not None and "guidance 5" in msg and "steps" not in msg.split("called with")[1]
    assert distillation_message(TINY_TURBO_DEMO, 4, 1.0) is None
