"""How alike neighbouring tokens are, per channel group and axis (SPEC §2-3 definitions).

For an operand ``A`` ``(M, H, S, K)`` (``M`` pooled matrices - batch, CFG calls -
``H`` heads, ``S`` rows = tokens, ``K`` channels split into :class:`ChannelGroups`),
its int8 form ``A_q`` from :func:`kaleido.reuse.quantize` (one scale per (matrix, head,
group) with ``granularity="group"``, exactly what the reuse decides on), and each grid
token ``i`` with a neighbour ``ref(i)`` along axis ``a`` (``(t-1,h,w)``, ``(t,h-1,w)``,
``(t,h,w-1)``):

* ``Delta = metric(A_q[i, g] - A_q[ref(i), g])`` in int8 units, ``metric`` = ``max|d|``
  (``"linf"``, the SPEC's default) or ``mean|d|`` (``"mean_abs"``).  This is the
  decision's Delta with every threshold at 0 (no FULL rows, so ``eff(ref(i))`` is
  ``A_q[ref(i)]``).
* cosine similarity of the float rows ``A[i, g]`` and ``A[ref(i), g]``.

Deltas are kept as histograms over integer bins (``linf`` Deltas are integers in
0..254; ``mean_abs`` ones are floored), so statistics of many calls merge exactly.
Non-grid rows (text) take no part; tokens at position 0 on the axis have no neighbour.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from kaleido.reuse import Axis, ChannelGroups, TokenGrid, quantize

#: the three reuse axes, in the order of every ``axis`` dimension below
AXES: tuple[str, ...] = ("t", "h", "w")
#: histogram bins of Delta: 0..255 int8 units (an int8 difference is at most 254)
DELTA_BINS = 256


@dataclass
class NeighbourStats:
    """Accumulated neighbour statistics of one operand.

    ``delta_hist`` int64 ``(H, G, 3, DELTA_BINS)``: count of (row, group) pairs per
    Delta bin; ``cos_sum`` float64 ``(H, G, 3)``: sum of cosine similarities;
    ``count`` int64 ``(H, G, 3)``: number of neighbour pairs (0 on an axis of length 1).
    Axis order is :data:`AXES`.
    """

    delta_hist: torch.Tensor
    cos_sum: torch.Tensor
    count: torch.Tensor

    @classmethod
    def zeros(cls, heads: int, groups: int) -> "NeighbourStats":
        return cls(torch.zeros(heads, groups, 3, DELTA_BINS, dtype=torch.int64),
                   torch.zeros(heads, groups, 3, dtype=torch.float64),
                   torch.zeros(heads, groups, 3, dtype=torch.int64))

    def add_(self, other: "NeighbourStats") -> "NeighbourStats":
        if other.delta_hist.shape != self.delta_hist.shape:
            raise ValueError(f"cannot merge neighbour statistics of shapes {tuple(other.delta_hist.shape)} "
                             f"and {tuple(self.delta_hist.shape)}: same operand, heads and groups needed")
        self.delta_hist += other.delta_hist
        self.cos_sum += other.cos_sum
        self.count += other.count
        return self


def heads_first(operand: torch.Tensor, role: str) -> torch.Tensor:
    """q/k ``(B, S, H, D)`` -> ``(B, H, S, D)``; a linear input ``(B, S, C)`` -> ``(B, 1, S, C)``."""
    if role in ("q", "k"):
        if operand.dim() != 4:
            raise ValueError(f"a {role} operand must be (B, S, H, D), got shape {tuple(operand.shape)}")
        return operand.transpose(1, 2)
    if operand.dim() < 2:
        raise ValueError(f"a linear input must be (..., S, C), got shape {tuple(operand.shape)}")
    return operand.reshape(-1, 1, *operand.shape[-2:])


def neighbour_stats(A: torch.Tensor, grid: TokenGrid, groups: ChannelGroups, metric: str = "linf",
                    granularity: str = "group") -> NeighbourStats:
    """Neighbour statistics of ``A`` ``(M, H, S, K)`` along t, h and w (see the module docstring)."""
    if A.dim() != 4:
        raise ValueError(f"neighbour_stats expects (M, H, S, K), got shape {tuple(A.shape)}")
    if metric not in ("linf", "mean_abs"):
        raise ValueError(f"unknown metric {metric!r}: use 'linf' or 'mean_abs'")
    grid.check_seq_len(A.shape[-2], "operand")
    A = A.detach().float()
    G = len(groups)
    if G > 1 and len(set(groups.sizes)) == 1 and granularity in ("group", "tensor"):
        # equal chunks: fold the groups into the head dim (one scale per matrix, head and group either way)
        M, H, S, K = A.shape
        kg = groups.sizes[0]
        folded = A.reshape(M, H, S, G, kg).permute(0, 1, 3, 2, 4).reshape(M, H * G, S, kg)
        one = ChannelGroups((kg,), (groups.axes[0],), ("chunk",))
        if granularity == "tensor":
            folded_q = quantize(A, groups, "tensor")[0].reshape(M, H, S, G, kg).permute(0, 1, 3, 2, 4).reshape(M, H * G, S, kg)
        else:
            folded_q = quantize(folded, one, "group")[0]
        st = _stats(folded, folded_q, grid, one, metric)
        return NeighbourStats(st.delta_hist.view(H, G, 3, DELTA_BINS), st.cos_sum.view(H, G, 3), st.count.view(H, G, 3))
    return _stats(A, quantize(A, groups, granularity)[0], grid, groups, metric)


def _stats(A: torch.Tensor, A_q: torch.Tensor, grid: TokenGrid, groups: ChannelGroups, metric: str) -> NeighbourStats:
    H = A.shape[1]
    out = NeighbourStats.zeros(H, len(groups))
    rows_q = A_q[..., grid.grid_slice, :]
    rows_f = A[..., grid.grid_slice, :]
    offsets = (torch.arange(H) * DELTA_BINS).view(H, 1)
    for g, sl in enumerate(groups.slices):
        for j, axis in enumerate(AXES):
            if grid.axis_len(axis) < 2:
                continue
            lq = grid.to_lines(rows_q[..., sl], Axis(axis)).to(torch.int16)  # (L, M, H, n_lines, Kg)
            d = (lq[1:] - lq[:-1]).abs()
            delta = d.amax(-1) if metric == "linf" else d.float().mean(-1).floor().to(torch.int16)
            delta = delta.clamp_(max=DELTA_BINS - 1).to(torch.int64).movedim(2, 0).reshape(H, -1)
            out.delta_hist[:, g, j] += torch.bincount((delta + offsets).reshape(-1),
                                                      minlength=H * DELTA_BINS).view(H, DELTA_BINS)
            lf = grid.to_lines(rows_f[..., sl], Axis(axis))
            cos = F.cosine_similarity(lf[1:], lf[:-1], dim=-1)  # (L-1, M, H, n_lines)
            out.cos_sum[:, g, j] += cos.movedim(2, 0).reshape(H, -1).sum(1, dtype=torch.float64)
            out.count[:, g, j] += delta.shape[1]
    return out


def hist_quantile(hist: torch.Tensor, q: float) -> torch.Tensor:
    """Lower ``q``-quantile (in bins = int8 units) of histograms over the last dim; NaN where empty."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile q={q} must lie in [0, 1]")
    h = hist.to(torch.float64)
    total = h.sum(-1, keepdim=True)
    cdf = h.cumsum(-1)
    idx = (cdf < q * total - 1e-9).sum(-1).to(torch.float64)
    return torch.where(total[..., 0] > 0, idx.clamp(max=hist.shape[-1] - 1), torch.full_like(idx, float("nan")))


def hist_mean(hist: torch.Tensor) -> torch.Tensor:
    """Mean bin of histograms over the last dim; NaN where empty."""
    h = hist.to(torch.float64)
    total = h.sum(-1)
    bins = torch.arange(hist.shape[-1], dtype=torch.float64)
    return torch.where(total > 0, (h * bins).sum(-1) / total.clamp(min=1), torch.full_like(total, float("nan")))
