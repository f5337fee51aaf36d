"""The RTL tiles and dispatcher agree with the reuse core bit for bit and with kaleido.hw cycle for cycle.

Random tiles (hypothesis): int8 operands, a token grid with a non-grid prefix row, 1-3
channel groups filling a 4-row tile, valid mode maps of every mix (PARTIAL only where the
difference to the reference's effective operand fits ``low_bits``), both RTL dispatcher
levels and random dispatch windows. The outputs must equal
``kaleido.reuse.int8_group_products`` (the int8 path of ``reuse_matmul``) and the cycles
what ``kaleido.hw`` charges (``kaleido.hw.rtl.harness.model_tile``).
"""

import numpy as np
import pytest
import torch

pytest.importorskip("amaranth")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kaleido.reuse import ChannelGroups, Mode, ModeMap, TokenGrid, int8_group_products, reuse_matmul  # noqa: E402
from kaleido.reuse import ReuseConfig, quantize, quantize_columns  # noqa: E402
from kaleido.hw.rtl.harness import RTL_LEVELS, model_dense_cycles, model_tile, run_dense_tile, run_kaleido_tile  # noqa: E402
from tests.hw.mode_maps import random_map  # noqa: E402


def core_products(A, B, mm):
    got = int8_group_products(torch.tensor(A, dtype=torch.int8), torch.tensor(B, dtype=torch.int8), mm)
    return np.stack([g.to(torch.int64).numpy() for g in got])


@st.composite
def tiles(draw):
    rows = 4
    n_groups = draw(st.integers(1, 3))
    cuts = sorted(draw(st.sets(st.integers(1, rows - 1), min_size=n_groups - 1, max_size=n_groups - 1)))
    sizes = tuple(b - a for a, b in zip([0, *cuts], [*cuts, rows]))
    axes = tuple(draw(st.sampled_from("thw")) for _ in sizes)
    grid = TokenGrid(draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(2, 3)), 1, 0)
    low_bits = draw(st.sampled_from([2, 3, 4, 5]))
    seed = draw(st.integers(0, 2**16))
    p_full = draw(st.sampled_from([0.0, 0.3, 0.6]))
    level = draw(st.sampled_from(RTL_LEVELS))
    window = draw(st.integers(rows, grid.seq_len + 2))
    return sizes, axes, grid, low_bits, seed, p_full, level, window


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiles())
def test_random_tiles_outputs_and_cycles_equal_the_model(case):
    sizes, axes, grid, low_bits, seed, p_full, level, window = case
    rng = np.random.default_rng(seed)
    groups = ChannelGroups(sizes, axes, tuple(f"g{i}" for i in range(len(sizes))))
    S, K, N, cols = grid.seq_len, groups.dim, 3, 4
    lim = 1 << (low_bits - 1)
    A = np.clip(rng.integers(-90, 90, (1, K)) + np.cumsum(rng.integers(-lim // 2, lim // 2 + 1, (S, K)), 0), -128, 127)
    B = rng.integers(-128, 128, (K, N))
    rest = 1.0 - p_full
    mm = random_map(A, grid, groups, low_bits, rng, [rest / 2, rest / 2, p_full])
    run = run_kaleido_tile(A, B, mm, cols=cols, window_rows=window, level=level)
    model = model_tile(mm, N, cols, window, level)
    assert np.array_equal(run.products, core_products(A, B, mm))
    assert run.idle_lane_taps == 0
    assert run.stream == model.stream
    if run.stream >= K:
        assert run.cycles == model.cycles
    else:  # a stream shorter than the tile: the model charges the fold max(T, R) (see docs/hardware.md, RTL)
        assert model.cycles - run.cycles == K - run.stream


def test_every_mode_and_both_lanes_are_exercised():
    """A hand-made map with COMPUTE, PARTIAL, PACKED pairs, complementary pairs and FULL rows, low_bits 4."""
    grid = TokenGrid(1, 2, 6, 0, 0)
    groups = ChannelGroups((2, 2), ("w", "w"), ("a", "b"))
    C, P, F = Mode.COMPUTE, Mode.PARTIAL, Mode.FULL
    modes = np.array([[C, C], [P, P], [P, P], [C, F], [F, C], [F, F], [C, C], [P, F], [F, P], [P, P], [F, F], [C, P]],
                     np.uint8)
    rng = np.random.default_rng(3)
    A = np.clip(40 + np.cumsum(rng.integers(-3, 4, (12, 4)), 0), -128, 127)
    mm = ModeMap(torch.tensor(modes), grid, groups, 4)
    B = rng.integers(-128, 128, (4, 4))
    run = run_kaleido_tile(A, B, mm, window_rows=12)
    assert np.array_equal(run.products, core_products(A, B, mm))
    lanes = [s for s in run.slots if s[1] >= 0]
    assert len(lanes) >= 3, "the matcher paired too few tokens for this map"
    model = model_tile(mm, 4, 4, 12)
    assert (run.stream, run.cycles) == (model.stream, model.cycles)
    assert run.stream < model_tile(mm, 4, 4, 12, level="none").stream


@pytest.mark.parametrize("low_bits", [3, 4])
def test_maps_decided_by_reuse_matmul(low_bits):
    """Tiles whose modes come from the reuse core's own decision on a smooth operand."""
    rng = np.random.default_rng(7 + low_bits)
    grid = TokenGrid(2, 3, 4, 1, 0)
    groups = ChannelGroups.from_rope(2, 3, 3)
    S, K, N = grid.seq_len, groups.dim, 5
    A = torch.tensor(np.cumsum(rng.normal(0, 0.01, (S, K)), 0) + rng.normal(0, 1, (1, K)), dtype=torch.float32)
    B = torch.tensor(rng.normal(0, 1, (K, N)), dtype=torch.float32)
    config = ReuseConfig(theta1=2.0, theta2=float(1 << (low_bits - 1)), low_bits=low_bits)
    _, mm, _ = reuse_matmul(A, B, grid, groups, config, exact_int8=True)
    m = mm.modes.numpy()
    assert (m == Mode.PARTIAL).any() and (m == Mode.FULL).any()
    A_q, _ = quantize(A, groups, config.granularity)
    B_q, _ = quantize_columns(B, "column")
    run = run_kaleido_tile(A_q, B_q, mm, cols=8, window_rows=8)
    assert np.array_equal(run.products, core_products(A_q.numpy(), B_q.numpy(), mm))
    model = model_tile(mm, N, 8, 8)
    assert (run.stream, run.cycles) == (model.stream, model.cycles)


@pytest.mark.parametrize("M", [4, 9])
def test_dense_tile_products_and_cycles(M):
    rng = np.random.default_rng(M)
    A, B = rng.integers(-128, 128, (M, 4)), rng.integers(-128, 128, (4, 3))
    run = run_dense_tile(A, B, cols=4)
    assert np.array_equal(run.products[0], A @ B)
    assert run.cycles == model_dense_cycles(M, 4, 3, 4)
