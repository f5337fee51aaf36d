"""The headline table's matched values, on hand-made sweeps whose right answers are known.

:func:`kaleido.compare.analysis.matched_savings` gives each method's PSNR/SSIM at a target
self-attention q.k^T saving: linear interpolation between the two Pareto-optimal
settings nearest the target on either side, the setting itself within 0.5 points of it,
the best setting saving more when none saves less, and nothing when none saves more.
"""

from __future__ import annotations

import pytest

from kaleido.compare.analysis import SettingAggregate, matched_savings


def agg(method: str, k, saved: float, psnr: float, ssim: float) -> SettingAggregate:
    return SettingAggregate(method, {"k": k}, 1, psnr, ssim, psnr, saved, saved, saved)


def cell(aggs, target):
    (m,) = {a.method for a in aggs}
    return matched_savings(aggs, targets=(target,))[m][0]


def test_interpolates_linearly_between_the_bracketing_points():
    pts = [agg("m", 1, 0.4, 30.0, 0.9), agg("m", 2, 0.8, 10.0, 0.5)]
    lo = cell(pts, 0.5)  # a quarter of the way from 0.4 to 0.8
    assert lo.psnr == pytest.approx(25.0) and lo.ssim == pytest.approx(0.8)
    hi = cell(pts, 0.7)  # three quarters of the way
    assert hi.psnr == pytest.approx(15.0) and hi.ssim == pytest.approx(0.6)
    assert "interpolated" in lo.how and "k=1" in lo.how.split("..")[0] and "k=2" in lo.how.split("..")[1]
    # the order of the rows does not matter
    assert cell(pts[::-1], 0.5).psnr == pytest.approx(25.0)


def test_uses_the_nearest_pareto_points_on_each_side():
    pts = [
        agg("m", "far_lo", 0.2, 50.0, 0.99),
        agg("m", "lo", 0.4, 30.0, 0.9),
        agg("m", "dominated", 0.45, 10.0, 0.1),  # (0.8, 10 dB) saves more at the same PSNR: never picked
        agg("m", "hi", 0.8, 10.0, 0.5),
        agg("m", "far_hi", 0.9, 2.0, 0.3),
    ]
    c = cell(pts, 0.5)
    assert c.psnr == pytest.approx(25.0) and c.ssim == pytest.approx(0.8)
    assert "k=lo" in c.how and "k=hi" in c.how and "dominated" not in c.how
    c = cell(pts, 0.85)  # between 0.8 and 0.9: halfway
    assert c.psnr == pytest.approx(6.0) and c.ssim == pytest.approx(0.4)


def test_a_setting_at_the_target_is_taken_as_it_is():
    pts = [agg("m", 1, 0.4, 30.0, 0.9), agg("m", 2, 0.502, 21.0, 0.7), agg("m", 3, 0.8, 10.0, 0.5)]
    c = cell(pts, 0.5)
    assert (c.psnr, c.ssim) == (21.0, 0.7) and "k=2" in c.how


def test_only_settings_saving_more_give_the_best_of_them_and_none_saving_more_gives_nothing():
    above = [agg("m", 1, 0.6, 20.0, 0.8), agg("m", 2, 0.9, 12.0, 0.6)]
    c = cell(above, 0.5)
    assert (c.psnr, c.ssim) == (20.0, 0.8) and "saves more" in c.how  # conservative, never extrapolated
    below = [agg("m", 1, 0.1, 40.0, 0.95), agg("m", 2, 0.3, 30.0, 0.9)]
    c = cell(below, 0.5)
    assert c.psnr is None and c.ssim is None and "not reached" in c.how


def test_methods_are_matched_separately():
    aggs = [agg("a", 1, 0.4, 30.0, 0.9), agg("a", 2, 0.8, 10.0, 0.5),
            agg("b", 1, 0.0, 40.0, 1.0), agg("b", 2, 1.0, 20.0, 0.0)]
    out = matched_savings(aggs, targets=(0.5, 0.7))
    assert [c.psnr for c in out["a"]] == pytest.approx([25.0, 15.0])
    assert [c.psnr for c in out["b"]] == pytest.approx([30.0, 26.0])
    assert [c.ssim for c in out["b"]] == pytest.approx([0.5, 0.3])
    assert [c.target for c in out["a"]] == [0.5, 0.7]
