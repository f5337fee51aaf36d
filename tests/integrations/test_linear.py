"""The integration's linear path equals the reuse core's reuse_linear."""

from __future__ import annotations

import pytest
import torch

from kaleido.integrations.linear import decide_linear_operand
from kaleido.reuse import ChannelGroups, ReuseConfig, TokenGrid, reuse_linear


@pytest.mark.parametrize("granularity", ["group", "tensor", "head"])
@pytest.mark.parametrize("chunk,axes", [(8, "t"), (8, "w"), (12, "h"), (32, "t")])
def test_batched_chunks_equal_core(granularity, chunk, axes):
    torch.manual_seed(0)
    grid = TokenGrid(3, 4, 5, prefix=2)
    # per-channel offsets plus small token-to-token variation: reusable along every axis
    x = torch.randn(2, 1, 32) + 0.01 * torch.randn(2, 62, 32)
    x[:, 30:40] += 0.3 * torch.randn(2, 10, 32)  # and some tokens that must compute
    groups = ChannelGroups.from_chunks(32, chunk, axes)
    cfg = ReuseConfig(3.0, 8.0, granularity=granularity)
    w, b = torch.randn(16, 32), torch.randn(16)
    y_ref, mm_ref, _ = reuse_linear(x, w, b, grid, groups, cfg)
    mm, x_eff = decide_linear_operand(x, grid, groups, cfg)
    assert torch.equal(mm.modes, mm_ref.modes)
    assert mm.groups == groups and mm.grid == grid
    assert (mm.modes == 2).any()  # the test exercises reuse
    assert torch.allclose(torch.nn.functional.linear(x_eff, w, b), y_ref, atol=1e-5)
