"""The consistency student ``tiny-rcm`` (:mod:`kaleido.tiny.distill`, ``--sampler consistency``): loads offline
by its name with its call defaults, its sampler and TurboDiffusion's times; one transformer call per step; one
seed gives one video whatever torch's global RNG does; and off what it was distilled for it runs and says so in
one line."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

from kaleido.sampling import FlowSampler, rcm_sigmas, using
from kaleido.tiny.pipeline import (TINY_TURBO_DEMO, DistillationWarning, demo_settings, load_pipeline,
                                   native_sampler, variant_transformer_path)

PROMPT = "a red circle moving left on a plain background"


@pytest.fixture(scope="module")
def rcm():
    pipe = load_pipeline("tiny-rcm")
    pipe.set_progress_bar_config(disable=True)
    return pipe


def _latents(pipe, seed, **kw):
    return pipe(PROMPT, generator=torch.Generator().manual_seed(seed), output_type="latent", **kw).frames


def test_loads_by_name_with_its_sampler_and_times(rcm):
    assert rcm.demo == TINY_TURBO_DEMO and demo_settings("tiny-rcm").num_inference_steps == 4
    assert rcm.distilled and rcm.made_for == "consistency" and native_sampler("tiny-rcm") == "consistency"
    record = json.loads((variant_transformer_path("tiny-rcm").parent / "variant.json").read_text())
    assert record["sampler"] == "consistency" and record["num_inference_steps"] == 4
    assert record["guidance_scale"] == 1.0
    assert isinstance(rcm.scheduler, FlowSampler) and rcm.scheduler.config.stochastic_sampling
    rcm.scheduler.set_timesteps(4)
    # TurboDiffusion's times, worked out independently of the file: sin / (sin + cos) of atan(80), 1.5, 1.4, 1.0
    assert [round(float(s), 3) for s in rcm.scheduler.sigmas] == [0.988, 0.934, 0.853, 0.609, 0.0]
    assert record["sigmas"] == pytest.approx(rcm_sigmas(), abs=1e-6)  # float32 times, as the scheduler keeps them
    teacher, turbo = load_pipeline("tiny"), load_pipeline("tiny-turbo")
    key = "blocks.0.attn1.to_q.weight"
    w = dict(rcm.transformer.named_parameters())[key]
    assert not torch.equal(w, dict(teacher.transformer.named_parameters())[key])
    assert not torch.equal(w, dict(turbo.transformer.named_parameters())[key])


def test_one_call_per_step_and_one_seed_one_video(rcm):
    calls = []
    h = rcm.transformer.register_forward_pre_hook(lambda m, a, k: calls.append(k["hidden_states"].shape[0]),
                                                  with_kwargs=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", DistillationWarning)  # its own defaults and sampler: no warning
            torch.manual_seed(0)
            a = _latents(rcm, 3)
    finally:
        h.remove()
    assert calls == [1, 1, 1, 1]
    torch.manual_seed(999)
    torch.randn(1000)  # the global RNG moved: the step noise follows the call's generator, not it
    b = _latents(rcm, 3)
    assert torch.equal(a, b)
    assert not torch.equal(a, _latents(rcm, 4))


def test_off_its_sampler_or_steps_it_runs_and_says_so_in_one_line(rcm):
    with pytest.warns(DistillationWarning, match="with the consistency sampler") as rec:
        with using(rcm, "euler", 0):
            _latents(rcm, 0)
    assert len(rec) == 1 and "\n" not in str(rec[0].message) and "the euler sampler" in str(rec[0].message)
    assert isinstance(rcm.scheduler, FlowSampler) and rcm.scheduler.config.stochastic_sampling  # its own back
    with pytest.warns(DistillationWarning, match="2 steps"):
        _latents(rcm, 0, num_inference_steps=2)
