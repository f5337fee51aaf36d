"""Activation reuse for ``nn.Linear``-style layers (SPEC §4: projections and MLPs).

For MLPs and projections reuse is applied to the activations (the GEMM's rows are
tokens), never to the weights: ``y = x W^T + b`` with ``x`` ``(..., S, C_in)``
reused per channel group of ``C_in`` along the token grid.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .config import ReuseConfig
from .decide import check_plain_config, decide, decide_effective
from .grid import TokenGrid
from .groups import ChannelGroups
from .matmul import int8_matmul_from_map
from .modes import ModeMap
from .opcounts import OpCounts
from .quant import quantize


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
