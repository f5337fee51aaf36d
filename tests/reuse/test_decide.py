import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kaleido.reuse import (
    ChannelGroups,
    Mode,
    ModeMap,
    ReuseConfig,
    TokenGrid,
    anchor_index,
    decide,
    effective_operand,
)

from .naive import naive_decide
from .strategies import channel_groups, configs, correlated_int8, grids

FAST = settings(max_examples=40, deadline=None)


@FAST
@given(grid=grids(), groups=channel_groups(), cfg=configs(), seed=st.integers(0, 10_000))
def test_decide_matches_token_by_token_reference(grid, groups, cfg, seed):
    A_q = correlated_int8((), grid, groups.dim, seed)
    mm = decide(A_q, grid, groups, cfg)
    modes, eff = naive_decide(A_q, grid, groups, cfg)
    assert mm.modes.dtype == torch.uint8 and mm.modes.shape == (grid.seq_len, len(groups))
    assert torch.equal(mm.modes.long(), modes)
    # anchor_index reproduces the reference's effective operand
    assert torch.equal(effective_operand(A_q, mm).long(), eff)


@FAST
@given(grid=grids(), groups=channel_groups(), cfg=configs(), seed=st.integers(0, 10_000))
def test_decide_is_independent_per_leading_index(grid, groups, cfg, seed):
    A_q = correlated_int8((2, 3), grid, groups.dim, seed)
    mm = decide(A_q, grid, groups, cfg)
    assert mm.modes.shape == (2, 3, grid.seq_len, len(groups))
    for b in range(2):
        for h in range(3):
            assert torch.equal(mm.modes[b, h], decide(A_q[b, h], grid, groups, cfg).modes)


@FAST
@given(grid=grids(), groups=channel_groups(), cfg=configs(), seed=st.integers(0, 10_000))
def test_non_grid_rows_and_rows_without_reference_compute(grid, groups, cfg, seed):
    A_q = correlated_int8((2,), grid, groups.dim, seed)
    modes = decide(A_q, grid, groups, cfg).modes
    assert not modes[:, : grid.prefix].any()
    assert not modes[:, grid.prefix + grid.n_grid :].any()
    for g, axis in enumerate(groups.axes):
        first = grid.ref_index(axis) < 0  # position 0 along the group's axis
        assert not modes[:, grid.grid_slice, g][:, first].any()


def test_constant_rows_reuse_fully_except_first_along_axis():
    grid = TokenGrid(3, 4, 5, prefix=1, suffix=2)
    groups = ChannelGroups.from_rope(4, 4, 4)  # t->w, h->t, w->t
    A_q = torch.full((grid.seq_len, 12), 9, dtype=torch.int8)
    modes = decide(A_q, grid, groups, ReuseConfig(1, 2)).modes
    m = modes[grid.grid_slice].view(3, 4, 5, 3)
    assert (m[:, :, 0, 0] == Mode.COMPUTE).all() and (m[:, :, 1:, 0] == Mode.FULL).all()
    for g in (1, 2):
        assert (m[0, :, :, g] == Mode.COMPUTE).all() and (m[1:, :, :, g] == Mode.FULL).all()
    assert not modes[:1].any() and not modes[-2:].any()


@FAST
@given(grid=grids(), groups=channel_groups(), seed=st.integers(0, 10_000), lb=st.integers(1, 7))
def test_zero_thresholds_compute_everything(grid, groups, seed, lb):
    A_q = correlated_int8((2,), grid, groups.dim, seed)
    assert not decide(A_q, grid, groups, ReuseConfig(0, 0, low_bits=lb)).modes.any()


def test_drift_rule_on_a_long_slow_chain():
    """Rows creep by 1 int8 unit every other step: each step is 'close' to the previous
    row, yet the reused operand must never stray >= theta1 from the true row."""
    W = 240
    grid = TokenGrid(1, 1, W)
    groups = ChannelGroups((4,), ("w",), ("c",))
    ramp = (torch.arange(W) // 2 - 100).clamp(-127, 127)
    A_q = torch.stack([ramp, ramp, -ramp, ramp // 2], dim=1).to(torch.int8)
    theta1 = 3
    mm = decide(A_q, grid, groups, ReuseConfig(theta1, theta1))
    full = mm.modes[:, 0] == Mode.FULL
    assert int(full.sum()) > W // 2  # the chain is mostly reused ...
    eff = effective_operand(A_q, mm).long()
    drift = (eff - A_q.long()).abs().amax(-1)
    assert int(drift.max()) == theta1 - 1  # ... right up to, never beyond, the threshold
    # Comparing with the raw neighbour instead would reuse every row and drift by ~W/2 units.
    naive_drift = (A_q.long() - A_q[:1].long()).abs().amax(-1).max()
    assert int(naive_drift) > 100


def test_mean_abs_partial_requires_every_difference_to_fit():
    grid = TokenGrid(1, 1, 2)
    groups = ChannelGroups((4,), ("w",), ("c",))
    cfg = ReuseConfig(0.5, 12, low_bits=3, metric="mean_abs")  # fits: d in [-4, 3]
    base = torch.tensor([0, 0, 0, 0])
    for diff, mode in (([3, -4, 1, 0], Mode.PARTIAL), ([4, 0, 0, 0], Mode.COMPUTE), ([0, 1, 0, 0], Mode.FULL)):
        A_q = torch.stack([base, torch.tensor(diff)]).to(torch.int8)
        assert int(decide(A_q, grid, groups, cfg).modes[1, 0]) == mode


def test_anchor_index_follows_full_chains():
    grid = TokenGrid(1, 1, 6, prefix=1)
    groups = ChannelGroups((1, 1), ("w", "w"), ("a", "b"))
    modes = torch.tensor([[0, 0], [0, 0], [2, 1], [2, 2], [0, 2], [1, 2], [2, 0]], dtype=torch.uint8)
    anc = anchor_index(ModeMap(modes, grid, groups, 4))
    assert anc[:, 0].tolist() == [0, 1, 1, 1, 4, 5, 5]
    assert anc[:, 1].tolist() == [0, 1, 2, 2, 2, 2, 6]
    bad = modes.clone()
    bad[1, 0] = 2  # first grid token has no reference
    with pytest.raises(ValueError, match="no reference"):
        anchor_index(ModeMap(bad, grid, groups, 4))


def test_decide_rejects_bad_input():
    grid = TokenGrid(2, 2, 2)
    groups = ChannelGroups.from_rope(2, 2, 2)
    cfg = ReuseConfig(1, 4)
    A_q = torch.zeros(8, 6, dtype=torch.int8)
    with pytest.raises(ValueError, match="int8 operand"):
        decide(A_q.float(), grid, groups, cfg)
    with pytest.raises(ValueError, match="has 9 tokens but the grid 2x2x2"):
        decide(torch.zeros(9, 6, dtype=torch.int8), grid, groups, cfg)
    with pytest.raises(ValueError, match="sum to 6 channels but the operand A has 7"):
        decide(torch.zeros(8, 7, dtype=torch.int8), grid, groups, cfg)
    with pytest.raises(ValueError, match="at_step"):
        decide(A_q, grid, groups, ReuseConfig(1, 4, dense_steps=1))
    with pytest.raises(ValueError, match="unknown reuse axis 'x'"):
        ChannelGroups((2, 4), ("t", "x"), ("a", "b"))


@FAST
@given(grid=grids(), groups=channel_groups(), cfg=configs(), seed=st.integers(0, 10_000))
def test_decide_with_anchors_agrees_with_anchor_index(grid, groups, cfg, seed):
    from kaleido.reuse import decide_with_anchors

    A_q = correlated_int8((2,), grid, groups.dim, seed)
    mm, anchors = decide_with_anchors(A_q, grid, groups, cfg)
    assert torch.equal(mm.modes, decide(A_q, grid, groups, cfg).modes)
    assert torch.equal(anchors, anchor_index(mm))
    A = torch.randn(2, grid.seq_len, groups.dim).transpose(-1, -2).contiguous().transpose(-1, -2)  # strided view
    eff = effective_operand(A, mm, anchors)
    for g, sl in enumerate(groups.slices):
        idx = anchors[..., g : g + 1].expand(-1, -1, sl.stop - sl.start)
        assert torch.equal(eff[..., sl], torch.gather(A[..., sl], -2, idx))


@FAST
@given(grid=grids(), groups=channel_groups(max_groups=4), cfg=configs(), seed=st.integers(0, 10_000),
       gran=st.sampled_from(["group", "head", "tensor"]), dtype=st.sampled_from([torch.float32, torch.bfloat16]))
def test_decide_effective_equals_quantize_decide_gather(grid, groups, cfg, seed, gran, dtype):
    """The float path's fused decision = quantize -> decide (naive reference) -> gather, mode for mode and
    value for value, for strided operands (attention's (B, H, S, D) views) of any float dtype."""
    import dataclasses

    from kaleido.reuse import decide_effective, quantize

    from .strategies import correlated_rows

    cfg = dataclasses.replace(cfg, granularity=gran)
    A = correlated_rows((2,), grid, groups.dim, seed).to(dtype)
    A = A.unsqueeze(1).expand(2, 2, *A.shape[1:]).transpose(1, 2).contiguous().transpose(1, 2)  # (2, 2, S, K) strided
    mm, eff = decide_effective(A, grid, groups, cfg)
    A_q, _ = quantize(A, groups, gran)
    modes, _ = naive_decide(A_q.reshape(-1, *A_q.shape[-2:])[0], grid, groups, cfg)
    assert torch.equal(mm.modes[0, 0].long(), modes)
    assert torch.equal(mm.modes, decide(A_q, grid, groups, cfg).modes)
    ref = effective_operand(A, mm)
    assert eff.dtype == A.dtype and eff.stride() == A.stride() and torch.equal(eff, ref)


@FAST
@given(grid=grids(), groups=channel_groups(max_groups=4), cfg=configs(), seed=st.integers(0, 10_000),
       backend=st.sampled_from(["auto", "torch"]), dtype=st.sampled_from([torch.float32, torch.bfloat16]),
       prefix=st.integers(0, 2))
def test_decide_effective_into_out_and_in_place(grid, groups, cfg, seed, backend, dtype, prefix):
    """``out=`` (a buffer of other strides) and ``out=A`` (in place) give the modes and effective operand of a
    fresh copy, for strided operands with rows off the grid, on both backends."""
    import dataclasses

    from kaleido.reuse import decide_effective

    from .strategies import correlated_rows

    grid = dataclasses.replace(grid, prefix=prefix)
    A = correlated_rows((2,), grid, groups.dim, seed).to(dtype)
    A = A.unsqueeze(1).expand(2, 2, *A.shape[1:]).transpose(1, 2).contiguous().transpose(1, 2)  # (2, 2, S, K) strided
    mm, eff = decide_effective(A, grid, groups, cfg, backend=backend)
    buf = torch.full(A.shape, float("nan"), dtype=dtype)  # contiguous: strides other than A's
    mm_out, eff_out = decide_effective(A, grid, groups, cfg, backend=backend, out=buf)
    assert torch.equal(mm_out.modes, mm.modes)
    assert torch.equal(eff_out, eff) and (eff_out is buf or (cfg.theta1 == 0 and eff_out is A))
    own = A.clone()
    mm_in, eff_in = decide_effective(own, grid, groups, cfg, backend=backend, out=own)
    assert eff_in is own and torch.equal(mm_in.modes, mm.modes) and torch.equal(own, eff)


def test_decide_effective_rejects_a_wrong_out():
    from kaleido.reuse import decide_effective

    grid = TokenGrid(2, 2, 2)
    A = torch.randn(grid.seq_len, 8)
    groups = ChannelGroups.from_chunks(8, 4, "t")
    for bad in (torch.empty(grid.seq_len, 4), torch.empty(grid.seq_len, 8, dtype=torch.float64)):
        with pytest.raises(ValueError, match="out must match A"):
            decide_effective(A, grid, groups, ReuseConfig(2, 4), out=bad)


def test_decide_effective_reuses_and_keeps_device_dtype():
    """A smooth operand gets FULL rows, and the effective row of a FULL row is its anchor's (not its own) row."""
    from kaleido.reuse import decide_effective

    grid = TokenGrid(3, 2, 2)
    A = torch.ones(grid.seq_len, 4, dtype=torch.float16)
    A[4:] += 0.01  # frame 1 and 2 nearly equal frame 0 -> FULL along t
    mm, eff = decide_effective(A, grid, ChannelGroups.from_chunks(4, 2, "t"), ReuseConfig(3, 4, low_bits=3))
    assert (mm.modes[4:] == int(Mode.FULL)).all() and (mm.modes[:4] == int(Mode.COMPUTE)).all()
    assert eff.dtype == torch.float16 and eff.device == A.device
    assert torch.equal(eff, torch.ones_like(A)) and not torch.equal(eff, A)


@settings(max_examples=15, deadline=None)
@given(grid=grids(), groups=channel_groups(), cfg=configs(), seed=st.integers(0, 10_000))
def test_decide_effective_in_blocks_equals_in_one_go(grid, groups, cfg, seed):
    """Deciding the grid's lines a block at a time (bounded temporaries) changes nothing."""
    import importlib

    dec = importlib.import_module("kaleido.reuse.decide")  # the module (kaleido.reuse.decide is the function)

    from .strategies import correlated_rows

    A = correlated_rows((2,), grid, groups.dim, seed)
    whole = dec.decide_effective(A, grid, groups, cfg, backend="torch")  # (the kernel does not block)
    saved = dec.BLOCK_ELEMENTS
    try:
        dec.BLOCK_ELEMENTS = 3  # blocks of one line index
        blocked = dec.decide_effective(A, grid, groups, cfg, backend="torch")
    finally:
        dec.BLOCK_ELEMENTS = saved
    assert torch.equal(whole[0].modes, blocked[0].modes) and torch.equal(whole[1], blocked[1])
