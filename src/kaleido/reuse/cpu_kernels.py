"""Compiled CPU kernels (numba) for the per-call work of the float path.

On a CPU every torch op costs microseconds of dispatch however few elements it touches, so
on a small model (or a short axis) the decision's time is the ops' count, not their size;
at a real model's size the torch loop's dozen passes per position are memory-bound.  The
kernels here do that work in one compiled pass each, with results equal bit for bit to the
torch code they stand in for (tested).  Their loops run over row views (slices), which LLVM
vectorises (indexing the flat storage by computed offsets did not: 10x slower); an operand of
:data:`PARALLEL_MIN_ELEMENTS` or more is shared out over torch's intra-op thread count, in
contiguous parts of about equal cost run on Python threads (the kernels release the GIL; no
second OpenMP runtime beside torch's):

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

import threading

import numba
import numpy as np
import torch

from .grid import Axis
from .runs import group_runs

#: input dtypes the kernel takes; anything else (bf16, fp16, another device) uses the torch loop
KERNEL_DTYPES = (torch.float32, torch.float64, torch.int8)
#: operands with fewer elements than this run on the calling thread alone: measured at 2 threads, a
#: 655,360-element decision takes 1.57 ms split and 1.60 ms serial (starting a thread costs ~0.1 ms), a
#: 2.6 Mi-element one 3.0-3.5 ms split against 4.4-5.6 ms serial
PARALLEL_MIN_ELEMENTS = 1 << 20


def _n_threads(numel: int) -> int:
    """How many threads a kernel call over ``numel`` elements uses: torch's intra-op thread count (its
    threads sleep meanwhile), or one for a small operand."""
    return 1 if numel < PARALLEL_MIN_ELEMENTS else max(1, torch.get_num_threads())


def _balanced_parts(costs: np.ndarray, n: int) -> list[tuple[int, int]]:
    """At most ``n`` contiguous ranges ``[i0, i1)`` of the items of ``costs``, each of about equal cost."""
    if n <= 1 or costs.shape[0] <= 1:
        return [(0, int(costs.shape[0]))]
    m = int(costs.shape[0])
    cum = np.cumsum(costs, dtype=np.float64)
    cuts = set()
    for target in cum[-1] * np.arange(1, n) / n:  # a part ends after the item whose running cost is nearest
        i = int(np.searchsorted(cum, target, side="left"))
        b = i if i > 0 and abs(cum[i - 1] - target) <= abs(cum[min(i, m - 1)] - target) else i + 1
        cuts.add(min(max(b, 1), m - 1))
    bounds = [0, *sorted(cuts), m]
    return [(i0, i1) for i0, i1 in zip(bounds[:-1], bounds[1:]) if i1 > i0]


def _on_threads(kernel, args: tuple, parts: list[tuple[int, int]]) -> list:
    """``kernel(*args, i0, i1)`` for every part, the first on the calling thread and the others on threads of
    their own (the kernels release the GIL); their results in order.  A kernel's exception is re-raised."""
    results: list = [None] * len(parts)
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            results[i] = kernel(*args, *parts[i])
        except BaseException as e:  # noqa: BLE001 - re-raised on the calling thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(1, len(parts))]
    for t in threads:
        t.start()
    work(0)
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _decide_run_line(x, xe, modes, ox, oe, om, sx, se, sm, L, c0, n, size, s, eff, q, d, t1, t2, linf, lo, hi,
                     write_eff):  # pragma: no cover - compiled
    """Decide one line of a run of ``n`` groups of ``size`` channels from channel ``c0``: the rows at
    ``ox + p * sx`` (``x``) and ``oe + p * se`` (``xe``), the modes at ``om + p * sm + g``, for positions
    ``p < L`` along the reuse axis.  ``s`` the per-channel scale and ``eff`` / ``q`` / ``d`` buffers, all
    indexed by channel.  Position 0 computes (its modes are left as they are).  The int8 units are held as
    int32 (integer reductions vectorise); ``rint(x / s)`` is torch's ``div(x, s).round_()``; every difference,
    maximum and sum is an exact integer.  Every loop runs over a slice (a row view), not over offsets into the
    flat storage: only then does LLVM vectorise it (measured 10x on a row's channel loop)."""
    C = n * size
    sr, er, qr, dr = s[c0 : c0 + C], eff[c0 : c0 + C], q[c0 : c0 + C], d[c0 : c0 + C]
    xr = x[ox + c0 : ox + c0 + C]
    for c in range(C):
        er[c] = np.int32(np.rint(xr[c] / sr[c]))
    if write_eff:
        xer = xe[oe + c0 : oe + c0 + C]
        for c in range(C):
            xer[c] = xr[c]
    for p in range(1, L):
        px, pe = ox + p * sx + c0, oe + p * se + c0
        xr = x[px : px + C]
        for c in range(C):  # the run's whole row at once: one contiguous pass
            qv = np.int32(np.rint(xr[c] / sr[c]))
            qr[c] = qv
            dr[c] = qv - er[c]
        mr = modes[om + p * sm : om + p * sm + n]
        if write_eff:
            xer, xpr = xe[pe : pe + C], xe[pe - se : pe - se + C]  # this row's and the previous one's
        for g in range(n):
            dg = dr[g * size : (g + 1) * size]
            if linf:  # one reduction: max |d| (every d then fits: theta2 <= 2**(low_bits-1))
                delta = 0
                for c in range(size):
                    delta = max(delta, abs(dg[c]))
                fits = True
            else:
                delta, dmax, dmin = 0, dg[0], dg[0]
                for c in range(size):
                    dmax = max(dmax, dg[c])
                    dmin = min(dmin, dg[c])
                    delta += abs(dg[c])
                fits = dmax <= hi and dmin >= lo
            full = delta < t1
            if full:
                mode = 2
            elif delta < t2 and fits:
                mode = 1
            else:
                mode = 0
            mr[g] = mode
            g0 = g * size
            if full:
                if write_eff:
                    for c in range(g0, g0 + size):
                        xer[c] = xpr[c]
            else:
                for c in range(g0, g0 + size):
                    er[c] = qr[c]
                if write_eff:
                    for c in range(g0, g0 + size):
                        xer[c] = xr[c]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _decide_lines(x, xe, modes, scale, bases, strides, L, A, B, n, size, t1, t2, linf, lo, hi,
                  write_eff, l0, l1):  # pragma: no cover - compiled
    """Decide lines ``l0 <= l < l1`` (``l = (k * A + a) * B + b``) of a run of ``n`` groups of ``size`` channels
    along the reuse axis.

    ``x`` / ``xe`` / ``modes``: 1-D views of the storage (channels at stride 1);
    ``bases[k]`` ``(x, xe, modes, scale)`` offsets of leading index ``k``; ``strides[v]``
    ``(axis, a, b)`` element strides of view ``v`` (x, xe, modes); ``scale`` ``(n_lead, n * size)``.
    """
    eff = np.empty(n * size, np.int32)
    q = np.empty(n * size, np.int32)
    d = np.empty(n * size, np.int32)
    for line in range(l0, l1):
        k, ab = line // (A * B), line % (A * B)
        a, b = ab // B, ab % B
        _decide_run_line(x, xe, modes, bases[k, 0] + a * strides[0, 1] + b * strides[0, 2],
                         bases[k, 1] + a * strides[1, 1] + b * strides[1, 2],
                         bases[k, 2] + a * strides[2, 1] + b * strides[2, 2],
                         strides[0, 0], strides[1, 0], strides[2, 0], L, 0, n, size, scale[bases[k, 3]], eff, q, d,
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
    A, B = x.shape[a], x.shape[b]
    lines = bases.shape[0] * A * B
    parts = _balanced_parts(np.ones(lines), _n_threads(x.numel()))
    _on_threads(_decide_lines, (xa, xa if x_eff is None else _storage(x_eff), _storage(modes), scale, bases, strides,
                                x.shape[dim], A, B, n, size, float(np.float32(thresholds[0])),
                                float(np.float32(thresholds[1])), linf, lo, hi, x_eff is not None), parts)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _channel_absmax(x, bases, row_stride, K, chunks, out, i0, i1):  # pragma: no cover - compiled
    """``out[i]`` ``(K,)`` = max |x| per channel over rows ``r0 <= r < r1`` of matrix ``k`` (at ``bases[k]``) for
    each chunk ``chunks[i] = (k, r0, r1)``, ``i0 <= i < i1``.  NaN propagates (``v != v``), so the finiteness
    check can read the result.  No fastmath: ``v != v`` must see NaN; the loop runs over a row view, so it
    vectorises anyway."""
    for i in range(i0, i1):
        k, r0, r1 = chunks[i, 0], chunks[i, 1], chunks[i, 2]
        m = out[i]
        m[:] = 0.0
        for r in range(r0, r1):
            o = bases[k] + r * row_stride
            xr = x[o : o + K]
            for c in range(K):
                v = abs(xr[c])
                m[c] = v if (v > m[c]) | (v != v) else m[c]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _scales_of(m, offsets, qmax, out):  # pragma: no cover - compiled
    """Per group (``offsets``: group g = channels offsets[g]:offsets[g+1]) of each matrix's channel maxima
    ``m`` ``(n, K)``: the maximum over ``qmax`` (1 where it is 0) into every channel of ``out`` ``(n, K)``.
    Returns whether every maximum is finite."""
    finite = True
    for k in range(m.shape[0]):
        for g in range(offsets.shape[0] - 1):
            gm = m[k, offsets[g]]
            for c in range(offsets[g] + 1, offsets[g + 1]):
                gm = m[k, c] if (m[k, c] > gm) | (m[k, c] != m[k, c]) else gm
            finite = finite and np.isfinite(gm)
            sc = gm / qmax if gm > 0 else np.float32(1.0)
            for c in range(offsets[g], offsets[g + 1]):
                out[k, c] = sc
    return finite


def _group_scales(xa: np.ndarray, bases: np.ndarray, S: int, row_stride: int, K: int, offsets: np.ndarray,
                  qmax: int, out: np.ndarray, threads: int) -> bool:
    """The ``"group"`` scale of every matrix (``bases``: their offsets into ``xa``, ``S`` rows each) into ``out``
    ``(n, K)``, on ``threads`` threads (a matrix's rows split between them when there are fewer matrices than
    threads); returns whether every maximum is finite."""
    n = bases.shape[0]
    per = max(1, min(S, -(-threads // n)))  # row chunks per matrix
    edges = np.arange(per + 1, dtype=np.int64) * S // per
    chunks = np.stack([np.repeat(np.arange(n, dtype=np.int64), per), np.tile(edges[:-1], n), np.tile(edges[1:], n)],
                      axis=1)
    partial = np.empty((n * per, K), np.float32)
    _on_threads(_channel_absmax, (xa, bases, row_stride, K, chunks, partial),
                _balanced_parts(np.ones(len(chunks)), threads))
    m = partial.reshape(n, per, K).max(axis=1) if per > 1 else partial  # np.max propagates NaN
    return bool(_scales_of(m, offsets, np.float32(qmax), out))


def _plain_cpu_float32(x: torch.Tensor) -> bool:
    return (x.device.type == "cpu" and x.dtype == torch.float32 and not x.requires_grad and x.dim() >= 2
            and (x.stride(-1) == 1 or x.shape[-1] == 1) and min(x.stride()) >= 0 and x.numel() > 0)


def group_scale(x: torch.Tensor, offsets: tuple[int, ...], qmax: int) -> tuple[torch.Tensor, bool] | None:
    """The ``"group"`` quantisation scale of ``x`` ``(..., S, K)`` in one pass: ``((..., 1, K) float32,
    every maximum finite)``, or ``None`` where the kernel does not apply (not a CPU float32 tensor with
    channels at stride 1).  ``offsets``: the groups' channel offsets and ``K`` last."""
    if not _plain_cpu_float32(x):
        return None
    lead, (S, K) = tuple(x.shape[:-2]), x.shape[-2:]
    out = torch.empty(*lead, 1, K, dtype=torch.float32)
    bases = np.array([o[0] for o in _lead_offsets(lead, x.stride()[:-2])], dtype=np.int64)
    finite = _group_scales(_storage(x), bases, S, x.stride(-2), K, np.asarray(offsets, dtype=np.int64), qmax,
                           out.view(-1, K).numpy(), _n_threads(x.numel()))
    return out, finite


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


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _decide_items(x, xe, modes, bases, row_strides, prefix, T, H, W, offsets, runs, axes, t1s, t2s, scales,
                  linf, lo, hi, write_eff, items, i0, i1):  # pragma: no cover - compiled
    """:func:`decide_effective_cpu`'s lines on the storages: for each item ``items[i] = (k, j, l0, l1)``,
    ``i0 <= i < i1``, lines ``l0 <= l < l1`` of run ``j`` (``runs[j]``: first group, n, size; one size and axis)
    of matrix ``k`` (``bases[k]``: its x, xe, modes offsets), with its scale ``scales[k]``."""
    K = offsets[offsets.shape[0] - 1]
    rx, re, rm = row_strides[0], row_strides[1], row_strides[2]
    eff = np.empty(K, np.int32)
    q = np.empty(K, np.int32)
    d = np.empty(K, np.int32)
    for i in range(i0, i1):
        k, j, l0, l1 = items[i, 0], items[i, 1], items[i, 2], items[i, 3]
        bx, be, bm = bases[k, 0], bases[k, 1], bases[k, 2]
        g0, n, size = runs[j, 0], runs[j, 1], runs[j, 2]
        ax = axes[g0]
        L = T if ax == 0 else (H if ax == 1 else W)
        pstep = H * W if ax == 0 else (W if ax == 1 else 1)  # rows between neighbours along the axis
        B = W if ax != 2 else H
        for line in range(l0, l1):
            a, b = line // B, line % B
            # the line's first row: (t, h, w) with the axis coordinate 0
            if ax == 0:
                r0 = prefix + a * W + b
            elif ax == 1:
                r0 = prefix + a * H * W + b
            else:
                r0 = prefix + (a * H + b) * W
            _decide_run_line(x, xe, modes, bx + r0 * rx, be + r0 * re, bm + r0 * rm + g0, pstep * rx,
                             pstep * re, pstep * rm, L, offsets[g0], n, size, scales[k], eff, q, d, t1s[g0],
                             t2s[g0], linf, lo, hi, write_eff)


def _line_items(n_mat: int, runs: np.ndarray, axes: np.ndarray, T: int, H: int, W: int,
                threads: int) -> tuple[np.ndarray, np.ndarray]:
    """``(items, costs)`` for :func:`_decide_items`: every (matrix, run) with its lines, the lines split in
    ``threads`` ranges where there are too few (matrix, run) pairs to share out whole.  Built with array ops:
    this runs on every decision."""
    L = np.array((T, H, W), dtype=np.int64)[axes[runs[:, 0]]]  # (R,) line length of each run
    lines = T * H * W // L
    parts = np.minimum(1 if n_mat * runs.shape[0] >= 4 * threads else threads, lines)
    j = np.repeat(np.arange(runs.shape[0]), parts)  # the run of each part
    p = np.arange(j.shape[0]) - np.repeat(np.cumsum(parts) - parts, parts)  # the part's index in its run
    l0, l1 = p * lines[j] // parts[j], (p + 1) * lines[j] // parts[j]
    per_matrix = np.stack([j, l0, l1], axis=1)
    k = np.repeat(np.arange(n_mat, dtype=np.int64), per_matrix.shape[0])
    items = np.concatenate([k[:, None], np.tile(per_matrix, (n_mat, 1))], axis=1)
    costs = np.tile((l1 - l0) * L[j] * runs[j, 1] * runs[j, 2], n_mat).astype(np.float64)
    return items, costs


def fused_applies(A: torch.Tensor) -> bool:
    """Whether :func:`decide_effective_cpu` takes ``A``: a CPU float32 ``(..., S, K)`` tensor without autograd,
    channels at stride 1, no negative strides."""
    return _plain_cpu_float32(A)


def decide_effective_cpu(A: torch.Tensor, grid, groups, config, modes: torch.Tensor,
                         A_eff: torch.Tensor | None) -> bool:
    """The whole float-path decision of a CPU float32 operand ``A`` ``(..., S, K)`` with ``"group"`` scales:
    the scale, every group's lines, the modes into ``modes`` ``(..., S, G)`` (zeros) and, unless ``A_eff`` is
    ``None``, every grid row of ``A_eff`` (``A``'s shape; the caller copies the rows off the grid).  Two compiled passes (the scale, then the lines), each on
    torch's intra-op threads for a large operand.  Returns ``False`` without deciding when a scale is not
    finite (the caller raises).  Equal to ``quant_scale`` -> ``decide_grid`` (tested)."""
    lead = tuple(A.shape[:-2])
    S, K = A.shape[-2], A.shape[-1]
    e = A if A_eff is None else A_eff
    nl = len(lead)
    bases = np.array(_lead_offsets(lead, A.stride()[:nl], e.stride()[:nl], modes.stride()[:nl]), dtype=np.int64)
    threads = _n_threads(A.numel())
    offsets = np.asarray((*groups.offsets, K), dtype=np.int64)
    xa = _storage(A)
    scales = np.empty((bases.shape[0], K), np.float32)
    if not _group_scales(xa, np.ascontiguousarray(bases[:, 0]), S, A.stride(-2), K, offsets, 127, scales, threads):
        return False
    row_strides = np.array([A.stride(-2), e.stride(-2), modes.stride(-2)], dtype=np.int64)
    size = np.asarray(groups.sizes, dtype=np.float64)
    linf = config.metric == "linf"
    t1s = (np.full(len(groups), config.theta1) if linf else config.theta1 * size).astype(np.float32).astype(np.float64)
    t2s = (np.full(len(groups), config.theta2) if linf else config.theta2 * size).astype(np.float32).astype(np.float64)
    runs = np.asarray(group_runs(groups), dtype=np.int64).reshape(-1, 3)
    axes = np.asarray([Axis.parse(a).dim for a in groups.axes], dtype=np.int64)
    items, costs = _line_items(bases.shape[0], runs, axes, grid.T, grid.H, grid.W, threads)
    _on_threads(_decide_items, (xa, xa if A_eff is None else _storage(A_eff), _storage(modes), bases, row_strides,
                                grid.prefix, grid.T, grid.H, grid.W, offsets, runs, axes, t1s, t2s, scales, linf,
                                -(2 ** (config.low_bits - 1)), 2 ** (config.low_bits - 1) - 1, A_eff is not None,
                                items), _balanced_parts(costs, threads))
    return True
