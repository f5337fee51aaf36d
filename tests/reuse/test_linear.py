import pytest
import torch
import torch.nn.functional as F

from kaleido.reuse import ChannelGroups, Mode, ReuseConfig, TokenGrid, reuse_linear

from .strategies import correlated_rows


def test_reuse_linear_dense_and_reused():
    grid = TokenGrid(3, 4, 4, prefix=2)
    groups = ChannelGroups.from_chunks(24, 8, ("t", "h", "w"))
    x = correlated_rows((2,), grid, 24, 5, step=0.5) / 40
    lin = torch.nn.Linear(24, 10).requires_grad_(False)
    y0, mm0, ops0 = reuse_linear(x, lin.weight, lin.bias, grid, groups, ReuseConfig.dense())
    assert torch.equal(y0, F.linear(x, lin.weight, lin.bias))
    assert not mm0.modes.any() and ops0.dense_macs == 2 * grid.seq_len * 24 * 10
    y, mm, ops = reuse_linear(x, lin.weight, lin.bias, grid, groups, ReuseConfig(2, 8))
    assert (mm.modes == Mode.FULL).any() and ops.saved_fraction > 0
    no_full = ~(mm.modes == Mode.FULL).any(-1)
    assert torch.allclose(y[no_full], y0[no_full], atol=1e-5)
    assert float((y - y0).norm() / y0.norm()) < 0.05
    y8, mm8, _ = reuse_linear(x, lin.weight, None, grid, groups, ReuseConfig(2, 8), exact_int8=True)
    assert torch.equal(mm8.modes, mm.modes)
    assert float((y8 + lin.bias - y).norm() / y.norm()) < 0.05


def test_reuse_linear_rejects_bad_input():
    grid = TokenGrid(1, 2, 2)
    groups = ChannelGroups.from_chunks(6, 3)
    x = torch.randn(1, 4, 6)
    with pytest.raises(ValueError, match="weight must be"):
        reuse_linear(x, torch.randn(5, 7), None, grid, groups, ReuseConfig(1, 2))
    with pytest.raises(ValueError, match="bias must be"):
        reuse_linear(x, torch.randn(5, 6), torch.randn(4), grid, groups, ReuseConfig(1, 2))
    with pytest.raises(ValueError, match="has 5 tokens"):
        reuse_linear(torch.randn(1, 5, 6), torch.randn(5, 6), None, grid, groups, ReuseConfig(1, 2))
