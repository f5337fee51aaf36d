"""Token merging machinery shared by ToMe and AdapTiV.

A merge of one sequence is ``group`` ``(S,)``: the merged token that every raster
token belongs to (``0..N'-1``).  :func:`merged_attention` averages q, k, v inside each
group, runs attention on the ``N'`` merged tokens with ToMe's proportional attention
(``+ log(size)`` on every key's logit, so a merged key weighs as much as the tokens
it stands for), and copies each merged output back to every member (unmerge).
Self-attention q.k^T and P.V then cost ``N'^2 * heads * head_dim`` MACs each.
"""

from __future__ import annotations

import math

import torch

from kaleido.reuse import TokenGrid


def local_windows(grid: TokenGrid, window: tuple[int, int, int]) -> torch.Tensor:
    """``(S,)`` window id of every raster token for windows of ``(wt, wh, ww)`` grid cells."""
    wt, wh, ww = window
    t = torch.arange(grid.T).view(-1, 1, 1) // wt
    h = torch.arange(grid.H).view(1, -1, 1) // wh
    w = torch.arange(grid.W).view(1, 1, -1) // ww
    nh, nw = math.ceil(grid.H / wh), math.ceil(grid.W / ww)
    return (t * nh * nw + h * nw + w).reshape(-1)


def window_dst(win: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """``(S,)`` bool: one destination token per window (random member if ``generator``, else the first)."""
    S = win.numel()
    if generator is None:
        key = torch.arange(S, dtype=torch.float64)
    else:
        key = torch.rand(S, generator=generator, dtype=torch.float64)
    # the member with the smallest key in each window is its destination
    nwin = int(win.max()) + 1
    lowest = torch.full((nwin,), float("inf"), dtype=torch.float64).scatter_reduce(0, win, key, reduce="amin")
    return key == lowest[win]


def groups_from_pairs(S: int, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    """``(S,)`` group ids after merging each ``src[i]`` into ``dst[i]`` (dst tokens are not merged away)."""
    target = torch.arange(S)
    target[src] = dst
    keep = torch.ones(S, dtype=torch.bool)
    keep[src] = False
    new_id = torch.cumsum(keep.long(), 0) - 1
    return new_id[target]


def merged_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, group: torch.Tensor,
                     key_bias: torch.Tensor | None = None) -> tuple[torch.Tensor, int]:
    """Attention of one sequence after merging by ``group``; ``q, k, v``: (S, H, d). Returns (out (S, H, d), N').

    ``key_bias`` ``(S,)``: an additive mask per key token (``-inf``: never attended, e.g. padded text);
    a merged key takes the largest of its members'.
    """
    S, H, d = q.shape
    n = int(group.max()) + 1
    size = torch.bincount(group, minlength=n).to(q.dtype)  # (n,)

    def merge(x):
        out = torch.zeros(n, H, d, dtype=x.dtype)
        out.index_add_(0, group, x)
        return out / size.view(-1, 1, 1)

    qm, km, vm = (merge(x).transpose(0, 1) for x in (q, k, v))  # (H, n, d)
    logsize = size.log()
    if key_bias is not None:
        kb = torch.full((n,), float("-inf"), dtype=q.dtype).scatter_reduce(0, group, key_bias.to(q.dtype), "amax")
        logsize = logsize + kb
    bias = logsize.view(1, 1, n).expand(1, n, n)  # proportional attention: + log(size) per key
    om = torch.nn.functional.scaled_dot_product_attention(qm, km, vm, attn_mask=bias).transpose(0, 1)
    return om[group], n
