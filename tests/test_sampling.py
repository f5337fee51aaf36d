"""The samplers (:mod:`kaleido.sampling`): TurboDiffusion's times worked by hand, the Euler sampler bit for bit
diffusers' own step, the consistency step against its formula with noise drawn independently here, one seed one
video, and dense and a step cache seeing the same noise draws."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from diffusers import DDIMScheduler, FlowMatchEulerDiscreteScheduler, UniPCMultistepScheduler

from kaleido.generation_settings import GenerationSettings
from kaleido.sampling import (FlowSampler, check_sampler, make_sampler, noise_seed, prepare, rcm_sigmas, sampler_of,
                              trigflow_to_rf, using)


def test_rcm_times_by_hand():
    # atan(80): tan = 80, so t = 80 / 81; angle 1.0: tan 1 = 1.5574, t = 1.5574 / 2.5574
    s = rcm_sigmas()
    assert s[0] == pytest.approx(80 / 81, abs=1e-12)
    assert s[3] == pytest.approx(math.tan(1.0) / (1 + math.tan(1.0)), abs=1e-12)
    assert [round(x, 3) for x in s] == [0.988, 0.934, 0.853, 0.609, 0.0]
    assert trigflow_to_rf(math.pi / 4) == pytest.approx(0.5)


def test_unknown_sampler_is_one_line():
    with pytest.raises(ValueError, match="pass --sampler euler or --sampler consistency") as e:
        check_sampler("ddim")
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="not one of"):
        GenerationSettings(sampler="heun")
    assert GenerationSettings(sampler="consistency").call_kwargs() == {"sampler": "consistency"}
    assert GenerationSettings(sampler="consistency", num_inference_steps=4).pipeline_kwargs() == {
        "num_inference_steps": 4}


def test_euler_sampler_is_diffusers_step_bit_for_bit():
    ref = FlowMatchEulerDiscreteScheduler(shift=3.0)
    ours = make_sampler(ref, "euler")
    assert isinstance(ours, FlowSampler) and ours.sampler == "euler" and sampler_of(ours) == "euler"
    ref.set_timesteps(5)
    ours.set_timesteps(5)
    x = torch.randn(1, 4, 2, 3, 3, generator=torch.Generator().manual_seed(0))
    y = x.clone()
    for t in ref.timesteps:
        v = torch.sin(x) * 0.3
        x = ref.step(v, t, x).prev_sample
        y = ours.step(v, t, y).prev_sample
    assert torch.equal(x, y)


def test_consistency_step_is_x0_renoised_with_the_seeds_noise():
    sch = make_sampler(FlowMatchEulerDiscreteScheduler(shift=1.0), "consistency", rcm_sigmas())
    sch.seed_noise(7)
    sch.set_timesteps(4)
    assert [round(float(s), 6) for s in sch.sigmas] == [round(s, 6) for s in rcm_sigmas()]
    x = torch.randn(1, 4, 2, 3, 3, generator=torch.Generator().manual_seed(1))
    noise = torch.Generator().manual_seed(noise_seed(7))  # the stream drawn here, independently of the sampler
    sig = rcm_sigmas()
    for i, t in enumerate(sch.timesteps):
        v = torch.cos(x) * 0.5
        out = sch.step(v, t, x).prev_sample
        x0 = x - sig[i] * v
        z = torch.randn(x.shape, generator=noise)
        expected = (1 - sig[i + 1]) * x0 + sig[i + 1] * z
        torch.testing.assert_close(out, expected, rtol=0, atol=1e-6)
        x = out
    assert sig[-1] == 0.0  # the last step returns x0 itself (its noise term is 0)


def test_unseeded_consistency_step_refuses_in_one_line():
    sch = make_sampler(FlowMatchEulerDiscreteScheduler(), "consistency")
    sch.set_timesteps(2)
    x = torch.zeros(1, 1, 1, 2, 2)
    with pytest.raises(ValueError, match="kaleido.sampling.prepare") as e:
        sch.step(x, sch.timesteps[0], x)
    assert "\n" not in str(e.value)


def test_drives_flow_schedulers_and_refuses_others():
    unipc = UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True, flow_shift=5.0)
    s = make_sampler(unipc, "consistency")
    assert s.config.shift == 5.0 and s.config.stochastic_sampling
    with pytest.raises(ValueError, match="flow-matching schedulers only") as e:
        make_sampler(DDIMScheduler(), "consistency")
    assert "\n" not in str(e.value) and "epsilon" in str(e.value)


def _random_wan():
    from kaleido.compare.pipelines import RANDOM_WAN_SETTINGS, build_random_wan_pipeline

    pipe = build_random_wan_pipeline()
    pipe.set_progress_bar_config(disable=True)
    return pipe, RANDOM_WAN_SETTINGS


def _latents(pipe, settings: GenerationSettings, seed: int) -> torch.Tensor:
    with torch.no_grad(), using(pipe, settings.sampler, seed):
        return pipe("a red circle", generator=torch.Generator().manual_seed(seed), output_type="latent",
                    **settings.pipeline_kwargs()).frames


def test_one_seed_one_video_whatever_torch_global_rng_does():
    pipe, base = _random_wan()
    own = pipe.scheduler
    st = base.overridden(sampler="consistency")
    torch.manual_seed(0)
    a = _latents(pipe, st, 3)
    torch.manual_seed(12345)
    torch.randn(100)  # a technique drawing from the global RNG must not shift the sampler's noise
    b = _latents(pipe, st, 3)
    c = _latents(pipe, st, 4)
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert pipe.scheduler is own  # the pipeline's own scheduler is back after the call
    # and the consistency sampler is not the Euler one
    assert not torch.equal(a, _latents(pipe, base, 3))


def test_dense_and_a_step_cache_see_the_same_noise_draws():
    from kaleido.techniques import make_method

    pipe, base = _random_wan()
    st = base.overridden(sampler="consistency")
    seen = []
    original = FlowSampler.step

    class Recorder(FlowSampler):  # the draws each call's steps make: the generator's state after every step
        def step(self, *a, **k):
            out = original(self, *a, **k)
            seen.append(self._noise.get_state().clone())
            return out

    def run(method=None):
        seen.clear()
        sch = make_sampler(pipe.scheduler, "consistency")
        rec = Recorder.from_config(sch.config)
        own, pipe.scheduler = pipe.scheduler, rec
        handle = method.apply(pipe.transformer) if method is not None else None
        try:
            with torch.no_grad():
                prepare(pipe, None, 5)
                pipe("a red circle", generator=torch.Generator().manual_seed(5), output_type="latent",
                     **st.pipeline_kwargs())
        finally:
            if handle is not None:
                handle.remove()
            pipe.scheduler = own
        return [s for s in seen]

    dense = run()
    cached = run(make_method("fbcache", threshold=10.0))  # skips every step it may
    assert len(dense) == len(cached) == st.num_inference_steps
    assert all(torch.equal(a, b) for a, b in zip(dense, cached))
    assert not torch.equal(dense[0], dense[1])  # each step drew


def test_prepare_keeps_a_pipeline_already_on_its_sampler():
    pipe, _ = _random_wan()
    own = pipe.scheduler
    assert prepare(pipe, None, 0) == "euler" and pipe.scheduler is own
    assert prepare(pipe, "euler", 0) == "euler" and pipe.scheduler is own
    assert prepare(pipe, "consistency", 0) == "consistency" and isinstance(pipe.scheduler, FlowSampler)


def test_noise_seed_is_a_stream_apart_from_the_latents():
    assert noise_seed(0) != 0 and noise_seed(0) != noise_seed(1)
    assert 0 <= noise_seed(2**40) < 2**63 and isinstance(noise_seed(3), int)
    assert len({noise_seed(s) for s in range(100)}) == 100
    np.testing.assert_equal(noise_seed(5), noise_seed(5))
