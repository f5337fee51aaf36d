"""The decision loop of :func:`~kaleido.reuse.decide.decide_grid` compiled for the CPU (numba).

:func:`~kaleido.reuse.decide.decide_grid` decides one position of the grid at a time
with a dozen tensor ops; on a CPU each op costs microseconds of dispatch however few
elements it touches, so on a small model (or a short axis) the decision's time is the
ops' count, not their size.  This kernel runs the same rule (SPEC §3, drift rule) as one
compiled pass over each line: quantise, difference against the effective operand,
``max|d|`` or ``mean|d|``, mode, effective row.  It is bit for bit the torch loop's
result (tested on random operands, both metrics, every axis, int8 and float inputs):

* ``q = rint(x / s)`` divides in ``x``'s dtype promoted with the float32 scale, as torch
  does (float32 / float32 -> float32, float64 -> float64), and rounds half to even;
* the thresholds are compared as float32 values, as torch compares a float32 tensor with
  a Python number; every difference, maximum and sum is an exact integer;
* a FULL row's effective operand is its reference's (a copy), any other row's its own.

The torch loop stays the path for every other device and dtype (CUDA, bf16, fp16).
"""

from __future__ import annotations

import numba
import numpy as np
import torch

#: input dtypes the kernel takes; anything else (bf16, fp16, another device) uses the torch loop
KERNEL_DTYPES = (torch.float32, torch.float64, torch.int8)


_FASTMATH = {"reassoc", "nnan", "ninf", "nsz"}  # no "arcp": x / s must stay a true division


@numba.njit(cache=True, nogil=True, fastmath=_FASTMATH, error_model="numpy")
def _decide_lines(x, xe, modes, scale, bases, strides, L, A, B, n, size, t1, t2, linf, lo, hi,
                  write_eff):  # pragma: no cover - compiled
    """Decide every line of a run along the reuse axis.

    ``x`` / ``xe`` / ``modes``: 1-D views of the storage (channels at stride 1);
    ``bases[k]`` ``(x, xe, modes, scale)`` offsets of leading index ``k``; ``strides[v]``
    ``(axis, a, b)`` element strides of view ``v`` (x, xe, modes); ``scale`` ``(n_lead, n * size)``.
    Position 0 of every line computes (its mode is left as is).  The int8 units are held as
    int32 (integer reductions vectorise); ``rint(x / s)`` is torch's ``div(x, s).round_()``.
    """
    C = n * size
    eff = np.empty(C, np.int32)
    q = np.empty(C, np.int32)
    d = np.empty(C, np.int32)
    for k in range(bases.shape[0]):
        s = scale[bases[k, 3]]
        for a in range(A):
            for b in range(B):
                bx = bases[k, 0] + a * strides[0, 1] + b * strides[0, 2]
                be = bases[k, 1] + a * strides[1, 1] + b * strides[1, 2]
                bm = bases[k, 2] + a * strides[2, 1] + b * strides[2, 2]
                for c in range(C):
                    eff[c] = np.int32(np.rint(x[bx + c] / s[c]))
                if write_eff:
                    for c in range(C):
                        xe[be + c] = x[bx + c]
                for p in range(1, L):
                    px = bx + p * strides[0, 0]
                    pe = be + p * strides[1, 0]
                    for c in range(C):
                        qv = np.int32(np.rint(x[px + c] / s[c]))
                        q[c] = qv
                        d[c] = qv - eff[c]
                    for g in range(n):
                        c0 = g * size
                        if linf:  # one reduction: max |d| (every d then fits: theta2 <= 2**(low_bits-1))
                            delta = 0
                            for c in range(c0, c0 + size):
                                dv = d[c] if d[c] > 0 else -d[c]
                                delta = dv if dv > delta else delta
                            fits = True
                        else:
                            delta, dmax, dmin = 0, d[c0], d[c0]
                            for c in range(c0, c0 + size):
                                dv = d[c]
                                dmax = dv if dv > dmax else dmax
                                dmin = dv if dv < dmin else dmin
                                delta += dv if dv > 0 else -dv
                            fits = dmax <= hi and dmin >= lo
                        full = delta < t1
                        if full:
                            mode = 2
                        elif delta < t2 and fits:
                            mode = 1
                        else:
                            mode = 0
                        modes[bm + p * strides[2, 0] + g] = mode
                        if full:
                            if write_eff:
                                for c in range(c0, c0 + size):
                                    xe[pe + c] = xe[pe - strides[1, 0] + c]
                        else:
                            for c in range(c0, c0 + size):
                                eff[c] = q[c]
                            if write_eff:
                                for c in range(c0, c0 + size):
                                    xe[pe + c] = x[px + c]


def _storage(t: torch.Tensor) -> np.ndarray:
    """``t``'s storage from its first element to its last as a 1-D array (a view, no copy)."""
    span = 1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride()) if n > 0)
    return t.as_strided((span,), (1,)).numpy()


def kernel_applies(x: torch.Tensor, x_eff: torch.Tensor | None, modes: torch.Tensor) -> bool:
    """Whether :func:`decide_run` can take these views: CPU, a kernel dtype, no autograd, channels at
    stride 1 and no negative strides."""
    views = [x, modes] + ([] if x_eff is None else [x_eff])
    return (
        x.dtype in KERNEL_DTYPES
        and modes.dtype == torch.uint8
        and (x_eff is None or x_eff.dtype == x.dtype)
        and all(v.device.type == "cpu" and not v.requires_grad and v.stride(-1) == 1 and min(v.stride()) >= 0
                for v in views)
    )


def decide_run(
    x: torch.Tensor, x_eff: torch.Tensor | None, modes: torch.Tensor, scale: torch.Tensor,
    dim: int, n: int, size: int, thresholds: tuple[float, float], linf: bool, lo: int, hi: int,
) -> None:
    """One run of ``n`` groups of ``size`` channels on one axis, in place through the views.

    ``x`` / ``x_eff`` ``(*lead, T, H, W, n * size)``, ``modes`` ``(*lead, T, H, W, n)``,
    ``scale`` broadcastable to ``x`` (float32), ``dim`` the reuse axis's dim in these views.
    """
    nl = x.dim() - 4
    lead = tuple(x.shape[:nl])
    C = n * size
    if x.numel() == 0:
        return
    scale = torch.broadcast_to(scale.to(torch.float32), (*lead, 1, 1, 1, C)).reshape(-1, C).contiguous().numpy()
    views = [x, modes, x] if x_eff is None else [x, modes, x_eff]
    others = [d for d in range(nl, nl + 3) if d != dim]
    strides = np.array([[v.stride(dim)] + [v.stride(d) for d in others] for v in (views[0], views[2], views[1])],
                       dtype=np.int64)
    idx = np.indices(lead, dtype=np.int64).reshape(nl, -1).T if nl else np.zeros((1, 0), dtype=np.int64)
    bases = np.stack([idx @ np.array(v.stride()[:nl], dtype=np.int64) for v in (views[0], views[2], views[1])]
                     + [np.arange(idx.shape[0], dtype=np.int64)], axis=1)
    xa = _storage(x)
    _decide_lines(xa, _storage(x_eff) if x_eff is not None else xa, _storage(modes), scale, bases, strides,
                  x.shape[dim], x.shape[others[0]], x.shape[others[1]], n, size,
                  float(np.float32(thresholds[0])), float(np.float32(thresholds[1])), linf, lo, hi, x_eff is not None)
