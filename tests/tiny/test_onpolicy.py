"""The consistency student's own-state phase: its states, the teacher's targets and their files, hand-checked."""

import torch

from kaleido.tiny.onpolicy import load_targets, make_targets, student_states, teacher_from


class Fake:
    """A transformer stand-in: velocity ``scale * x + (text mean)`` (so conditional and unconditional differ)."""

    def __init__(self, scale: float):
        self.scale, self.calls = scale, 0

    def __call__(self, hidden_states, timestep, encoder_hidden_states, return_dict=False):
        self.calls += 1
        bias = encoder_hidden_states.mean(dim=(1, 2)).view(-1, 1, 1, 1, 1)
        return (self.scale * hidden_states + bias,)


SHAPE = (2, 4, 1, 2, 2)


def test_teacher_from_is_the_guided_euler_path_from_its_time():
    # a constant guided velocity (scale 0): the Euler path from t0 lands on x - t0 * (vu + g (vc - vu)) whatever
    # the sigmas below t0, and only those are stepped (one cond + one uncond call per step)
    x = torch.randn(SHAPE)
    text, uncond = torch.full((2, 3, 5), 2.0), torch.full((2, 3, 5), -1.0)
    teacher = Fake(0.0)
    out = teacher_from(teacher, x, 0.6, [1.0, 0.8, 0.5, 0.25, 0.0], text, uncond, 5.0)
    assert torch.allclose(out, x - 0.6 * (-1.0 + 5.0 * (2.0 - -1.0)), atol=1e-6)
    assert teacher.calls == 2 * 3  # 0.6 -> 0.5 -> 0.25 -> 0


def test_student_states_re_noise_each_prediction_with_its_own_seed():
    # velocity = x: x0 = (1 - s) x, re-noised with noise drawn from the sample's own generator
    noise, text = torch.randn(SHAPE), torch.zeros(2, 3, 5)
    sig = [0.9, 0.7, 0.4, 0.0]
    states = student_states(Fake(1.0), noise, sig, text, [11, 12], 2)
    gens = [torch.Generator().manual_seed(11), torch.Generator().manual_seed(12)]
    x = noise
    for i in range(2):
        z = torch.stack([torch.randn(SHAPE[1:], generator=g) for g in gens])
        x = (1 - sig[i + 1]) * (1 - sig[i]) * x + sig[i + 1] * z
        assert torch.allclose(states[i + 1], x, atol=1e-6)
    assert len(states) == 3 and torch.equal(states[0], noise)
    again = student_states(Fake(1.0), noise, sig, text, [11, 99], 2)  # another seed moves only its sample
    assert torch.equal(again[2][0], states[2][0]) and not torch.equal(again[2][1], states[2][1])


def test_targets_are_written_once_and_read_back(tmp_path):
    noise, text, uncond = torch.randn((5,) + SHAPE[1:]), torch.ones(5, 3, 5), torch.zeros(5, 3, 5)
    sig, teacher_sig = [0.9, 0.7, 0.4, 0.0], [1.0, 0.75, 0.5, 0.2, 0.0]
    teacher = Fake(0.5)
    root = make_targets(tmp_path, Fake(1.0), teacher, noise, text, uncond, sig, teacher_sig, 3.0, 2, 7, chunk=2,
                        progress=False)
    calls = teacher.calls
    ins, tgs, times, _ = load_targets(root)
    assert ins.shape == tgs.shape == (5, 2) + SHAPE[1:] and times == [0.7, 0.4]
    states = student_states(Fake(1.0), noise[2:4], sig, text[2:4], [9, 10], 2)  # the second chunk, by hand
    assert torch.allclose(ins[2:4, 1], states[2], atol=1e-6)
    want = teacher_from(Fake(0.5), states[2], 0.4, teacher_sig, text[2:4], uncond[2:4], 3.0)
    assert torch.allclose(tgs[2:4, 1], want, atol=1e-6)
    make_targets(tmp_path, Fake(1.0), teacher, noise, text, uncond, sig, teacher_sig, 3.0, 2, 7, chunk=2,
                 progress=False)
    assert teacher.calls == calls  # resumed: nothing recomputed
