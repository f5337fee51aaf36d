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


@settings(max_examples=40, deadline=None)
@given(T=st.integers(1, 3), Hh=st.integers(1, 3), W=st.integers(1, 4), prefix=st.integers(0, 2),
       suffix=st.integers(0, 2), axis=st.sampled_from(["t", "h", "w"]), seed=st.integers(0, 999))
def test_skipped_rows_take_their_chains_anchor_row(T, Hh, W, prefix, suffix, axis, seed):
    """copy_skipped_rows (in place, a position at a time) = every skipped row gathering its chain's anchor
    (anchor_index of the skip map: the nearest earlier row along the axis that was not skipped)."""
    from kaleido.reuse.attention import copy_skipped_rows
    from kaleido.reuse.decide import anchor_index
    from kaleido.reuse.modes import ModeMap

    grid = TokenGrid(T, Hh, W, prefix=prefix, suffix=suffix)
    g = torch.Generator().manual_seed(seed)
    one = ChannelGroups((1,), (axis,), ("row",))
    # a random skip map that is valid: no row at position 0 of the axis, no row off the grid
    modes = (torch.rand(2, 3, grid.seq_len, 1, generator=g) < 0.6).to(torch.uint8) * int(Mode.FULL)
    pos = grid.to_lines(torch.arange(grid.n_grid).view(-1, 1), axis)  # (L, n_lines, 1)
    first = pos[0].flatten() + prefix
    modes[:, :, first] = 0
    modes[:, :, :prefix] = 0
    modes[:, :, prefix + grid.n_grid :] = 0
    skipped = modes[..., 0] == int(Mode.FULL)
    out = torch.randn(2, 3, grid.seq_len, 5, generator=g)
    src = anchor_index(ModeMap(modes, grid, one, 4))[..., 0]
    expected = out.gather(-2, src.unsqueeze(-1).expand(out.shape))
    qk = ModeMap(modes.expand(2, 3, grid.seq_len, 2).contiguous(), grid, ChannelGroups((2, 2), (axis, axis), ("a", "b")), 4)
    got = copy_skipped_rows(out.clone(), skipped, qk)
    assert torch.equal(got, expected)
