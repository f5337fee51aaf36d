"""PSNR/SSIM per frame, LPIPS skip reason, and video writing."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kaleido.metrics import compare_videos, psnr_per_frame, ssim_per_frame
from kaleido.video_io import read_video, side_by_side, to_uint8, upscale, write_gif, write_mp4, write_video_set


def _video(seed=0, f=4, h=16, w=20):
    rng = np.random.default_rng(seed)
    base = rng.random((1, h, w, 3))
    return np.clip(base + 0.02 * rng.standard_normal((f, h, w, 3)), 0, 1)


def test_psnr_ssim_known_values():
    a = _video()
    assert np.isinf(psnr_per_frame(a, a)).all()
    assert np.allclose(ssim_per_frame(a, a), 1.0)
    b = np.clip(a + 0.01, 0, 1)
    mse = ((a - b) ** 2).reshape(4, -1).mean(1)
    assert np.allclose(psnr_per_frame(a, b), 10 * np.log10(1 / mse))
    noisy = np.clip(a + 0.2 * np.random.default_rng(1).standard_normal(a.shape), 0, 1)
    assert (ssim_per_frame(a, noisy) < ssim_per_frame(a, b)).all()
    c = compare_videos(a, b)
    d = c.to_dict()
    assert len(d["psnr_db"]) == 4 and d["ssim_mean"] > 0.9 and d["max_abs_diff"] == pytest.approx(0.01, abs=1e-9)
    assert d["lpips"]["status"] in ("computed", "skipped")
    if d["lpips"]["status"] == "skipped":
        assert d["lpips"]["reason"]
    same = compare_videos(a, a, lpips=False).to_dict()
    assert same["psnr_mean_db"] == "inf" and same["identical_frames"] == 4
    assert math.isfinite(c.psnr_mean_db)


def test_bad_videos():
    a = _video()
    with pytest.raises(ValueError, match="shape"):
        psnr_per_frame(a, a[:2])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        psnr_per_frame(a * 3, a)
    with pytest.raises(ValueError, match="RGB"):
        psnr_per_frame(a[..., 0], a[..., 0])


def test_write_read_videos(tmp_path):
    yy, xx = np.mgrid[0:16, 0:20]
    smooth = np.stack([xx / 19, yy / 15, 0.5 + 0 * xx], -1)  # chroma-subsampling friendly
    a = np.stack([np.roll(smooth, k, axis=1) for k in range(5)])
    p = write_mp4(a, tmp_path / "a.mp4", fps=4)
    back = read_video(p)
    assert back.shape == (5, 16, 20, 3)
    assert np.abs(back.astype(float) - to_uint8(a).astype(float)).mean() < 8  # lossy but close
    g = write_gif(a, tmp_path / "a.gif")
    assert read_video(g).shape[0] == 5
    sbs = side_by_side(a, _video(1, f=5, h=16, w=20))
    assert sbs.shape == (5, 16, 3 * 20 + 4, 3) and sbs.dtype == np.uint8
    assert upscale(to_uint8(a), 2).shape == (5, 32, 40, 3)
    files = write_video_set(a[:, :15, :15], tmp_path / "odd", scale=1)  # odd size is padded for H.264
    assert read_video(files["mp4"]).shape[1:3] == (16, 16)
