"""The functional PE tile model agrees bit for bit with the reuse core's int8 path."""

import numpy as np
import pytest
import torch

import kaleido.reuse.config as cfg_mod
import kaleido.reuse.matmul as mm_mod
import kaleido.reuse.quant as q
from kaleido.hw.arch.kaleido_pe import PEMode, mode_cycle_cost, pack_pair, pe_tile_products, split_multiply
from kaleido.reuse import ChannelGroups, Mode, TokenGrid
from tests.hw.mode_maps import random_map


def test_split_multiplier_is_exact_for_every_operand_pair():
    for lb in (1, 2, 3, 4):
        lim = 1 << (lb - 1)
        d = np.arange(-lim, lim)
        b = np.arange(-128, 128)
        D1, D2, Bm = np.meshgrid(d, d[::-1], b, indexing="ij")
        p1, p2 = split_multiply(pack_pair(D1, D2, lb), Bm, lb)
        assert np.array_equal(p1, D1 * Bm) and np.array_equal(p2, D2 * Bm)


def test_pack_rejects_out_of_range_and_wide_fields():
    with pytest.raises(ValueError, match="4-bit"):
        pack_pair(np.array([8]), np.array([0]), 4)
    with pytest.raises(ValueError, match="low_bits <= 4"):
        pack_pair(np.array([1]), np.array([0]), 5)


def test_mode_costs():
    assert mode_cycle_cost(PEMode.COMPUTE, True) == 1.0
    assert mode_cycle_cost(PEMode.PACKED, True) == 0.5
    assert mode_cycle_cost(PEMode.PARTIAL, False) == 1.0
    assert mode_cycle_cost(PEMode.FULL, True) == 0.0


def _random_case(seed, low_bits, prefix=0, suffix=0):
    rng = np.random.default_rng(seed)
    grid = TokenGrid(3, 4, 5, prefix, suffix)
    groups = ChannelGroups.from_rope(6, 4, 6)
    S, K, N = grid.seq_len, groups.dim, 7
    # correlated operand: a smooth field plus small noise, so many differences fit
    base = rng.integers(-100, 100, size=(1, K))
    A = np.clip(base + np.cumsum(rng.integers(-2, 3, size=(S, K)), axis=0), -127, 127)
    B = rng.integers(-127, 128, size=(K, N))
    return grid, groups, torch.tensor(A, dtype=torch.int8), torch.tensor(B, dtype=torch.int8), rng


def _oracle(A_q, B_q, mm):
    """SPEC §3 semantics in plain numpy: C_g[i] = eff_g[i] . B_g."""
    A, B = A_q.numpy().astype(np.int64), B_q.numpy().astype(np.int64)
    m = mm.modes.numpy()
    out = []
    for g, (sl, axis) in enumerate(zip(mm.groups.slices, mm.groups.axes)):
        ref = mm.grid.ref_index(axis).numpy()
        eff = A[:, sl].copy()
        for j in range(mm.grid.n_grid):
            i = mm.grid.prefix + j
            if m[i, g] == Mode.FULL:
                eff[i] = eff[mm.grid.prefix + ref[j]]
        out.append(eff @ B[sl])
    return np.stack(out)


@pytest.mark.parametrize("low_bits", [2, 3, 4, 5])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tile_matches_spec_oracle(seed, low_bits):
    grid, groups, A, B, rng = _random_case(seed, low_bits, prefix=2 if seed == 1 else 0, suffix=3 if seed == 2 else 0)
    mm = random_map(A, grid, groups, low_bits, rng)
    assert (mm.modes.numpy() == Mode.PARTIAL).any() and (mm.modes.numpy() == Mode.FULL).any()
    assert np.array_equal(pe_tile_products(A, B, mm), _oracle(A, B, mm))


@pytest.mark.parametrize("low_bits", [3, 4, 6])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_tile_matches_reuse_matmul_bit_for_bit(seed, low_bits):
    rng = np.random.default_rng(100 + seed)
    grid = TokenGrid(3, 4, 6, 2 if seed % 2 else 0, 0)
    groups = ChannelGroups.from_rope(8, 6, 6)
    S, K, N = grid.seq_len, groups.dim, 9
    smooth = np.cumsum(rng.normal(0, 0.05, size=(S, K)), axis=0) + rng.normal(0, 1, size=(1, K))
    A = torch.tensor(smooth, dtype=torch.float32)
    B = torch.tensor(rng.normal(0, 1, size=(K, N)), dtype=torch.float32)
    lim = 2 ** (low_bits - 1)
    config = cfg_mod.ReuseConfig(theta1=1.0, theta2=float(lim), low_bits=low_bits)
    C, mode_map, _ = mm_mod.reuse_matmul(A, B, grid, groups, config, exact_int8=True)
    m = mode_map.modes.numpy()
    assert (m == Mode.PARTIAL).any() or (m == Mode.FULL).any(), "test data produced no reuse"
    A_q, scale_a = q.quantize(A, groups, config.granularity)
    B_q, scale_b = q.quantize_columns(B, "column")
    hw = pe_tile_products(A_q.to(torch.int64), B_q.to(torch.int64), mode_map)
    core = mm_mod.int8_group_products(A_q, B_q, mode_map, form="literal")
    for g in range(len(groups)):
        assert np.array_equal(hw[g], core[g].to(torch.int64).numpy())
    # and the dequantised output reuse_matmul returned, bit for bit
    acc = mm_mod.int8_acc_dtype(groups)
    C_hw = mm_mod.dequantize_group_products([torch.tensor(hw[g]).to(acc) for g in range(len(groups))], scale_a, scale_b, groups)
    assert torch.equal(C_hw.to(C.dtype), C)
