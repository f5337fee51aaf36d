"""The score-distillation phase: DMD's target by hand, and a few resumable steps on a tiny transformer."""

import torch

from kaleido.tiny.score_phase import dmd_target, train_score_phase, x0_of


def test_dmd_target_moves_x0_by_the_normalised_score_difference():
    x0 = torch.zeros(2, 1, 1, 1, 2)
    real = torch.tensor([1.0, -1.0]).view(1, 1, 1, 1, 2).expand(2, -1, -1, -1, -1).clone()  # |x0 - real| = 1
    real[1] *= 2  # second sample: |x0 - real| = 2
    fake = real + 0.5
    t = dmd_target(x0, real, fake)
    assert torch.allclose(t[0], torch.full_like(t[0], -0.5))  # x0 - (fake - real) / 1
    assert torch.allclose(t[1], torch.full_like(t[1], -0.25))  # x0 - (fake - real) / 2
    assert not t.requires_grad


def _tiny():
    from diffusers import WanTransformer3DModel

    torch.manual_seed(0)
    return WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=4,
                                 out_channels=4, text_dim=8, freq_dim=16, ffn_dim=16, num_layers=1,
                                 rope_max_seq_len=16).eval()


def _run(tmp, steps, student=None):
    g = torch.Generator().manual_seed(1)
    ins, tgs = torch.randn(6, 1, 4, 2, 4, 4, generator=g), torch.randn(6, 1, 4, 2, 4, 4, generator=g)
    text, uncond = torch.randn(6, 3, 8, generator=g), torch.zeros(6, 3, 8)
    return train_score_phase(tmp, student or _tiny(), _tiny(), ins, tgs, [0.6], text, uncond, torch.arange(2, 6),
                             steps=steps, lr=1e-3, fake_lr=1e-3, guidance=3.0, batch=2, log_every=1, ckpt_every=1,
                             val_idx=torch.arange(2), progress=False)


def test_a_few_steps_move_the_student_and_resume_where_they_stopped(tmp_path):
    before = _tiny()
    whole, _ = _run(tmp_path / "a", 3)
    assert any(not torch.equal(p, q) for p, q in zip(whole.parameters(), before.parameters()))
    _run(tmp_path / "b", 2)  # killed after two steps, then run to three
    resumed, _ = _run(tmp_path / "b", 3)
    for p, q in zip(whole.parameters(), resumed.parameters()):
        assert torch.allclose(p, q, atol=1e-6)
    x = torch.randn(1, 4, 2, 4, 4)
    assert x0_of(whole, x, torch.tensor([0.6]), torch.zeros(1, 3, 8)).shape == x.shape
