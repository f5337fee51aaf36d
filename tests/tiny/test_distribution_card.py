"""The distribution card's measures (:mod:`kaleido.tiny.distribution_card`): the features of hand-built videos
and the Frechet distance against its closed form."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kaleido.tiny.distribution_card import (N_FEATURES, fd_with_interval, frechet_distance, standardise,
                                            video_features)


def _square_video(t=9, size=16, colour=(1.0, 0.0, 0.0), dx=1):
    """A 4x4 square of ``colour`` moving ``dx`` pixels right per frame on grey."""
    v = np.full((t, size, size, 3), 0.5)
    for k in range(t):
        x = 2 + dx * k
        v[k, 6:10, x:x + 4] = colour
    return v


def test_features_of_a_moving_red_square_by_hand():
    v = _square_video()
    f = video_features(v)
    assert f.shape == (N_FEATURES,)
    # the square moves right 1 px / frame: first third (frames 0-2) centroid x (3.5 + 1) / 16, last (6-8) (3.5 + 7) / 16
    assert f[18] == pytest.approx(6 / 16) and f[19] == pytest.approx(0.0)
    # saturation: 16 of 256 pixels at 1, the rest 0
    assert f[15] == pytest.approx(16 / 256)
    # a still grey video: no saturation, no change, no motion, quadrant means 0.5
    g = video_features(np.full((5, 8, 8, 3), 0.5))
    assert np.allclose(g[:12], 0.5) and np.allclose(g[12:], 0.0)
    with pytest.raises(ValueError, match=r"\(T, H, W, 3\)"):
        video_features(np.zeros((4, 8, 8)))


def test_frechet_distance_of_1d_gaussians_is_the_closed_form():
    rng = np.random.default_rng(0)
    a = rng.normal(0.0, 1.0, size=(4000, 1))
    b = rng.normal(2.0, 3.0, size=(4000, 1))
    # (mu_a - mu_b)^2 + (s_a - s_b)^2 for 1-D Gaussians, with the samples' own moments
    expected = (a.mean() - b.mean()) ** 2 + (a.std(ddof=1) - b.std(ddof=1)) ** 2
    assert frechet_distance(a, b) == pytest.approx(expected, rel=1e-6)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000), st.floats(-3, 3))
def test_frechet_distance_is_zero_on_itself_and_grows_with_a_shift(seed, shift):
    x = np.random.default_rng(seed).normal(size=(200, 3))
    assert frechet_distance(x, x) == pytest.approx(0.0, abs=1e-6)
    assert frechet_distance(x, x + shift) == pytest.approx(3 * shift ** 2, abs=1e-6)


def test_standardise_and_interval():
    rng = np.random.default_rng(1)
    ref = rng.normal(5.0, 2.0, size=(300, 2))
    other = rng.normal(5.0, 2.0, size=(300, 2))
    ref_z, other_z = standardise(ref, other)
    assert np.allclose(ref_z.mean(0), 0) and np.allclose(ref_z.std(0), 1)
    fd, (lo, hi) = fd_with_interval(ref_z, other_z, n=100)
    assert lo <= fd <= hi and fd < 0.2
    far, (flo, _) = fd_with_interval(ref_z, other_z + 2.0, n=100)
    assert flo > hi and far == pytest.approx(8.0, abs=1.0) and flo <= far


def test_merge_rows_replaces_named_rows_and_keeps_the_rest_in_card_order():
    from kaleido.tiny.distribution_card import merge_rows

    base = dict(prompts=["a"], seeds=[0], reference_seeds=[10000], features=N_FEATURES, seconds=10.0)
    kept = {**base, "rows": [dict(name="teacher-25", fd=1.0), dict(name="tiny-rcm consistency", fd=5.0)]}
    fresh = {**base, "seconds": 3.0, "rows": [dict(name="tiny-rcm consistency", fd=4.0)]}
    out = merge_rows(kept, fresh)
    assert [(r["name"], r["fd"]) for r in out["rows"]] == [("teacher-25", 1.0), ("tiny-rcm consistency", 4.0)]
    assert out["seconds"] == 10.0
    with pytest.raises(SystemExit, match="other seeds"):
        merge_rows(kept, {**fresh, "seeds": [0, 1]})


def test_probe_fields_give_each_rate_its_interval():
    from kaleido.tiny.distribution_card import probe_fields

    f = probe_fields(60 / 64, 9 / 64, 64)
    assert f["colour_rate"] == 60 / 64 and f["direction_rate"] == 9 / 64
    assert f["direction_ci95"] == pytest.approx([0.0758, 0.2462])
    assert f["colour_ci95"][0] < 60 / 64 < f["colour_ci95"][1] <= 1.0
