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
from .runs import group_runs

QMAX = 127
B_GRANULARITIES = ("column", "tensor")


def _check_float(x: torch.Tensor, what: str) -> None:
    if not torch.is_floating_point(x):
        raise ValueError(f"{what} must be a floating-point tensor to quantise, got {x.dtype}")


def raise_non_finite(x: torch.Tensor, what: str) -> None:
    """The one-line refusal of an operand ``x`` known to hold NaN/inf, naming how many."""
    n = int((~torch.isfinite(x)).sum())
    raise ValueError(f"{what} holds {n} non-finite values (NaN/inf); reuse needs finite operands")


def _refuse_non_finite(x: torch.Tensor, what: str, evidence: torch.Tensor) -> None:
    """Raise if ``evidence`` (``x`` itself, or a reduction of it that NaN/inf reach) is not all finite."""
    if not bool(torch.isfinite(evidence).all()):
        raise_non_finite(x, what)


def _check_finite(x: torch.Tensor, what: str) -> None:
    _check_float(x, what)
    _refuse_non_finite(x, what, x)


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
    scale = quant_scale(x, groups, granularity)
    return _round_int8(x, scale), scale


def _max_abs(x: torch.Tensor, dim: tuple[int, ...]) -> torch.Tensor:
    # max |x| as max(amax, -amin): no |x| temporary, and on the CPU 1-15x faster than aminmax(dim=-1)
    # followed by a reduction over the rest (aminmax over a group's few channels is slow); NaN propagates,
    # so the finiteness check can read the result
    x = x.detach()
    return torch.maximum(x.amax(dim=dim, keepdim=True), x.amin(dim=dim, keepdim=True).neg())


def quant_scale(x: torch.Tensor, groups: ChannelGroups, granularity: str = "group") -> torch.Tensor:
    """The scale :func:`quantize` uses for ``x`` ``(..., S, K)``, without quantising.

    Raises ``ValueError`` for non-floating or non-finite ``x`` (read off the scales, so
    the check costs no pass over ``x`` of its own).
    """
    if not isinstance(x, torch.Tensor) or x.dim() < 2:
        raise ValueError(f"quantize expects (..., S, K), got shape {tuple(getattr(x, 'shape', ()))}")
    groups.check_dim(x.shape[-1], "quantised operand")
    _check_float(x, "operand A")
    if granularity == "group":
        from .cpu_kernels import group_scale  # numba: imported on first use, not with kaleido

        compiled = group_scale(x.detach(), (*groups.offsets, groups.dim), QMAX)
        if compiled is not None:  # one compiled pass on a CPU float32 operand: the same scale, bit for bit
            scale, finite = compiled
            if not finite:
                raise_non_finite(x, "operand A")
            return scale
        # per channel over the tokens first (one fast reduction along S over the whole operand), then over
        # each group's few channels: the same maxima (max is associative) at 20-30x less time than reducing
        # (S, size) of each run at once, which the CPU kernels do slowly
        per_channel = _max_abs(x, (-2,))  # (..., 1, K)
        parts = []
        for g0, n, size in group_runs(groups):
            c0 = groups.offsets[g0]
            amax = per_channel[..., c0 : c0 + n * size].unflatten(-1, (n, size)).amax(-1, keepdim=True)
            parts.append(amax.expand(*amax.shape[:-1], size).flatten(-2))
        amax = torch.cat(parts, dim=-1) if len(parts) > 1 else parts[0]
    elif granularity == "head":
        amax = _max_abs(x, (-2, -1))
    elif granularity == "tensor":
        amax = _max_abs(x, tuple(range(x.dim())))
    else:
        raise ValueError(f"unknown quantisation granularity {granularity!r}: use 'group', 'head' or 'tensor'")
    if amax.device.type == "cpu":  # on an accelerator the check would force a host sync per call; NaN/inf
        _refuse_non_finite(x, "operand A", amax)  # propagate there as they would densely
    return _scale_from_amax(amax)


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
