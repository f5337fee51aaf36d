"""The reuse decision (SPEC §3) and what a decision means for the operand.

:func:`decide` turns a quantised operand into a :class:`ModeMap`.  For each grid
row ``i`` and group ``g`` (reuse axis ``a(g)``, reference ``ref(i)`` the previous
token along ``a(g)``)::

    d     = A_q[i, g] - eff(ref(i), g)          # int8 units (exact integers in float32)
    Delta = max|d|   (metric "linf")  or  mean|d|  ("mean_abs")
    FULL     if Delta < theta1
    PARTIAL  if theta1 <= Delta < theta2 and every d fits in low_bits signed bits
    COMPUTE  otherwise (and always for a token at position 0 on a(g), and for non-grid rows)

``eff(r)`` is the operand row ``r``'s result represents: ``A_q[r, g]`` unless ``r``
is FULL, then ``eff(ref(r), g)``.  Comparing against ``eff`` (the drift rule)
keeps a chain of FULL rows within ``theta1`` of the operand it stands for.

The decision is sequential along each line of the grid parallel to ``a(g)`` and
independent across lines, so it loops over the axis length only and handles all
lines (and all leading dims) at once.

:func:`anchor_index` recovers, from a mode map alone, the sequence index of the row
whose operand each (row, group) result represents; :func:`effective_operand`
gathers that operand (the float path multiplies it densely).
"""

from __future__ import annotations

import math

import torch

from . import memory
from .config import ReuseConfig
from .grid import Axis, TokenGrid
from .groups import ChannelGroups
from .modes import Mode, ModeMap
from .quant import group_runs, quant_scale, raise_non_finite

_FULL = int(Mode.FULL)


def check_plain_config(config: ReuseConfig) -> None:
    if not isinstance(config, ReuseConfig):
        raise ValueError(f"config must be a ReuseConfig, got {type(config).__name__}")
    if config.has_schedule:
        raise ValueError(
            "this ReuseConfig carries a per-step schedule; resolve it first with "
            "config.at_step(step, num_steps) and pass the result"
        )


def decide(A_q: torch.Tensor, grid: TokenGrid, groups: ChannelGroups, config: ReuseConfig) -> ModeMap:
    """FULL/PARTIAL/COMPUTE per (row, group) of the int8 operand ``A_q`` ``(..., S, K)``.

    ``S == grid.seq_len`` rows in sequence order, ``K == groups.dim`` channels.
    Returns a :class:`ModeMap` of shape ``(..., S, G)``.  The same loop as the float
    path's :func:`decide_effective` (:func:`decide_grid`), on operands already quantised
    (scale 1: the values are the int8 units themselves).
    """
    if not isinstance(A_q, torch.Tensor) or A_q.dtype != torch.int8:
        raise ValueError(
            f"decide expects the int8 operand A_q, got {getattr(A_q, 'dtype', type(A_q).__name__)}; "
            "quantise it first with kaleido.reuse.quantize"
        )
    if A_q.dim() < 2:
        raise ValueError(f"A_q must have shape (..., S, K), got {tuple(A_q.shape)}")
    groups.check_dim(A_q.shape[-1], "operand A")
    grid.check_seq_len(A_q.shape[-2], "operand A")
    check_plain_config(config)
    lead = tuple(A_q.shape[:-2])
    modes = torch.zeros(*lead, grid.seq_len, len(groups), dtype=torch.uint8, device=A_q.device)
    if config.theta2 == 0.0:  # Delta >= 0 is never < 0: every row computes
        return ModeMap(modes, grid, groups, config.low_bits)
    thw = (grid.T, grid.H, grid.W)
    unit = torch.ones((1,) * (A_q.dim() + 2), dtype=torch.float32, device=A_q.device)
    decide_grid(A_q[..., grid.grid_slice, :].unflatten(-2, thw), None,
                modes[..., grid.grid_slice, :].unflatten(-2, thw), unit, groups, config)
    return ModeMap(modes, grid, groups, config.low_bits)


def decide_with_anchors(
    A_q: torch.Tensor, grid: TokenGrid, groups: ChannelGroups, config: ReuseConfig
) -> tuple[ModeMap, torch.Tensor]:
    """:func:`decide` and :func:`anchor_index` of its map."""
    mode_map = decide(A_q, grid, groups, config)
    return mode_map, anchor_index(mode_map)


def decide_effective(
    A: torch.Tensor, grid: TokenGrid, groups: ChannelGroups, config: ReuseConfig, *, backend: str = "auto",
    out: torch.Tensor | None = None,
) -> tuple[ModeMap, torch.Tensor]:
    """The float path's decision in one pass: ``(mode_map, A_eff)`` of a float operand ``A`` ``(..., S, K)``.

    Equal, mode for mode and value for value, to ``quantize`` -> :func:`decide_with_anchors`
    -> :func:`effective_operand` (tested), but each position of the grid is quantised,
    decided and its effective row written in place through strided views of ``A``: no
    int8 copy of ``A``, no reordering into lines, no anchor indices and no gather.  Runs
    of equal-size groups on one axis (chunk groups) are decided by one op per position.
    ``A_eff`` has ``A``'s shape, dtype, device and strides; it is ``A`` itself when no row
    can be FULL (``theta1 == 0``).  ``out``, if given, receives ``A_eff`` instead of a fresh tensor
    (``A``'s shape, dtype and device, any strides; e.g. a :class:`~kaleido.reuse.memory.Scratch`
    buffer); it is left untouched when ``A_eff`` is ``A``.  ``out`` may be ``A`` itself: the
    decision then overwrites ``A`` with ``A_eff`` in place (every element is read before it is
    written), for a caller that owns ``A`` and needs no other copy of it.  Nothing here synchronises with the host.
    Runs inside the profiler range ``kaleido.decide``; ``backend`` as in :func:`decide_grid`.
    """
    with torch.profiler.record_function("kaleido.decide"):
        return _decide_effective(A, grid, groups, config, backend, out)


def _effective_buffer(A: torch.Tensor, config: ReuseConfig, out: torch.Tensor | None) -> torch.Tensor:
    """Where the effective operand goes: ``A`` itself when no row can be FULL, else ``out`` or a fresh tensor."""
    if config.theta1 == 0.0:
        return A
    if out is None:
        return memory.empty_like(A)
    if not isinstance(out, torch.Tensor) or out.shape != A.shape or out.dtype != A.dtype or out.device != A.device:
        raise ValueError(
            f"out must match A ({tuple(A.shape)}, {A.dtype}, {A.device}), got "
            f"{tuple(getattr(out, 'shape', ()))}, {getattr(out, 'dtype', type(out).__name__)}, {getattr(out, 'device', '')}"
        )
    return out


def _decide_effective(
    A: torch.Tensor, grid: TokenGrid, groups: ChannelGroups, config: ReuseConfig, backend: str,
    out: torch.Tensor | None,
) -> tuple[ModeMap, torch.Tensor]:
    if not isinstance(A, torch.Tensor) or not torch.is_floating_point(A):
        raise ValueError(
            f"decide_effective expects the float operand A, got {getattr(A, 'dtype', type(A).__name__)}"
        )
    if A.dim() < 2:
        raise ValueError(f"A must have shape (..., S, K), got {tuple(A.shape)}")
    grid.check_seq_len(A.shape[-2], "operand A")
    check_plain_config(config)
    _check_backend(backend)
    if backend != "torch" and config.granularity == "group" and config.theta2 > 0:
        from . import cpu_kernels  # numba: imported (and compiled) on the first decision, not with kaleido

        if cpu_kernels.fused_applies(A):
            # the scale, every group's lines, the modes and the effective operand in one compiled call
            groups.check_dim(A.shape[-1], "quantised operand")
            modes = torch.zeros(*A.shape[:-2], grid.seq_len, len(groups), dtype=torch.uint8)
            A_eff = _effective_buffer(A, config, out)
            if not cpu_kernels.decide_effective_cpu(A, grid, groups, config, modes,
                                                    A_eff if config.theta1 > 0 else None):
                raise_non_finite(A, "operand A")
            _copy_off_grid(A, A_eff, grid)
            return ModeMap(modes, grid, groups, config.low_bits), A_eff
    scale = quant_scale(A, groups, config.granularity)  # validates dims and finiteness
    lead = tuple(A.shape[:-2])
    S, G = grid.seq_len, len(groups)
    modes = torch.zeros(*lead, S, G, dtype=torch.uint8, device=A.device)
    if config.theta2 == 0.0:  # every row computes
        return ModeMap(modes, grid, groups, config.low_bits), A
    A_eff = _effective_buffer(A, config, out)
    _copy_off_grid(A, A_eff, grid)
    thw = (grid.T, grid.H, grid.W)
    rows = A[..., grid.grid_slice, :].unflatten(-2, thw)
    # (theta1 > 0 with A_eff = A: out=A, written in place)
    rows_eff = A_eff[..., grid.grid_slice, :].unflatten(-2, thw) if config.theta1 > 0 else None
    decide_grid(rows, rows_eff, modes[..., grid.grid_slice, :].unflatten(-2, thw), scale.unsqueeze(-2).unsqueeze(-2),
                groups, config, backend)
    return ModeMap(modes, grid, groups, config.low_bits), A_eff


def _copy_off_grid(A: torch.Tensor, A_eff: torch.Tensor, grid: TokenGrid) -> None:
    """Rows off the grid (text tokens before or after it) always compute: their effective operand is their own."""
    if A_eff is not A:
        if grid.prefix:
            A_eff[..., : grid.prefix, :] = A[..., : grid.prefix, :]
        if grid.suffix:
            A_eff[..., grid.prefix + grid.n_grid :, :] = A[..., grid.prefix + grid.n_grid :, :]


#: how :func:`decide_grid` runs the loop: ``"auto"`` (the compiled CPU kernel where it applies, else the
#: torch loop), ``"kernel"`` or ``"torch"``
BACKENDS = ("auto", "kernel", "torch")


def _check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"unknown decision backend {backend!r}: use one of {BACKENDS}")


def decide_grid(
    x: torch.Tensor, x_eff: torch.Tensor | None, modes: torch.Tensor, scale: torch.Tensor,
    groups: ChannelGroups, config: ReuseConfig, backend: str = "auto",
) -> None:
    """The core of :func:`decide_effective` on grid-shaped views, for callers that tile the grid.

    ``x`` ``(*lead, T, H, W, K)`` float (any strides), ``x_eff`` the same shape or ``None``
    (no effective operand wanted), ``modes`` ``(*lead, T, H, W, G)`` uint8 to write into,
    ``scale`` :func:`~kaleido.reuse.quant.quant_scale`'s scale broadcastable to ``x``
    (computed on the whole matrix: a tile must not rescale).  ``x``'s T/H/W extents may be
    any sub-box of the grid that keeps every group's lines whole (e.g. all of T for t-groups).

    ``backend``: on the CPU with float32 / float64 / int8 operands, ``"auto"`` runs the
    compiled kernel of :mod:`kaleido.reuse.cpu_kernels` (the same modes and effective
    operand bit for bit, one pass per line instead of a dozen ops per position, on torch's
    intra-op threads for a large operand); ``"torch"``
    forces the torch loop (any device and dtype; nothing in it synchronises with the host).
    """
    _check_backend(backend)
    lo, hi = -(2 ** (config.low_bits - 1)), 2 ** (config.low_bits - 1) - 1
    linf = config.metric == "linf"
    nl = x.dim() - 4
    kernel = None
    if backend != "torch":
        from . import cpu_kernels  # numba: imported (and compiled) on the first decision, not with kaleido

        if cpu_kernels.kernel_applies(x, x_eff, modes):
            kernel = cpu_kernels
        elif backend == "kernel":
            raise ValueError(
                f"the compiled decision kernel takes CPU {cpu_kernels.KERNEL_DTYPES} operands without "
                f"autograd, got {x.dtype} on {x.device}; use backend 'auto' or 'torch'"
            )
    for g0, n, size in group_runs(groups):
        c0, c1 = groups.offsets[g0], groups.offsets[g0] + n * size
        dim = nl + Axis.parse(groups.axes[g0]).dim
        t = (config.theta1, config.theta2) if linf else (config.theta1 * size, config.theta2 * size)
        if kernel is not None:
            kernel.decide_run(x[..., c0:c1], None if x_eff is None else x_eff[..., c0:c1], modes[..., g0 : g0 + n],
                              scale[..., c0:c1] if scale.shape[-1] > 1 else scale, dim, n, size, t, linf, lo, hi)
            continue
        xr = x[..., c0:c1].unflatten(-1, (n, size))  # (*lead, T, H, W, n, size): a view
        xe = None if x_eff is None else x_eff[..., c0:c1].unflatten(-1, (n, size))
        s = scale[..., c0:c1].unflatten(-1, (n, size)) if scale.shape[-1] > 1 else scale.unsqueeze(-1)
        m = modes[..., g0 : g0 + n]  # (*lead, T, H, W, n)
        # lines are independent: decide them a block at a time, so the per-position temporaries stay
        # under BLOCK_ELEMENTS however large one position of the grid is (a real model's FFN input)
        bdim = max((d for d in range(nl, nl + 3) if d != dim), key=lambda d: xr.shape[d])
        per_index = xr.select(dim, 0).numel() // xr.shape[bdim]  # one position, one index along bdim
        step = max(1, BLOCK_ELEMENTS // max(1, per_index))
        for b0 in range(0, xr.shape[bdim], step):
            b = min(step, xr.shape[bdim] - b0)
            _decide_block(xr.narrow(bdim, b0, b), None if xe is None else xe.narrow(bdim, b0, b),
                          m.narrow(bdim, b0, b), s, dim, t, linf, lo, hi)


#: elements of one position's temporaries in :func:`decide_effective` (float32: 16 MiB each)
BLOCK_ELEMENTS = 1 << 22


def _decide_block(x, xe, m, s, dim, thresholds, linf, lo, hi) -> None:
    """Decide lines of ``x`` (``(*lead, T, H, W, n, size)`` view) along ``dim``; write modes into ``m`` and
    the effective operand into ``xe`` (both views)."""
    t1, t2 = thresholds
    s = s.select(dim, 0)  # broadcast against one position
    cur_x = x.select(dim, 0)
    # no clamp to +-QMAX: s = fl(amax / QMAX), so |x / s| <= QMAX * (1 + 2**-23) < QMAX + 0.5 and the
    # rounding already lands in [-QMAX, QMAX] (quantize's clamp never binds either).  Integers this
    # small are exact in float32, so differences, maxima and sums below are exact integers.
    eff_q = torch.div(cur_x, s).round_()
    q = torch.empty_like(eff_q)  # reused at every position
    d = torch.empty_like(eff_q)
    if xe is not None:
        xe.select(dim, 0).copy_(cur_x)
    last = x.shape[dim] - 1
    # few, fused ops per position: on a small model the decision's cost is the ops' count, not their size
    for p in range(1, last + 1):
        cur_x = x.select(dim, p)
        torch.div(cur_x, s, out=q).round_()
        torch.sub(q, eff_q, out=d)  # d = q(x_p) - eff_q
        # (not aminmax(dim=-1): over a group's few channels it is 3-6x slower than abs + amax on the CPU)
        delta = d.abs_().amax(-1) if linf else d.abs_().sum(-1)
        full = delta < t1
        mp = m.select(dim, p)
        torch.lt(delta, t2, out=mp)  # mode = [delta < theta2] + [delta < theta1]: COMPUTE 0, PARTIAL 1, FULL 2
        if not linf:  # linf: delta < theta2 <= 2**(low_bits-1) already makes every d fit
            d = torch.sub(q, eff_q)
            mp.mul_((d.amax(-1) <= hi) & (d.amin(-1) >= lo) | full)  # a FULL row need not fit
        mp.add_(full)
        # select by lerp with a 0/1 weight, exact (lerp is start + w * (end - start) for w < 0.5 and
        # end - (end - start) * (1 - w) otherwise, so w = 0 gives start and w = 1 gives end bit for bit)
        # and on the CPU ~6x faster than torch.where with a broadcast mask
        keep = full.unsqueeze(-1).to(q.dtype)
        if p < last:  # (the last position's effective operand is never compared against)
            eff_q = torch.lerp(q, eff_q, keep)  # q(x_p) where the row is not FULL
        if xe is not None:
            torch.lerp(cur_x, xe.select(dim, p - 1), keep.to(cur_x.dtype), out=xe.select(dim, p))


def anchor_index(mode_map: ModeMap) -> torch.Tensor:
    """``(..., S, G)`` int64: the sequence index of the row whose operand each result represents.

    A row's own index unless it is FULL for that group; a FULL row takes its
    reference's anchor (so a chain of FULL rows points at the COMPUTE or PARTIAL
    row that started it).
    """
    modes = mode_map.modes
    grid, groups = mode_map.grid, mode_map.groups
    lead = tuple(modes.shape[:-2])
    S, G = modes.shape[-2], modes.shape[-1]
    dev = modes.device
    out = torch.arange(S, dtype=torch.int64, device=dev).view(S, 1).expand(*lead, S, G).clone()
    if not bool((modes == _FULL).any()):
        return out
    own = torch.arange(grid.prefix, grid.prefix + grid.n_grid, dtype=torch.int64, device=dev).view(grid.n_grid, 1)
    for g, axis in enumerate(groups.axes):
        m = grid.to_lines(modes[..., grid.grid_slice, g : g + 1], axis)[..., 0]  # (L, *lead, n_lines)
        if bool((m[0] == _FULL).any()):
            raise ValueError(
                f"mode map marks FULL a token with no reference along axis {axis.value!r} "
                f"(group {groups.names[g]!r}); such tokens must compute"
            )
        own_lines = grid.to_lines(own, axis)[..., 0]  # (L, n_lines)
        anc = torch.empty(m.shape, dtype=torch.int64, device=dev)
        anc[0] = own_lines[0]
        for p in range(1, m.shape[0]):
            anc[p] = torch.where(m[p] == _FULL, anc[p - 1], own_lines[p])
        out[..., grid.grid_slice, g] = grid.from_lines(anc.unsqueeze(-1), axis)[..., 0]
    return out


def effective_operand(A: torch.Tensor, mode_map: ModeMap, anchors: torch.Tensor | None = None) -> torch.Tensor:
    """The operand each row's result represents: ``A_eff[..., i, g] = A[..., anchor[i, g], g]``.

    ``A`` ``(..., S, K)`` (any dtype, float or int8) with the mode map's leading
    dims.  Returns ``A`` itself when the map has no FULL entry.
    """
    groups = mode_map.groups
    if tuple(A.shape[:-2]) != tuple(mode_map.modes.shape[:-2]) or A.shape[-2] != mode_map.modes.shape[-2]:
        raise ValueError(
            f"operand of shape {tuple(A.shape)} does not match the mode map's rows {tuple(mode_map.modes.shape[:-1])}"
        )
    groups.check_dim(A.shape[-1], "operand A")
    if not bool((mode_map.modes == _FULL).any()):
        return A
    if anchors is None:
        anchors = anchor_index(mode_map)
    lead = tuple(A.shape[:-2])
    S, K = A.shape[-2], A.shape[-1]
    n_mat = math.prod(lead)
    flat_A = A.reshape(n_mat * S, K)  # one matrix after another (copies a strided view once)
    flat_idx = anchors.reshape(n_mat, S, -1)
    if n_mat > 1:
        flat_idx = flat_idx + (torch.arange(n_mat, device=anchors.device) * S).view(n_mat, 1, 1)
    flat_idx = flat_idx.reshape(n_mat * S, -1)
    out = torch.empty(n_mat * S, K, dtype=A.dtype, device=A.device)
    for g, sl in enumerate(groups.slices):
        out[:, sl] = torch.index_select(flat_A[:, sl], 0, flat_idx[:, g])
    return out.view(*lead, S, K)
