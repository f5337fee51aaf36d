"""Symmetric int8 quantisation of GEMM operands (SPEC §3).

``A`` (the reused operand, rows = tokens) has shape ``(..., S, K)``; every leading
index is one matrix (e.g. one (batch, head)).  Its scale is one per matrix and
channel group (``"group"``, default), one per matrix (``"head"``) or one for the
whole tensor (``"tensor"``).  ``B`` is quantised per column (``"column"``: one
scale per matrix and output column) or per tensor.

Values map to ``round(x / scale)`` clamped to ``[-127, 127]`` with
``scale = amax / 127`` (``1`` where ``amax == 0``), so ``-128`` never appears and
``x ~= x_q * scale``.
"""

from __future__ import annotations

import torch

from .groups import ChannelGroups

QMAX = 127
B_GRANULARITIES = ("column", "tensor")


def _check_finite(x: torch.Tensor, what: str) -> None:
    if not torch.is_floating_point(x):
        raise ValueError(f"{what} must be a floating-point tensor to quantise, got {x.dtype}")
    if not bool(torch.isfinite(x).all()):
        n = int((~torch.isfinite(x)).sum())
        raise ValueError(f"{what} holds {n} non-finite values (NaN/inf); reuse needs finite operands")


def _scale_from_amax(amax: torch.Tensor) -> torch.Tensor:
    amax = amax.to(torch.float32)
    return torch.where(amax > 0, amax / QMAX, torch.ones_like(amax))


def _round_int8(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return torch.round(x.detach().to(torch.float32) / scale).clamp_(-QMAX, QMAX).to(torch.int8)


def quantize(x: torch.Tensor, groups: ChannelGroups, granularity: str = "group") -> tuple[torch.Tensor, torch.Tensor]:
    """Quantise ``x`` ``(..., S, K)`` to int8 over its channel dim, grouped by ``groups``.

    Returns ``(x_q, scale)``: ``x_q`` int8 of ``x``'s shape, ``scale`` float32
    broadcastable to it: ``(..., 1, K)`` for ``"group"`` (each group's channels
    share one value), ``(..., 1, 1)`` for ``"head"``, all-ones dims for ``"tensor"``.
    """
    if x.dim() < 2:
        raise ValueError(f"quantize expects (..., S, K), got shape {tuple(x.shape)}")
    groups.check_dim(x.shape[-1], "quantised operand")
    _check_finite(x, "operand A")
    ax = x.detach().abs()
    if granularity == "group":
        parts = []
        for sl, size in zip(groups.slices, groups.sizes):
            amax = ax[..., sl].amax(dim=(-2, -1), keepdim=True)
            parts.append(_scale_from_amax(amax).expand(*amax.shape[:-1], size))
        scale = torch.cat(parts, dim=-1)
    elif granularity == "head":
        scale = _scale_from_amax(ax.amax(dim=(-2, -1), keepdim=True))
    elif granularity == "tensor":
        scale = _scale_from_amax(ax.amax()).reshape((1,) * x.dim())
    else:
        raise ValueError(f"unknown quantisation granularity {granularity!r}: use 'group', 'head' or 'tensor'")
    return _round_int8(x, scale), scale


def quantize_columns(b: torch.Tensor, granularity: str = "column") -> tuple[torch.Tensor, torch.Tensor]:
    """Quantise the right operand ``b`` ``(..., K, N)`` to int8.

    ``"column"``: one scale per matrix and column, shape ``(..., 1, N)``;
    ``"tensor"``: one scale, all-ones dims.
    """
    if b.dim() < 2:
        raise ValueError(f"quantize_columns expects (..., K, N), got shape {tuple(b.shape)}")
    _check_finite(b, "operand B")
    ab = b.detach().abs()
    if granularity == "column":
        scale = _scale_from_amax(ab.amax(dim=-2, keepdim=True))
    elif granularity == "tensor":
        scale = _scale_from_amax(ab.amax()).reshape((1,) * b.dim())
    else:
        raise ValueError(f"unknown B quantisation granularity {granularity!r}: use one of {B_GRANULARITIES}")
    return _round_int8(b, scale), scale


def group_scale(scale: torch.Tensor, groups: ChannelGroups, g: int) -> torch.Tensor:
    """The scale of group ``g`` from a :func:`quantize` scale, shape ``(..., 1, 1)``."""
    if scale.shape[-1] == 1:
        return scale
    o = groups.offsets[g]
    return scale[..., o : o + 1]
