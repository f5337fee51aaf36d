"""Compiled CPU kernels (numba) for the per-call work of the float path on small and medium operands.

On a CPU every torch op costs microseconds of dispatch however few elements it touches, so
on a small model (or a short axis) the decision's time is the ops' count, not their size.
The kernels here do that work in one compiled pass each, with results equal bit for bit
to the torch code they stand in for (tested):

* :func:`decide_run` - the decision loop of :func:`~kaleido.reuse.decide.decide_grid`
  (SPEC §3, drift rule): quantise, difference against the effective operand, ``max|d|``
  or ``mean|d|``, mode, effective row.  ``q = rint(x / s)`` divides in ``x``'s dtype
  promoted with the float32 scale, as torch does, and rounds half to even; thresholds are
  compared as float32 values, as torch compares a float32 tensor with a Python number;
  every difference, maximum and sum is an exact integer; a FULL row's effective operand
  is its reference's (a copy), any other row's its own.
* :func:`group_scale` - the ``"group"`` quantisation scale (``max |x|`` over the rows per
  channel, then per group, over 127); NaN and inf propagate, so the finiteness check can
  read the result.
* :func:`decide_effective_cpu` - both at once for a float32 operand (one call per decision);
  it and :func:`decide_run` share one line's decision (``_decide_run_line``), a run of
  groups of one size and axis at a time.
* :func:`mode_histograms` - a trace record's per-(head, group, mode) counts and row-pattern
  histogram of a mode tensor.

The torch code stays the path for every other device and dtype (CUDA, bf16, fp16).
"""

from __future__ import annotations

import numba
import numpy as np
import torch

from .grid import Axis
from .quant import group_runs

#: input dtypes the kernel takes; anything else (bf16, fp16, another device) uses the torch loop
KERNEL_DTYPES = (torch.float32, torch.float64, torch.int8)
#: with more than one torch thread, operands larger than this keep the torch code, whose ops run on every
#: thread (the kernels are serial).  Measured on 2 CPU cores: a 1280 x 128 operand decides in 0.41 ms
#: compiled against 0.83 ms in torch ops (dispatch-bound), a 4680 x 1536 one in 16 ms against 9 ms
KERNEL_MAX_ELEMENTS = 1 << 20


def serial_pays(numel: int) -> bool:
    """Whether a serial compiled pass over ``numel`` elements beats torch's ops: at one torch thread always,
    at more up to :data:`KERNEL_MAX_ELEMENTS`."""
    return torch.get_num_threads() == 1 or numel <= KERNEL_MAX_ELEMENTS


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _decide_run_line(x, xe, modes, ox, oe, om, sx, se, sm, L, c0, n, size, s, eff, q, d, t1, t2, linf, lo, hi,
                     write_eff):  # pragma: no cover - compiled
    """Decide one line of a run of ``n`` groups of ``size`` channels from channel ``c0``: the rows at
    ``ox + p * sx`` (``x``) and ``oe + p * se`` (``xe``), the modes at ``om + p * sm + g``, for positions
    ``p < L`` along the reuse axis.  ``s`` the per-channel scale and ``eff`` / ``q`` / ``d`` buffers, all
    indexed by channel.  Position 0 computes (its modes are left as they are).  The int8 units are held as
    int32 (integer reductions vectorise); ``rint(x / s)`` is torch's ``div(x, s).round_()``; every difference,
    maximum and sum is an exact integer."""
    c1 = c0 + n * size
    for c in range(c0, c1):
        eff[c] = np.int32(np.rint(x[ox + c] / s[c]))
    if write_eff:
        for c in range(c0, c1):
            xe[oe + c] = x[ox + c]
    for p in range(1, L):
        px, pe = ox + p * sx, oe + p * se
        for c in range(c0, c1):  # the run's whole row at once: one contiguous pass
            qv = np.int32(np.rint(x[px + c] / s[c]))
            q[c] = qv
            d[c] = qv - eff[c]
        for g in range(n):
            g0 = c0 + g * size
            if linf:  # one reduction: max |d| (every d then fits: theta2 <= 2**(low_bits-1))
                delta = 0
                for c in range(g0, g0 + size):
                    dv = d[c] if d[c] > 0 else -d[c]
                    delta = dv if dv > delta else delta
                fits = True
            else:
                delta, dmax, dmin = 0, d[g0], d[g0]
                for c in range(g0, g0 + size):
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
            modes[om + p * sm + g] = mode
            if full:
                if write_eff:
                    for c in range(g0, g0 + size):
                        xe[pe + c] = xe[pe - se + c]
            else:
                for c in range(g0, g0 + size):
                    eff[c] = q[c]
                if write_eff:
                    for c in range(g0, g0 + size):
                        xe[pe + c] = x[px + c]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _decide_lines(x, xe, modes, scale, bases, strides, L, A, B, n, size, t1, t2, linf, lo, hi,
                  write_eff):  # pragma: no cover - compiled
    """Decide every line of a run of ``n`` groups of ``size`` channels along the reuse axis.

    ``x`` / ``xe`` / ``modes``: 1-D views of the storage (channels at stride 1);
    ``bases[k]`` ``(x, xe, modes, scale)`` offsets of leading index ``k``; ``strides[v]``
    ``(axis, a, b)`` element strides of view ``v`` (x, xe, modes); ``scale`` ``(n_lead, n * size)``.
    """
    eff = np.empty(n * size, np.int32)
    q = np.empty(n * size, np.int32)
    d = np.empty(n * size, np.int32)
    for k in range(bases.shape[0]):
        s = scale[bases[k, 3]]
        for a in range(A):
            for b in range(B):
                _decide_run_line(x, xe, modes, bases[k, 0] + a * strides[0, 1] + b * strides[0, 2],
                                 bases[k, 1] + a * strides[1, 1] + b * strides[1, 2],
                                 bases[k, 2] + a * strides[2, 1] + b * strides[2, 2],
                                 strides[0, 0], strides[1, 0], strides[2, 0], L, 0, n, size, s, eff, q, d,
                                 t1, t2, linf, lo, hi, write_eff)


def _storage(t: torch.Tensor) -> np.ndarray:
    """``t``'s storage from its first element to its last as a 1-D array (a view, no copy)."""
    span = 1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride()) if n > 0)
    return t.as_strided((span,), (1,)).numpy()


def _lead_offsets(shape: tuple[int, ...], *strides: tuple[int, ...]) -> list[list[int]]:
    """Element offset of every leading index (row-major) in each view of ``strides``."""
    offsets = [[0] * len(strides)]
    for n, st in zip(shape, zip(*strides)):
        offsets = [[o + i * s for o, s in zip(off, st)] for off in offsets for i in range(n)]
    return offsets


def kernel_applies(x: torch.Tensor, x_eff: torch.Tensor | None, modes: torch.Tensor) -> bool:
    """Whether :func:`decide_run` can take these views: CPU, a kernel dtype, no autograd, channels at
    stride 1 and no negative strides."""
    views = (x, modes) if x_eff is None else (x, modes, x_eff)
    return (
        x.dtype in KERNEL_DTYPES
        and modes.dtype == torch.uint8
        and (x_eff is None or x_eff.dtype == x.dtype)
        and all(v.device.type == "cpu" and not v.requires_grad and (v.stride(-1) == 1 or v.shape[-1] == 1)
                and min(v.stride()) >= 0 for v in views)
    )


def decide_run(
    x: torch.Tensor, x_eff: torch.Tensor | None, modes: torch.Tensor, scale: torch.Tensor,
    dim: int, n: int, size: int, thresholds: tuple[float, float], linf: bool, lo: int, hi: int,
) -> None:
    """One run of ``n`` groups of ``size`` channels on one axis, in place through the views.

    ``x`` / ``x_eff`` ``(*lead, T, H, W, n * size)``, ``modes`` ``(*lead, T, H, W, n)``,
    ``scale`` broadcastable to ``x`` (float32), ``dim`` the reuse axis's dim in these views.
    """
    if x.numel() == 0:
        return
    nl = x.dim() - 4
    lead = tuple(x.shape[:nl])
    C = n * size
    scale = torch.broadcast_to(scale.to(torch.float32), (*lead, 1, 1, 1, C)).reshape(-1, C).contiguous().numpy()
    e = x if x_eff is None else x_eff
    xs, es, ms = x.stride(), e.stride(), modes.stride()
    a, b = (d for d in range(nl, nl + 3) if d != dim)
    strides = np.array([[v[dim], v[a], v[b]] for v in (xs, es, ms)], dtype=np.int64)
    bases = np.array([off + [k] for k, off in enumerate(_lead_offsets(lead, xs[:nl], es[:nl], ms[:nl]))],
                     dtype=np.int64)
    xa = _storage(x)
    _decide_lines(xa, xa if x_eff is None else _storage(x_eff), _storage(modes), scale, bases, strides,
                  x.shape[dim], x.shape[a], x.shape[b], n, size,
                  float(np.float32(thresholds[0])), float(np.float32(thresholds[1])), linf, lo, hi, x_eff is not None)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _matrix_group_scales(x, base, rows, row_stride, offsets, qmax, m, out):  # pragma: no cover - compiled
    """One matrix's ``"group"`` scale into ``out`` ``(K,)``: max |x| per channel over the rows (``m``: a ``(K,)``
    buffer), then per group (``offsets``: group g = channels offsets[g]:offsets[g+1]), over ``qmax`` (float32; 1
    where the maximum is 0).  Returns whether every maximum is finite.  No fastmath: ``v != v`` must see NaN;
    the channel loop is elementwise, so it vectorises anyway."""
    K = m.shape[0]
    for c in range(K):
        m[c] = 0.0
    for r in range(rows):
        b = base + r * row_stride
        for c in range(K):
            v = abs(x[b + c])
            m[c] = v if (v > m[c]) | (v != v) else m[c]
    finite = True
    for g in range(offsets.shape[0] - 1):
        gm = m[offsets[g]]
        for c in range(offsets[g] + 1, offsets[g + 1]):
            gm = m[c] if (m[c] > gm) | (m[c] != m[c]) else gm
        finite = finite and np.isfinite(gm)
        sc = gm / qmax if gm > 0 else np.float32(1.0)
        for c in range(offsets[g], offsets[g + 1]):
            out[c] = sc
    return finite


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _group_scales(x, bases, rows, row_stride, K, offsets, qmax, out):  # pragma: no cover - compiled
    """:func:`_matrix_group_scales` of every matrix (``bases``: their offsets) into ``out`` ``(n, K)``."""
    m = np.empty(K, np.float32)
    finite = True
    for k in range(bases.shape[0]):
        ok = _matrix_group_scales(x, bases[k], rows, row_stride, offsets, qmax, m, out[k])
        finite = finite and ok
    return finite


def _plain_cpu_float32(x: torch.Tensor) -> bool:
    return (x.device.type == "cpu" and x.dtype == torch.float32 and not x.requires_grad and x.dim() >= 2
            and (x.stride(-1) == 1 or x.shape[-1] == 1) and min(x.stride()) >= 0 and x.numel() > 0)


def group_scale(x: torch.Tensor, offsets: tuple[int, ...], qmax: int) -> tuple[torch.Tensor, bool] | None:
    """The ``"group"`` quantisation scale of ``x`` ``(..., S, K)`` in one pass: ``((..., 1, K) float32,
    every maximum finite)``, or ``None`` where the kernel does not apply (not a CPU float32 tensor with
    channels at stride 1) or does not pay (:func:`serial_pays`).  ``offsets``: the groups' channel offsets and ``K`` last."""
    if not _plain_cpu_float32(x) or not serial_pays(x.numel()):
        return None
    lead, (S, K) = tuple(x.shape[:-2]), x.shape[-2:]
    out = torch.empty(*lead, 1, K, dtype=torch.float32)
    bases = np.array([o[0] for o in _lead_offsets(lead, x.stride()[:-2])], dtype=np.int64)
    finite = _group_scales(_storage(x), bases, S, x.stride(-2), K, np.asarray(offsets, dtype=np.int64),
                           np.float32(qmax), out.view(-1, K).numpy())
    return out, bool(finite)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _histograms(m, counts, patterns, with_patterns):  # pragma: no cover - compiled
    B, H, S, G = m.shape
    for b in range(B):
        for h in range(H):
            for s in range(S):
                code = 0
                w = 1
                for g in range(G):
                    v = m[b, h, s, g]
                    if v > 2:
                        raise ValueError("a mode tensor holds a value other than 0, 1, 2")
                    counts[h, g, v] += 1
                    code += v * w
                    w *= 3
                if with_patterns:
                    patterns[code] += 1


def mode_histograms(modes: torch.Tensor, with_patterns: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(H, G, 3)`` counts and (``with_patterns``) the ``3**G`` row-pattern histogram of a CPU
    ``(B, H, S, G)`` uint8 mode tensor, as int64 tensors (pattern code ``sum_g mode_g * 3**g``)."""
    H, G = modes.shape[1], modes.shape[-1]
    # torch's allocator, not numpy's: a trace keeps these for the whole generation, and numpy-owned small
    # blocks held that long made glibc's heap grow by ~1 GB per 25-step generation on the shipped model
    counts = torch.zeros((H, G, 3), dtype=torch.int64)
    patterns = torch.zeros(3**G if with_patterns else 1, dtype=torch.int64)
    _histograms(modes.numpy(), counts.numpy(), patterns.numpy(), with_patterns)
    return counts, patterns if with_patterns else None


@numba.njit(cache=True, nogil=True, error_model="numpy")  # no fastmath: the scale's NaN checks must stand
def _decide_matrices(x, xe, modes, bases, row_strides, S, prefix, T, H, W, offsets, runs, axes, t1s, t2s, qmax,
                     linf, lo, hi, write_eff):  # pragma: no cover - compiled
    """:func:`decide_effective_cpu` on the storages (``runs``: ``(first group, n, size)`` of each run of groups
    of one size and axis); returns whether every scale is finite (else nothing is decided)."""
    K = offsets[offsets.shape[0] - 1]
    rx, re, rm = row_strides[0], row_strides[1], row_strides[2]
    m = np.empty(K, np.float32)
    s = np.empty(K, np.float32)
    eff = np.empty(K, np.int32)
    q = np.empty(K, np.int32)
    d = np.empty(K, np.int32)
    n_grid = T * H * W
    for k in range(bases.shape[0]):
        bx, be, bm = bases[k, 0], bases[k, 1], bases[k, 2]
        if not _matrix_group_scales(x, bx, S, rx, offsets, qmax, m, s):
            return False
        if write_eff:
            for r in range(S):
                if r < prefix or r >= prefix + n_grid:
                    for c in range(K):
                        xe[be + r * re + c] = x[bx + r * rx + c]
        for j in range(runs.shape[0]):
            g0, n, size = runs[j, 0], runs[j, 1], runs[j, 2]
            ax = axes[g0]
            L = T if ax == 0 else (H if ax == 1 else W)
            pstep = H * W if ax == 0 else (W if ax == 1 else 1)  # rows between neighbours along the axis
            A = H if ax == 0 else T
            B = W if ax != 2 else H
            for a in range(A):
                for b in range(B):
                    # the line's first row: (t, h, w) with the axis coordinate 0
                    if ax == 0:
                        r0 = prefix + a * W + b
                    elif ax == 1:
                        r0 = prefix + a * H * W + b
                    else:
                        r0 = prefix + (a * H + b) * W
                    _decide_run_line(x, xe, modes, bx + r0 * rx, be + r0 * re, bm + r0 * rm + g0, pstep * rx,
                                     pstep * re, pstep * rm, L, offsets[g0], n, size, s, eff, q, d, t1s[g0],
                                     t2s[g0], linf, lo, hi, write_eff)
    return True


def fused_applies(A: torch.Tensor) -> bool:
    """Whether :func:`decide_effective_cpu` takes ``A``: a CPU float32 ``(..., S, K)`` tensor without autograd,
    channels at stride 1, no negative strides."""
    return _plain_cpu_float32(A)


def decide_effective_cpu(A: torch.Tensor, grid, groups, config, modes: torch.Tensor,
                         A_eff: torch.Tensor | None) -> bool:
    """The whole float-path decision of a CPU float32 operand ``A`` ``(..., S, K)`` with ``"group"`` scales in
    one compiled call: the scale, every group's lines, the modes into ``modes`` ``(..., S, G)`` (zeros) and,
    unless ``A_eff`` is ``None``, every row of ``A_eff`` (``A``'s shape).  Returns ``False`` without deciding
    when a scale is not finite (the caller raises).  Equal to ``quant_scale`` -> ``decide_grid`` (tested)."""
    lead = tuple(A.shape[:-2])
    S, K = A.shape[-2], A.shape[-1]
    e = A if A_eff is None else A_eff
    nl = len(lead)
    bases = np.array(_lead_offsets(lead, A.stride()[:nl], e.stride()[:nl], modes.stride()[:nl]), dtype=np.int64)
    row_strides = np.array([A.stride(-2), e.stride(-2), modes.stride(-2)], dtype=np.int64)
    size = np.asarray(groups.sizes, dtype=np.float64)
    linf = config.metric == "linf"
    t1s = (np.full(len(groups), config.theta1) if linf else config.theta1 * size).astype(np.float32).astype(np.float64)
    t2s = (np.full(len(groups), config.theta2) if linf else config.theta2 * size).astype(np.float32).astype(np.float64)
    xa = _storage(A)
    return bool(_decide_matrices(
        xa, xa if A_eff is None else _storage(A_eff), _storage(modes), bases, row_strides, S, grid.prefix,
        grid.T, grid.H, grid.W, np.asarray((*groups.offsets, K), dtype=np.int64),
        np.asarray(group_runs(groups), dtype=np.int64).reshape(-1, 3), np.asarray([Axis.parse(a).dim for a in groups.axes], dtype=np.int64), t1s, t2s, np.float32(127),
        linf, -(2 ** (config.low_bits - 1)), 2 ** (config.low_bits - 1) - 1, A_eff is not None))
