"""Block-sparse attention masks shared by the sparse-attention baselines.

Tokens are cut into blocks of ``block_size`` consecutive tokens *in a layout order*
(raster order, or a permutation of it such as Sparse VideoGen's position-major
"temporal" layout).  A block mask ``(..., nb, nb)`` (query block x key block) expands
to a token mask ``(..., S, S)`` in raster order.
"""

from __future__ import annotations

import math

import torch

from kaleido.reuse import TokenGrid


def n_blocks(S: int, block_size: int) -> int:
    return math.ceil(S / block_size)


def temporal_layout(grid: TokenGrid) -> torch.Tensor:
    """Layout position -> raster token: position-major ``(h, w, t)`` order (same place, all frames adjacent)."""
    idx = torch.arange(grid.n_grid).view(grid.T, grid.H, grid.W)
    return idx.permute(1, 2, 0).reshape(-1)


def block_of_token(layout: torch.Tensor, block_size: int) -> torch.Tensor:
    """``(S,)`` block index of every raster token under ``layout`` (layout[p] = token at position p)."""
    pos = torch.empty_like(layout)
    pos[layout] = torch.arange(layout.numel())
    return pos // block_size


def expand_block_mask(block_mask: torch.Tensor, blk: torch.Tensor) -> torch.Tensor:
    """``(..., nb, nb)`` bool block mask -> ``(..., S, S)`` token mask, ``blk``: (S,) block of each token."""
    return block_mask[..., blk, :][..., :, blk]


def band_block_mask(nb: int, keep_blocks: int) -> torch.Tensor:
    """``(nb, nb)``: each query block keeps the ``keep_blocks`` key blocks nearest to it (ties to the earlier)."""
    keep_blocks = max(1, min(nb, keep_blocks))
    i = torch.arange(nb)
    dist = (i.view(-1, 1) - i.view(1, -1)).abs().to(torch.float64) + i.view(1, -1) * 1e-6
    order = dist.argsort(dim=1)[:, :keep_blocks]
    m = torch.zeros(nb, nb, dtype=torch.bool)
    m.scatter_(1, order, True)
    return m


def keep_count(density: float, nb: int) -> int:
    """Key blocks kept per query block for a target ``density``: ``round(density * nb)``, at least 1."""
    return max(1, min(nb, int(round(density * nb))))
