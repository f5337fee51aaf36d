"""Neighbour statistics agree with a direct computation of the SPEC's Delta and the cosine."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from kaleido.characterize import AXES, NeighbourStats, best_axis, hist_quantile, neighbour_stats
from kaleido.reuse import ChannelGroups, TokenGrid, quantize

GRID = TokenGrid(3, 4, 5)
GROUPS = ChannelGroups.from_rope(4, 6, 6)


def _direct(A: torch.Tensor, grid: TokenGrid, groups: ChannelGroups, metric: str):
    """Per (head, group, axis): the list of Deltas and cosines, token by token through ref_index."""
    A_q, _ = quantize(A, groups)
    M, H = A.shape[:2]
    out = {}
    for j, axis in enumerate(AXES):
        ref = grid.ref_index(axis)
        for g, sl in enumerate(groups.slices):
            for h in range(H):
                deltas, coss = [], []
                for m in range(M):
                    for i in range(grid.n_grid):
                        r = int(ref[i])
                        if r < 0:
                            continue
                        d = (A_q[m, h, grid.prefix + i, sl].int() - A_q[m, h, grid.prefix + r, sl].int()).abs()
                        deltas.append(int(d.max()) if metric == "linf" else math.floor(float(d.float().mean())))
                        coss.append(float(F.cosine_similarity(A[m, h, grid.prefix + i, sl], A[m, h, grid.prefix + r, sl], dim=0)))
                out[(h, g, j)] = (deltas, coss)
    return out


@pytest.mark.parametrize("metric", ["linf", "mean_abs"])
def test_histograms_and_cosines_match_a_token_by_token_computation(metric):
    A = torch.randn(2, 2, GRID.seq_len, GROUPS.dim, generator=torch.Generator().manual_seed(0))
    st = neighbour_stats(A, GRID, GROUPS, metric)
    for (h, g, j), (deltas, coss) in _direct(A, GRID, GROUPS, metric).items():
        want = torch.bincount(torch.tensor(deltas), minlength=256)
        assert torch.equal(st.delta_hist[h, g, j], want), (h, g, j)
        assert int(st.count[h, g, j]) == len(deltas)
        assert float(st.cos_sum[h, g, j]) == pytest.approx(sum(coss), rel=1e-5, abs=1e-5)


def test_a_q_constant_along_h_has_delta_zero_along_h_in_every_group():
    g = torch.Generator().manual_seed(1)
    base = torch.randn(1, 2, GRID.T, 1, GRID.W, GROUPS.dim, generator=g)
    A = base.expand(-1, -1, -1, GRID.H, -1, -1).reshape(1, 2, GRID.n_grid, GROUPS.dim).contiguous()
    st = neighbour_stats(A, GRID, GROUPS)
    h = AXES.index("h")
    assert torch.all(st.delta_hist[:, :, h, 0] == st.count[:, :, h])  # every pair in bin 0
    assert torch.all(st.count[:, :, h] == GRID.T * (GRID.H - 1) * GRID.W)
    assert torch.allclose(st.cos_sum[:, :, h] / st.count[:, :, h], torch.ones(2, 3, dtype=torch.float64))
    med = hist_quantile(st.delta_hist, 0.5)
    assert torch.all(med[:, :, h] == 0) and torch.all(med[:, :, AXES.index("t")] > 0)
    assert torch.all(med[:, :, AXES.index("w")] > 0)


def test_an_axis_of_length_one_has_no_pairs_and_text_rows_take_no_part():
    grid = TokenGrid(1, 4, 5, prefix=3)
    A = torch.randn(1, 1, grid.seq_len, GROUPS.dim, generator=torch.Generator().manual_seed(2))
    st = neighbour_stats(A, grid, GROUPS)
    assert torch.all(st.count[:, :, 0] == 0) and torch.isnan(hist_quantile(st.delta_hist, 0.5)[:, :, 0]).all()
    A2 = A.clone()
    A2[..., :3, :] *= 0.5  # text rows change but stay below the grid's amax: the scale is unchanged
    st2 = neighbour_stats(A2, grid, GROUPS)
    assert torch.equal(st.delta_hist, st2.delta_hist)


def test_merging_adds_and_rejects_other_shapes():
    A = torch.randn(1, 2, GRID.seq_len, GROUPS.dim, generator=torch.Generator().manual_seed(3))
    a, b = neighbour_stats(A, GRID, GROUPS), neighbour_stats(A, GRID, GROUPS)
    a.add_(b)
    assert torch.equal(a.count, 2 * b.count)
    with pytest.raises(ValueError, match="cannot merge"):
        a.add_(NeighbourStats.zeros(3, 3))


def test_quantiles_and_best_axis():
    hist = torch.zeros(256, dtype=torch.int64)
    hist[2], hist[5], hist[9] = 5, 4, 1
    assert float(hist_quantile(hist, 0.5)) == 2 and float(hist_quantile(hist, 0.9)) == 5
    assert float(hist_quantile(hist, 1.0)) == 9
    with pytest.raises(ValueError):
        hist_quantile(hist, 1.5)
    assert best_axis([3, 1, 2], [9, 9, 9], [0.1, 0.2, 0.3]) == "h"
    assert best_axis([1, 1, 2], [5, 4, 9], [0.9, 0.1, 0.3]) == "h"  # tie on median -> lower p90
    assert best_axis([1, 1, 2], [4, 4, 9], [0.1, 0.9, 0.3]) == "h"  # then higher cosine
    assert best_axis([None, 7, 7], [None, 8, 8], [None, 0.5, 0.5]) == "h"  # then t, h, w order; no data never wins
    assert best_axis([None, None, None], [None] * 3, [None] * 3) is None


@pytest.mark.parametrize("granularity", ["group", "tensor"])
def test_equal_chunks_take_the_folded_path_with_the_same_result(granularity):
    chunks = ChannelGroups.from_chunks(24, 8)
    A = torch.randn(2, 3, GRID.seq_len, 24, generator=torch.Generator().manual_seed(4))
    st = neighbour_stats(A, GRID, chunks, granularity=granularity)
    A_q, _ = quantize(A, chunks, granularity)
    for g, sl in enumerate(chunks.slices):  # each chunk on its own, with the scale the whole tensor gave it
        d = grid_delta(A_q[..., sl], GRID)
        for j in range(3):
            for h in range(3):
                assert torch.equal(st.delta_hist[h, g, j], torch.bincount(d[j][:, h].reshape(-1), minlength=256))


def grid_delta(A_q: torch.Tensor, grid: TokenGrid) -> list[torch.Tensor]:
    """L-inf Delta to the previous token along t, h, w: ``(M, H, pairs)`` each, via ref_index."""
    out = []
    for axis in AXES:
        ref = grid.ref_index(axis)
        has = ref >= 0
        cur, prev = A_q[..., torch.nonzero(has)[:, 0], :], A_q[..., ref[has], :]
        out.append((cur.int() - prev.int()).abs().amax(-1))
    return out
