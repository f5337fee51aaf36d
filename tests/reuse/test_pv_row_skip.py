"""The exact P.V row skip (SPEC §4): a query row FULL in every group with one anchor takes its anchor's output,
counted as skipped P.V; a row FULL along two axes is not skipped; theta = 0 stays dense."""

import torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st

from kaleido.reuse import ChannelGroups, ReuseConfig, TokenGrid
from kaleido.reuse.attention import pv_row_skip, reuse_attention
from kaleido.reuse.modes import Mode


def _qkv(grid, H=2, D=12, Sk=None, seed=0, smooth=True):
    g = torch.Generator().manual_seed(seed)
    S = grid.seq_len
    base = torch.randn(1, 1, H, D, generator=g)
    q = base + (0.01 if smooth else 1.0) * torch.randn(1, S, H, D, generator=g)
    Sk = Sk or S
    return q, torch.randn(1, Sk, H, D, generator=g), torch.randn(1, Sk, H, D, generator=g)


def _one_axis(axis="w"):
    return ChannelGroups((4, 4, 4), (axis, axis, axis), ("t", "h", "w"))


def test_a_row_full_in_every_group_with_one_anchor_copies_its_anchor_and_skips_pv():
    grid = TokenGrid(2, 3, 4)
    q, k, v = _qkv(grid)
    out, stats = reuse_attention(q, k, v, grid, _one_axis(), ReuseConfig(theta1=64, theta2=64, low_bits=7))
    skipped = stats.pv_skipped_rows
    assert skipped is not None and skipped.any()
    modes = stats.qk_modes.modes  # (B, H, S, G)
    assert torch.equal(skipped, (modes == int(Mode.FULL)).all(-1))
    # every skipped row's output is its w-neighbour's (the reference it copied every group from)
    o = out.transpose(1, 2)  # (B, H, S, Dv)
    for h in range(q.shape[2]):
        for s in torch.nonzero(skipped[0, h]).flatten().tolist():
            assert s % grid.W != 0  # a FULL along w always has a reference
            assert torch.equal(o[0, h, s], o[0, h, s - 1])
    # and the anchor's output is what dense attention gives on the effective query (no error added)
    Sk, Dv = k.shape[1], v.shape[-1]
    n = q.shape[0] * q.shape[2] * grid.seq_len * Sk * Dv
    assert stats.pv_ops.dense_macs == n
    assert stats.pv_ops.total_skipped == int(skipped.sum()) * Sk * Dv > 0


def test_a_row_full_along_two_axes_is_not_skipped():
    grid = TokenGrid(2, 3, 4)
    q, k, v = _qkv(grid)
    groups = ChannelGroups((4, 4, 4), ("w", "t", "t"), ("t", "h", "w"))  # the default's axes: two anchors
    _, stats = reuse_attention(q, k, v, grid, groups, ReuseConfig(theta1=64, theta2=64, low_bits=7))
    assert ((stats.qk_modes.modes == int(Mode.FULL)).all(-1)).any()  # rows FULL in every group exist...
    assert stats.pv_skipped_rows is None and pv_row_skip(stats.qk_modes) is None  # ...but none is skipped
    assert stats.pv_ops.total_skipped == 0


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), axis=st.sampled_from(["t", "h", "w"]))
def test_theta_zero_is_exactly_dense_with_the_row_skip(seed, axis):
    grid = TokenGrid(2, 3, 3)
    q, k, v = _qkv(grid, seed=seed, smooth=False)
    out, stats = reuse_attention(q, k, v, grid, _one_axis(axis), ReuseConfig(theta1=0, theta2=0))
    ref = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)
    assert torch.equal(out, ref)
    assert not stats.pv_skipped_rows.any() and stats.pv_ops.total_skipped == 0


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), axis=st.sampled_from(["t", "h", "w"]))
def test_skipped_rows_equal_attention_on_the_effective_query(seed, axis):
    """Copying the anchor's output row gives what computing the row would (it has the anchor's operands)."""
    from kaleido.reuse import decide_effective

    grid = TokenGrid(2, 3, 3)
    q, k, v = _qkv(grid, seed=seed)
    cfg = ReuseConfig(theta1=48, theta2=64, low_bits=7)
    out, stats = reuse_attention(q, k, v, grid, _one_axis(axis), cfg)
    _, q_eff = decide_effective(q.transpose(1, 2), grid, _one_axis(axis), cfg)
    ref = F.scaled_dot_product_attention(q_eff, k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
