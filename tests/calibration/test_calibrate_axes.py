"""Calibrated chunk axes follow the direction in which the video does not change."""

from __future__ import annotations

import pytest
import torch

import kaleido
from kaleido.techniques.kaleido_reuse import KaleidoConfig
from kaleido.calibration.axes import calibrate_axes
from kaleido.reuse import ReuseConfig


@pytest.mark.parametrize("constant_axis", ["t", "w"])
def test_calibration_picks_the_constant_axis(constant_axis, wan_model):
    model = wan_model
    g = torch.Generator().manual_seed(0)
    if constant_axis == "t":
        x = torch.randn(1, 4, 1, 8, 8, generator=g).expand(-1, -1, 4, -1, -1)
    else:
        x = torch.randn(1, 4, 4, 8, 1, generator=g).expand(-1, -1, -1, -1, 8)
    x, e = x.contiguous(), torch.randn(1, 7, 16, generator=g)

    def run():
        with torch.no_grad():
            model(x, torch.tensor([500.0]), e)

    base = KaleidoConfig(reuse=ReuseConfig(2.0, 8.0))
    cfg, table = calibrate_axes(model, run, base)
    assert not kaleido.techniques.kaleido_reuse.is_applied(model)
    assert set(table["proj"]["0"]) == {"t", "h", "w"}
    assert cfg.op_config("proj", 0).axes == (constant_axis,)
    assert table["proj"]["0"][constant_axis] > 0.5
    assert KaleidoConfig.from_yaml(cfg.to_yaml()) == cfg  # calibrated axes are part of the saved config
    with pytest.raises(ValueError, match="unknown switches"):
        calibrate_axes(model, run, base, switches=("mlp",))
