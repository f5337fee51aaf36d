"""A slow, obviously-correct reference of the SPEC §3 decision (one token at a time)."""

from __future__ import annotations

import torch

from kaleido.reuse import ChannelGroups, ReuseConfig, TokenGrid


def naive_decide(A_q: torch.Tensor, grid: TokenGrid, groups: ChannelGroups, cfg: ReuseConfig):
    """``A_q`` ``(S, K)`` int8 -> (modes ``(S, G)`` int64, eff ``(S, K)`` int64).

    Walks the grid token by token in raster order (a reference always comes earlier).
    """
    S, K = A_q.shape
    A = A_q.to(torch.int64)
    modes = torch.zeros(S, len(groups), dtype=torch.int64)
    eff = A.clone()
    lo, hi = -(2 ** (cfg.low_bits - 1)), 2 ** (cfg.low_bits - 1) - 1
    for g, (sl, axis) in enumerate(zip(groups.slices, groups.axes)):
        for t in range(grid.T):
            for h in range(grid.H):
                for w in range(grid.W):
                    i = grid.prefix + (t * grid.H + h) * grid.W + w
                    coord = {"t": t, "h": h, "w": w}[axis.value]
                    if coord == 0:
                        continue  # no reference: COMPUTE, eff = own operand
                    dt, dh, dw = {"t": (1, 0, 0), "h": (0, 1, 0), "w": (0, 0, 1)}[axis.value]
                    r = grid.prefix + ((t - dt) * grid.H + (h - dh)) * grid.W + (w - dw)
                    d = A[i, sl] - eff[r, sl]
                    if cfg.metric == "linf":
                        delta = float(d.abs().max())
                    else:
                        delta = float(d.abs().double().mean())
                    fits = bool(((d >= lo) & (d <= hi)).all())
                    if delta < cfg.theta1:
                        modes[i, g] = 2
                        eff[i, sl] = eff[r, sl]
                    elif delta < cfg.theta2 and fits:
                        modes[i, g] = 1
    return modes, eff
