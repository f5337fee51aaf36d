"""The Pareto plot draws a legend only when something is labelled, so it never warns."""

from __future__ import annotations

import warnings

import pytest

from kaleido.compare.analysis import SettingAggregate, pareto_figure


def _agg(method: str, saved: float, psnr: float) -> SettingAggregate:
    return SettingAggregate(method=method, settings={}, n=1, psnr=psnr, ssim=0.9, psnr_min=psnr, self_qk_saved=saved,
                            self_qk_saved_net=saved, total_saved=saved / 2)


@pytest.mark.parametrize("aggs", [[], [_agg("tome", 0.3, 30.0), _agg("kaleido", 0.2, 35.0)]],
                         ids=["no settings", "two methods"])
def test_pareto_figure_emits_no_warning(aggs):
    # matplotlib's "No artists with labels found to put in legend" came from legend() on an empty plot
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        png = pareto_figure(aggs)
    assert png[:4] == b"\x89PNG"
