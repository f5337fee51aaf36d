"""PSNR and SSIM of kaleido.metrics against scikit-image run with the settings the module claims.

``kaleido.metrics`` says: PSNR with peak 1.0 over each whole RGB frame; SSIM is scikit-image's with
a uniform (not Gaussian) 7x7 window, averaged over the three channels, ``data_range=1`` - and, on a
frame smaller than 7 pixels, the largest odd window that fits.
"""

import numpy as np
import pytest
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

from kaleido.metrics import psnr_per_frame, ssim_per_frame


def _pair(f=3, h=24, w=32, seed=0, noise=0.05):
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    base = np.stack([np.sin(xx / 3.0 + k) * np.cos(yy / 4.0) for k in range(3)], -1) * 0.4 + 0.5
    ref = np.stack([np.roll(base, t, axis=1) for t in range(f)])
    test = np.clip(ref + noise * rng.standard_normal(ref.shape), 0, 1)
    return ref, test


def test_psnr_equals_scikit_image_with_peak_one():
    ref, test = _pair()
    want = [peak_signal_noise_ratio(r, t, data_range=1.0) for r, t in zip(ref, test)]
    assert psnr_per_frame(ref, test) == pytest.approx(want, rel=1e-12)
    # and by hand for one frame: 10 log10(1 / MSE over all pixels and channels)
    mse = np.mean((ref[0] - test[0]) ** 2)
    assert psnr_per_frame(ref, test)[0] == pytest.approx(10 * np.log10(1.0 / mse), rel=1e-12)
    # a peak of 255 (uint8 thinking) would be 48 dB higher: not what is reported
    assert psnr_per_frame(ref, test)[0] < peak_signal_noise_ratio(ref[0], test[0], data_range=255.0) - 40


def test_ssim_is_the_uniform_7x7_window_averaged_over_channels():
    ref, test = _pair()
    got = ssim_per_frame(ref, test)
    want = [structural_similarity(r, t, data_range=1.0, channel_axis=-1, win_size=7, gaussian_weights=False)
            for r, t in zip(ref, test)]
    assert got == pytest.approx(want, rel=1e-12)
    # channel-averaged: the mean of the three single-channel SSIMs
    per_channel = [structural_similarity(ref[0][..., c], test[0][..., c], data_range=1.0, win_size=7) for c in range(3)]
    assert got[0] == pytest.approx(np.mean(per_channel), rel=1e-12)
    # the settings matter on this pair: another window, a Gaussian window or scikit-image's default
    # data range for floats (2.0, as if the values spanned [-1, 1]) give other values
    others = {
        "5x5": structural_similarity(ref[0], test[0], data_range=1.0, channel_axis=-1, win_size=5),
        "9x9": structural_similarity(ref[0], test[0], data_range=1.0, channel_axis=-1, win_size=9),
        "gaussian": structural_similarity(ref[0], test[0], data_range=1.0, channel_axis=-1, gaussian_weights=True),
        "range 2": structural_similarity(ref[0], test[0], data_range=2.0, channel_axis=-1, win_size=7),
    }
    for name, v in others.items():
        assert abs(v - got[0]) > 1e-3, name


def test_ssim_on_a_frame_smaller_than_the_window_takes_the_largest_odd_one_that_fits():
    ref, test = _pair(f=2, h=6, w=10)  # 6 rows: a 7x7 window does not fit, a 5x5 one does
    want = [structural_similarity(r, t, data_range=1.0, channel_axis=-1, win_size=5) for r, t in zip(ref, test)]
    assert ssim_per_frame(ref, test) == pytest.approx(want, rel=1e-12)
    assert abs(structural_similarity(ref[0], test[0], data_range=1.0, channel_axis=-1, win_size=3) - want[0]) > 1e-3


def test_rate_interval_is_wilsons():
    from kaleido.metrics import rate_interval

    # scipy.stats.binomtest(k, n).proportion_ci(method="wilson"), recorded
    assert rate_interval(9, 64) == pytest.approx((0.075786, 0.246163), abs=1e-6)
    assert rate_interval(6, 64) == pytest.approx((0.043678, 0.189829), abs=1e-6)
    lo, hi = rate_interval(0, 10)
    assert lo == 0.0 and 0.0 < hi < 0.35  # not empty at no successes
    with pytest.raises(ValueError, match="successes=11 of n=10"):
        rate_interval(11, 10)
