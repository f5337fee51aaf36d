"""The few-step student's recipe (:mod:`kaleido.tiny.distill`): its data never touches an evaluation prompt,
its schedule is the one worked out by hand, the teacher's state at a student sigma is exact on the teacher's
Euler path, and one regression step lowers the landing error it is trained on."""

from __future__ import annotations

import math

import pytest
import torch

from kaleido.tiny.data import HELDOUT_PROMPTS as DEFAULT_PROMPTS
from kaleido.tiny.distill import (DistillConfig, excluded_prompts, rollout, schedule_sigmas, states_at,
                                  student_scheduler, training_prompts)


def test_training_prompts_never_evaluation_or_calibration_prompts():
    prompts = training_prompts(400, seed=0)
    assert len(prompts) == 400
    banned = excluded_prompts()
    assert set(DEFAULT_PROMPTS) <= banned
    assert "a green circle moving down on a plain background" in banned  # configs/calibration/prompts.txt
    assert not banned & set(prompts)
    assert len(set(prompts)) > 100  # varied, not one prompt repeated
    assert training_prompts(50, seed=0) == prompts[:50]  # seeded


def _scheduler():
    from diffusers import FlowMatchEulerDiscreteScheduler

    return FlowMatchEulerDiscreteScheduler(shift=2.0)


def test_student_schedule_worked_by_hand():
    # diffusers: t = linspace(1, sigma_min, 4) with sigma_min the shifted training minimum 2 * 0.001 / 1.001;
    # shifted s = 2t / (1 + t); stretched so the last is 0.25: 1 - (1 - s) * (1 - 0.25) / (1 - s_last)
    lo = 2 * 0.001 / 1.001
    t = [1.0 - k * (1.0 - lo) / 3 for k in range(4)]
    s = [2 * x / (1 + x) for x in t]
    want = [1 - (1 - x) * 0.75 / (1 - s[-1]) for x in s] + [0.0]
    got = schedule_sigmas(student_scheduler(_scheduler(), DistillConfig()), 4)
    assert got == pytest.approx(want, abs=1e-6)
    assert got == pytest.approx([1.0, 0.84976, 0.62463, 0.25, 0.0], abs=1e-4)
    plain = schedule_sigmas(student_scheduler(_scheduler(), DistillConfig(student_shift_terminal=None)), 4)
    assert plain[3] == pytest.approx(2 * lo / (1 + lo), abs=1e-6)  # 0.004: diffusers' own: a last step that does almost nothing


def test_teacher_state_at_a_student_sigma_is_exact_on_its_euler_path():
    torch.manual_seed(0)
    sigmas = [1.0, 0.7, 0.4, 0.0]
    x0 = torch.randn(3, 4)
    vs = [torch.randn(3, 4) for _ in range(3)]
    states = [x0]
    for k, v in enumerate(vs):
        states.append(states[-1] + (sigmas[k + 1] - sigmas[k]) * v)
    st = torch.stack(states, 1)
    # 0.55 lies in the second step: one Euler step of that step's velocity from 0.7
    want = states[1] + (0.55 - 0.7) * vs[1]
    assert torch.allclose(states_at(st, sigmas, 0.55), want, atol=1e-6)
    assert torch.equal(states_at(st, sigmas, 0.4), states[2])
    with pytest.raises(ValueError, match="outside"):
        states_at(st, sigmas, 1.5)


class _Linear(torch.nn.Module):
    """A stand-in transformer: v = w * x (the predict() calling convention)."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor(0.5))
        self.config = type("C", (), {"patch_size": (1, 1, 1)})()

    def forward(self, hidden_states, timestep, encoder_hidden_states, return_dict=False):
        return (self.w * hidden_states,)


def test_rollout_is_euler_along_the_sigmas():
    m = _Linear()
    x = torch.ones(1, 1, 1, 1, 1)
    out = rollout(m, x, [1.0, 0.5, 0.0], torch.zeros(1, 1, 1))
    # two Euler steps of v = 0.5 x with ds = -0.5: x * (1 - 0.25)^2
    assert float(out.detach()) == pytest.approx(0.75 ** 2)


def test_config_validation_names_the_value():
    with pytest.raises(ValueError, match="student_steps"):
        DistillConfig(student_steps=30).validate()
    with pytest.raises(ValueError, match="n_val"):
        DistillConfig(n_trajectories=4, n_val=8).validate()
    assert math.isfinite(DistillConfig().lr)


def test_the_own_state_phase_is_the_consistency_students():
    from kaleido.tiny.distill import consistency_config

    with pytest.raises(ValueError, match="consistency student"):
        DistillConfig(own_state_steps=10).validate()
    with pytest.raises(ValueError, match="own_state_last=5"):
        consistency_config(own_state_steps=10, own_state_last=5).validate()
    consistency_config(own_state_steps=10, own_state_last=2, train_steps=0).validate()


def test_times_on_the_command_line_parse_and_bad_ones_are_named():
    import argparse

    from kaleido.tiny.distill import consistency_config, parse_times

    t = parse_times("0.988,0.853,0.609,0.25,0")
    assert t == (0.988, 0.853, 0.609, 0.25, 0.0)
    consistency_config(student_sigmas=t).validate()
    with pytest.raises(argparse.ArgumentTypeError, match="comma-separated"):
        parse_times("0.9;0.5")
    with pytest.raises(ValueError, match="decreasing times"):
        consistency_config(student_sigmas=(0.5, 0.9, 0.6, 0.25, 0.0)).validate()
    with pytest.raises(ValueError, match="consistency student's times"):
        DistillConfig(student_sigmas=t).validate()


def test_a_student_starts_from_a_variant_or_a_run_folder(tmp_path):
    from kaleido.tiny.distill import initial_transformer
    from kaleido.tiny.pipeline import load_pipeline

    shipped = load_pipeline("tiny-rcm").transformer
    shipped.save_pretrained(tmp_path / "variant" / "transformer")
    again = initial_transformer(str(tmp_path / "variant"))
    a, b = shipped.state_dict(), again.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    with pytest.raises(ValueError, match="run's variant folder"):
        initial_transformer(str(tmp_path / "nowhere"))


def test_an_unknown_init_is_refused_before_any_work():
    with pytest.raises(ValueError, match="init='nowhere'"):
        DistillConfig(init="nowhere").validate()
