"""kaleido.reuse.example: the seeded synthetic head and the demo run on it."""

from __future__ import annotations

import pytest
import torch

from kaleido.reuse import TokenGrid
from kaleido.reuse.example import run_example, synthetic_qkv


def test_synthetic_qkv_is_seeded_and_shaped_like_a_rope_head():
    grid = TokenGrid(2, 4, 4, prefix=1, suffix=2)
    q, k, v = synthetic_qkv(grid, (4, 6, 6), heads=3, seed=5)
    assert q.shape == k.shape == v.shape == (1, grid.seq_len, 3, 16) and q.dtype == torch.float32
    again = synthetic_qkv(grid, (4, 6, 6), heads=3, seed=5)
    assert all(torch.equal(a, b) for a, b in zip((q, k, v), again))
    assert not torch.equal(q, synthetic_qkv(grid, (4, 6, 6), heads=3, seed=6)[0])
    assert not torch.equal(q, k)


def test_run_example_saves_some_and_stays_close_to_dense():
    res = run_example(3.0, 8.0, seed=1)
    assert 0.0 < res["qk_ops"]["saved_fraction"] < 1.0
    assert 0.0 < res["relative_error"] < 0.05
    dense = run_example(0.0, 0.0, seed=1)
    assert dense["qk_ops"]["saved_fraction"] == 0.0 and dense["max_abs_error"] < 1e-5
    with pytest.raises(ValueError, match="theta1=5.0 > theta2=3.0"):
        run_example(5.0, 3.0)
