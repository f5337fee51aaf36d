"""Samplers of a flow-matching video pipeline: ``euler`` and ``consistency``.

* ``euler``: the deterministic ODE step of diffusers' ``FlowMatchEulerDiscreteScheduler``,
  ``x' = x + (t' - t) v``. Consecutive steps stay close, which is what step caches reuse.
* ``consistency``: multistep consistency sampling, as TurboDiffusion samples its rCM-distilled Wan students:
  each step predicts the clean latent ``x0 = x - t v`` and re-noises it with **fresh** Gaussian noise,
  ``x' = (1 - t') x0 + t' z``; the last step (``t' = 0``) returns ``x0``. Its update is diffusers' own
  ``stochastic_sampling=True`` update; what this module adds is where the noise comes from.

Noise. ``WanPipeline`` passes no generator to ``scheduler.step``, so ``stochastic_sampling=True`` alone draws
from torch's global RNG, and one seed then gives different videos. :class:`FlowSampler` draws its step noise
from a generator of its own, re-seeded at the start of every pipeline call (``set_timesteps``) from the seed
the call's generator was made with (:meth:`FlowSampler.seed_noise`, which :func:`prepare` and the tiny
pipeline's call do). So one seed gives one video, and dense and every technique see the same draws: nothing
a technique draws from torch's RNG shifts them.

Schedules. A student distilled for fixed times (``tiny-rcm``: TurboDiffusion's rCM times) carries them as
:attr:`FlowSampler.fixed_sigmas`, used whenever the pipeline asks for that many steps; any other step count
gets the scheduler's own shifted schedule.

:func:`prepare` puts the sampler a call asks for on a pipeline (a scheduler swap, as diffusers documents
``pipe.scheduler = X.from_config(pipe.scheduler.config)``) and refuses, in one line, a name it does not know
or a scheduler it cannot drive.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Sequence

import numpy as np
import torch
from diffusers import FlowMatchEulerDiscreteScheduler

from kaleido.generation_settings import DEFAULT_SAMPLER, SAMPLERS, check_sampler

__all__ = ["SAMPLERS", "DEFAULT_SAMPLER", "check_sampler", "FlowSampler", "make_sampler", "prepare", "using",
           "rcm_sigmas", "sampler_of"]

#: TurboDiffusion's 4-step rCM times: TrigFlow angles atan(80), 1.5, 1.4, 1.0 as rectified-flow times
#: ``t = sin / (sin + cos)`` (its ``wan2.1_t2v_infer.py``), and the final 0
RCM_ANGLES = (float(np.arctan(80.0)), 1.5, 1.4, 1.0)


def trigflow_to_rf(angle: float) -> float:
    """A TrigFlow angle as a rectified-flow time: ``sin / (sin + cos)``."""
    return float(np.sin(angle) / (np.sin(angle) + np.cos(angle)))


def rcm_sigmas() -> list[float]:
    """TurboDiffusion's 4-step times and the final 0: ``[0.988, 0.934, 0.853, 0.609, 0]`` (rounded here)."""
    return [trigflow_to_rf(a) for a in RCM_ANGLES] + [0.0]


def noise_seed(seed: int) -> int:
    """The seed of a call's step noise, derived from the call's seed (a stream apart from the initial latent's)."""
    return int(np.random.SeedSequence([int(seed) & (2**63 - 1), 0xC0_515]).generate_state(1, np.uint64)[0] >> 1)


class FlowSampler(FlowMatchEulerDiscreteScheduler):
    """``FlowMatchEulerDiscreteScheduler`` whose stochastic (consistency) steps draw from the call's seed, and
    which keeps a student's fixed times. ``config.stochastic_sampling`` chooses the sampler: ``False`` is the
    Euler step bit for bit, ``True`` the consistency step."""

    #: the times (last 0) of a student distilled for them; ``None``: the config's shifted schedule
    fixed_sigmas: tuple[float, ...] | None = None
    _noise_seed: int | None = None
    _noise: torch.Generator | None = None

    @property
    def sampler(self) -> str:
        return "consistency" if self.config.stochastic_sampling else "euler"

    def seed_noise(self, seed: int) -> None:
        """Draw every later call's step noise from ``seed`` (re-seeded at the start of each call)."""
        self._noise_seed = noise_seed(seed)

    def set_timesteps(self, num_inference_steps=None, device=None, sigmas=None, mu=None, timesteps=None):
        fixed = self.fixed_sigmas
        if sigmas is None and timesteps is None and fixed is not None and num_inference_steps == len(fixed) - 1:
            super().set_timesteps(device=device, sigmas=list(fixed[:-1]), mu=mu)
            self.sigmas = torch.tensor(list(fixed), dtype=torch.float32, device=self.sigmas.device)
            self.timesteps = self.sigmas[:-1] * self.config.num_train_timesteps
        else:
            super().set_timesteps(num_inference_steps, device=device, sigmas=sigmas, mu=mu, timesteps=timesteps)
        if self._noise_seed is not None:
            self._noise = torch.Generator().manual_seed(self._noise_seed)

    def step(self, model_output, timestep, sample, s_churn=0.0, s_tmin=0.0, s_tmax=float("inf"), s_noise=1.0,
             generator=None, per_token_timesteps=None, return_dict=True):
        if self.config.stochastic_sampling and generator is None:
            if self._noise is None:
                raise ValueError("the consistency sampler draws its step noise from the call's seed: call "
                                 "kaleido.sampling.prepare(pipe, 'consistency', seed) before the pipeline call "
                                 "(kaleido's generation and the tiny pipelines do it for you)")
            generator = self._noise  # on the CPU: diffusers' randn_tensor draws there and moves the noise
        return super().step(model_output, timestep, sample, s_churn=s_churn, s_tmin=s_tmin, s_tmax=s_tmax,
                            s_noise=s_noise, generator=generator, per_token_timesteps=per_token_timesteps,
                            return_dict=return_dict)


def _flow_config(scheduler) -> dict:
    """The config of a ``FlowMatchEulerDiscreteScheduler`` equivalent to ``scheduler``'s flow schedule, or a
    one-line ``ValueError`` for a scheduler that is not flow matching."""
    if isinstance(scheduler, FlowMatchEulerDiscreteScheduler):
        return dict(scheduler.config)
    config = dict(getattr(scheduler, "config", {}) or {})
    if config.get("prediction_type") == "flow_prediction" and config.get("use_flow_sigmas", True):
        # Wan 2.1's UniPCMultistepScheduler: flow-matching times t = shift s / (1 + (shift - 1) s)
        return dict(num_train_timesteps=config.get("num_train_timesteps", 1000),
                    shift=float(config.get("flow_shift") or 1.0))
    raise ValueError(f"the consistency and euler samplers drive flow-matching schedulers only; this pipeline's "
                     f"{type(scheduler).__name__} predicts {config.get('prediction_type', 'epsilon')!r}: use a "
                     "flow-matching pipeline (Wan, HunyuanVideo, CogVideoX 1.5 flow variants) or leave --sampler out")


def sampler_of(scheduler) -> str | None:
    """The sampler ``scheduler`` runs: ``euler`` / ``consistency`` for a flow-matching Euler scheduler, else ``None``."""
    if isinstance(scheduler, FlowMatchEulerDiscreteScheduler):
        return "consistency" if scheduler.config.stochastic_sampling else "euler"
    return None


def make_sampler(scheduler, name: str, fixed_sigmas: Sequence[float] | None = None) -> FlowSampler:
    """A :class:`FlowSampler` running ``name`` on ``scheduler``'s flow schedule (its fixed times kept)."""
    check_sampler(name)
    config = _flow_config(scheduler)
    config.pop("stochastic_sampling", None)
    out = FlowSampler.from_config(config, stochastic_sampling=(name == "consistency"))
    fixed = fixed_sigmas if fixed_sigmas is not None else getattr(scheduler, "fixed_sigmas", None)
    out.fixed_sigmas = tuple(float(s) for s in fixed) if fixed is not None else None
    return out


def prepare(pipe, name: str | None, seed: int) -> str:
    """Put sampler ``name`` (``None``: the pipeline's own) on ``pipe`` and seed its step noise with ``seed``;
    returns the sampler that runs. A pipeline already on that sampler keeps its scheduler (so the Euler
    pipelines run exactly as loaded). For one call, :func:`using` puts the pipeline's own back after it."""
    check_sampler(name)
    scheduler = pipe.scheduler
    current = sampler_of(scheduler)
    if name is not None and name != current:
        scheduler = make_sampler(scheduler, name)
        pipe.scheduler = scheduler
        current = name
    if isinstance(scheduler, FlowSampler):
        scheduler.seed_noise(seed)
    return current or DEFAULT_SAMPLER


@contextmanager
def using(pipe, name: str | None, seed: int) -> Iterator[str]:
    """:func:`prepare` for the calls inside the ``with`` block, then ``pipe``'s own scheduler back; yields the
    sampler that runs."""
    original = pipe.scheduler
    try:
        yield prepare(pipe, name, seed)
    finally:
        if pipe.scheduler is not original:
            pipe.scheduler = original
