"""The measurement helpers: latent spectrum, linear flow-matching baseline, validation loss, PSNR."""

import numpy as np
import torch

from kaleido.tiny.evaluate import fit_linear_predictors, linear_predict, psnr01
from kaleido.tiny.latents import latent_spectrum
from kaleido.tiny.train_transformer import fixed_validation_draws, validation_loss_per_sigma


def test_latent_spectrum_counts_the_channels_in_use():
    gen = torch.Generator().manual_seed(0)
    basis = torch.randn(16, 2, generator=gen)
    coeff = torch.randn(64, 2, 3, 4, 4, generator=gen)
    latents = torch.einsum("ck,nkthw->ncthw", basis, coeff)  # rank-2 channel covariance
    spec = latent_spectrum(latents)
    assert spec["channels_for_99pct"] == 2
    assert 1.0 <= spec["participation_ratio"] <= 2.0
    assert abs(sum(spec["variance_fraction"]) - 1.0) < 1e-3


def test_linear_baseline_is_exact_when_latents_are_constant():
    # x0 = 0 -> x_t = sigma * eps and v = eps: the best channel map is identity / sigma, loss 0
    x0 = torch.zeros(8, 4, 2, 3, 3)
    sigmas = [0.25, 0.75]
    maps = fit_linear_predictors(x0, sigmas, n_clips=8)
    assert torch.allclose(maps[0][:-1], torch.eye(4) / 0.25, atol=1e-3)
    noise = fixed_validation_draws(len(x0), tuple(x0.shape[1:]), sigmas)
    text = torch.zeros(len(x0), 1, 1)
    losses = [validation_loss_per_sigma(lambda x, s, t, k=k: linear_predict(maps[k], x), x0, text, [sig], noise[k : k + 1])[0]
              for k, sig in enumerate(sigmas)]
    assert max(losses) < 1e-6
    # a predictor that ignores its input has the variance of v as its loss (~1 for unit noise)
    zero = validation_loss_per_sigma(lambda x, s, t: torch.zeros_like(x), x0, text, sigmas, noise)
    assert all(0.8 < z < 1.2 for z in zero)


def test_psnr01():
    a = np.zeros((2, 4, 4, 3))
    assert psnr01(a, a + 0.1) == pytest_approx(20.0)


def pytest_approx(x):
    import pytest

    return pytest.approx(x, abs=1e-6)
