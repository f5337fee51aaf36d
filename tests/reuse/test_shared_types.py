"""Round trips of the shared types as the core uses them."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kaleido.reuse import Mode, ModeMap, OpCounts, ReuseConfig, decide, quantize

from .strategies import channel_groups, correlated_rows, grids

FAST = settings(max_examples=30, deadline=None)


@FAST
@given(grid=grids(), groups=channel_groups(), seed=st.integers(0, 10_000), lead=st.integers(1, 3))
def test_mode_map_pack_round_trip(grid, groups, seed, lead):
    A = correlated_rows((lead,), grid, groups.dim, seed) / 50
    A_q, _ = quantize(A, groups)
    mm = decide(A_q, grid, groups, ReuseConfig(2, 6))
    packed = mm.pack()
    assert packed.numel() == (mm.modes.numel() + 3) // 4
    back = ModeMap.from_packed(packed, mm.meta())
    assert torch.equal(back.modes, mm.modes) and back.grid == grid and back.groups == groups


@FAST
@given(grid=grids(), axis=st.sampled_from("thw"), c=st.integers(1, 3))
def test_to_lines_from_lines_round_trip(grid, axis, c):
    x = torch.randn(2, grid.n_grid, c)
    lines = grid.to_lines(x, axis)
    assert lines.shape[0] == grid.axis_len(axis)
    assert torch.equal(grid.from_lines(lines, axis), x)
    # consecutive positions of a line are reference -> token along the axis
    idx = torch.arange(grid.n_grid).view(grid.n_grid, 1)
    il = grid.to_lines(idx, axis)[..., 0]
    ref = grid.ref_index(axis)
    assert torch.equal(ref[il[1:]], il[:-1]) and bool((ref[il[0]] == -1).all())


def test_op_counts_add_and_summarise():
    a = OpCounts(("t", "h"), (10, 0), (4, 8), (6, 12), 4)
    b = OpCounts(("t", "h"), (20, 20), (0, 0), (0, 0), 4)
    s = a + b
    assert s.dense_macs == a.dense_macs + b.dense_macs == 80
    assert s.equiv8_macs == 50 + 12 * 4 / 8
    assert "8-bit-equivalent saving" in s.summary()
    assert OpCounts.from_dict(s.to_dict()) == s
    assert int(Mode.FULL) == 2
