"""Activation reuse for ``nn.Linear``-style layers (SPEC §4: projections and MLPs).

For MLPs and projections reuse is applied to the activations (the GEMM's rows are
tokens), never to the weights: ``y = x W^T + b`` with ``x`` ``(..., S, C_in)``
reused per channel group of ``C_in`` along the token grid.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from . import memory
from .config import ReuseConfig
from .decide import check_plain_config, decide, decide_effective, decide_grid
from .grid import Axis, TokenGrid
from .groups import ChannelGroups
from .matmul import int8_matmul_from_map
from .modes import ModeMap
from .opcounts import OpCounts
from .quant import quant_scale, quantize


def reuse_linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    grid: TokenGrid,
    groups: ChannelGroups,
    config: ReuseConfig,
    *,
    exact_int8: bool = False,
) -> tuple[torch.Tensor, ModeMap, OpCounts]:
    """``y = x W^T + b`` with activation reuse.

    ``x`` ``(B, S, C_in)`` (any leading dims), ``weight`` ``(C_out, C_in)``, ``bias``
    ``(C_out,)`` or ``None``; ``groups`` partition ``C_in``, ``S == grid.seq_len``.
    Returns ``(y (B, S, C_out), mode_map (B, S, G), op_counts)`` (``C_out`` columns).
    Float path by default; ``exact_int8`` uses the int8 path (weights per output
    channel), the bias added in float afterwards.
    """
    if not isinstance(x, torch.Tensor) or x.dim() < 2:
        raise ValueError(f"x must be a (B, S, C_in) tensor, got shape {tuple(getattr(x, 'shape', ()))}")
    if not isinstance(weight, torch.Tensor) or weight.dim() != 2 or weight.shape[1] != x.shape[-1]:
        raise ValueError(
            f"weight must be (C_out, C_in={x.shape[-1]}), got {tuple(getattr(weight, 'shape', ()))}"
        )
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ValueError(f"bias must be ({weight.shape[0]},), got {tuple(bias.shape)}")
    groups.check_dim(x.shape[-1], "linear input")
    grid.check_seq_len(x.shape[-2], "linear input")
    check_plain_config(config)
    if exact_int8:
        x_q, scale_x = quantize(x, groups, config.granularity)
        mode_map = decide(x_q, grid, groups, config)
        ops = mode_map.op_counts(weight.shape[0])
        y = int8_matmul_from_map(x_q, scale_x, mode_map, weight.t()).to(x.dtype)
        if bias is not None:
            y = y + bias
        return y, mode_map, ops
    mode_map, x_eff = decide_effective(x, grid, groups, config)
    y = F.linear(x_eff, weight, bias)
    return y, mode_map, mode_map.op_counts(weight.shape[0])


def linear_in_tiles(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    grid: TokenGrid,
    groups: ChannelGroups,
    config: ReuseConfig,
    tile_elements: int,
) -> tuple[torch.Tensor, ModeMap] | None:
    """The float path of :func:`reuse_linear` one tile of the token grid at a time, or ``None`` where it
    cannot tile (groups on different axes, or a grid with no side across the reuse axis).

    The effective operand exists only one tile at a time (at most ``tile_elements`` of
    ``x``), instead of as a whole copy of ``x``: for a down projection (an FFN's second
    linear, HunyuanVideo's ``proj_out``) that copy of the widest activation is what sets
    the peak memory of the whole forward.  Tiles cut the grid across the reuse axis, so every
    line along it stays whole and the decisions (quantised with the whole matrix's scale)
    are the ones :func:`decide_effective` makes; each output row is computed from the same
    effective row, by a GEMM over fewer rows.  Returns ``(y, mode_map)``.
    """
    axes = set(groups.axes)
    if len(axes) != 1 or x.dim() < 2 or not torch.is_floating_point(x):
        return None
    check_plain_config(config)
    grid.check_seq_len(x.shape[-2], "linear input")
    axis_dim = Axis.parse(next(iter(axes))).dim
    others = [d for d in range(3) if d != axis_dim]
    tdim = max(others, key=lambda d: grid.shape[d])  # the longest side across the reuse axis
    if grid.shape[tdim] < 2:
        return None
    lead = tuple(x.shape[:-2])
    K, N = x.shape[-1], weight.shape[0]
    scale = quant_scale(x, groups, config.granularity)  # the whole matrix's scale
    modes = torch.zeros(*lead, grid.seq_len, len(groups), dtype=torch.uint8, device=x.device)
    y = torch.empty(*lead, grid.seq_len, N, dtype=torch.promote_types(x.dtype, weight.dtype), device=x.device)
    for sl in (slice(0, grid.prefix), slice(grid.prefix + grid.n_grid, grid.seq_len)):
        if sl.stop > sl.start:  # non-grid rows compute
            y[..., sl, :] = F.linear(x[..., sl, :], weight, bias)
    thw = grid.shape
    rows = x[..., grid.grid_slice, :].unflatten(-2, thw)
    y_rows = y[..., grid.grid_slice, :].unflatten(-2, thw)
    m_rows = modes[..., grid.grid_slice, :].unflatten(-2, thw)
    nl = len(lead)
    per_index = rows.numel() // grid.shape[tdim]
    n_tiles = -(-grid.shape[tdim] // max(1, tile_elements // max(1, per_index)))
    step = -(-grid.shape[tdim] // n_tiles)  # balanced: no small last tile costing a whole weight stream
    s5 = scale.unsqueeze(-2).unsqueeze(-2)
    # one buffer for every tile's effective operand (the first tile is the largest): a fresh one per tile
    # would cost its page faults again on the CPU
    flat = memory.empty(rows.narrow(nl + tdim, 0, step).numel(), x.dtype, x.device)
    for t0 in range(0, grid.shape[tdim], step):
        b = min(step, grid.shape[tdim] - t0)
        tile = rows.narrow(nl + tdim, t0, b)
        tile_eff = flat[: tile.numel()].view(tile.shape)  # contiguous: the GEMM's input
        with torch.profiler.record_function("kaleido.decide"):
            decide_grid(tile, tile_eff, m_rows.narrow(nl + tdim, t0, b), s5, groups, config)
        y_rows.narrow(nl + tdim, t0, b).copy_(F.linear(tile_eff, weight, bias))
    return y, ModeMap(modes, grid, groups, config.low_bits)
