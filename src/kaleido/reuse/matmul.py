"""The reuse GEMM ``C = A B`` (SPEC §3): an exact int8 path and a fast float path.

Both paths quantise ``A`` (per the config's granularity), decide a mode map on
``A_q`` and count operations from it; they differ in how ``C`` is formed.

* int8 path (``exact_int8=True``): ``B`` is quantised too (per column by default)
  and every group's partial product is built in integer arithmetic exactly as the
  reconfigurable PEs do, row by row along each line of the grid::

      COMPUTE:  C_g[i] = A_q[i, g] . B_q[g]                 (8 x 8-bit MACs)
      PARTIAL:  C_g[i] = C_g[ref(i)] + d_i . B_q[g]         (low_bits x 8-bit MACs)
      FULL:     C_g[i] = C_g[ref(i)]                        (no MACs)

  then ``C = sum_g C_g * scale_A[g] * scale_B`` (dequantised per group, groups in
  channel order).  Integer values are held in float32 (float64 when a group is wider
  than 520 channels), where every product and partial sum is an integer below
  ``2**24`` (``2**53``) and therefore exact; the result equals the
  effective-operand form ``eff_q[i, g] . B_q[g]`` bit for bit
  (:func:`int8_group_products` computes both).
* float path (default): the mode map is decided on ``A_q`` as above, FULL rows take
  their anchor's float operand, PARTIAL and COMPUTE rows their own (PARTIAL is exact),
  and ``C`` is one dense matmul of the effective operand with ``B``.
"""

from __future__ import annotations

import math
from typing import Iterator

import torch

from .config import ReuseConfig
from .decide import check_plain_config, decide, decide_effective, effective_operand
from .grid import TokenGrid
from .groups import ChannelGroups
from .modes import Mode, ModeMap
from .opcounts import OpCounts
from .quant import group_scale, quantize, quantize_columns

_FULL = int(Mode.FULL)
_PARTIAL = int(Mode.PARTIAL)


def int8_acc_dtype(groups: ChannelGroups) -> torch.dtype:
    """Float dtype that holds every integer of a group product exactly.

    A PARTIAL product ``d . B_q[g]`` is bounded by ``K_g * 254 * 127``; float32 is exact
    below ``2**24``.
    """
    return torch.float32 if max(groups.sizes) * 254 * 127 < 2**24 else torch.float64


class _LiteralGroupPlan:
    """One group's per-row multiplier operand and modes, in the grid's line layout.

    ``X`` holds what each row's PE multiplies: ``A_q`` for COMPUTE, the difference
    ``d`` for PARTIAL, nothing (0) for FULL.  :meth:`products` then accumulates along
    each line exactly as the hardware does.
    """

    def __init__(self, A_q: torch.Tensor, mode_map: ModeMap, g: int, acc: torch.dtype) -> None:
        grid, groups = mode_map.grid, mode_map.groups
        self.grid, self.axis, self.acc = grid, groups.axes[g], acc
        sl = groups.slices[g]
        Ag = A_q[..., sl]
        self.head = Ag[..., : grid.prefix, :].to(acc)
        self.tail = Ag[..., grid.prefix + grid.n_grid :, :].to(acc)
        lines = grid.to_lines(Ag[..., grid.grid_slice, :], self.axis).to(torch.int16)  # (L, *lead, nl, Kg)
        m = grid.to_lines(mode_map.modes[..., grid.grid_slice, g : g + 1], self.axis)  # (L, *lead, nl, 1)
        if bool((m[0] != 0).any()):
            raise ValueError(
                f"mode map reuses a token with no reference along axis {self.axis.value!r} "
                f"(group {groups.names[g]!r}); such tokens must compute"
            )
        lo, hi = -(2 ** (mode_map.low_bits - 1)), 2 ** (mode_map.low_bits - 1) - 1
        X = torch.empty_like(lines)
        X[0] = lines[0]
        eff = lines[0]
        zero = torch.zeros((), dtype=torch.int16)
        for p in range(1, lines.shape[0]):
            full, partial = m[p] == _FULL, m[p] == _PARTIAL
            d = lines[p] - eff
            if bool(((d < lo) | (d > hi)).logical_and_(partial).any()):
                raise ValueError(
                    f"mode map marks PARTIAL a row of group {groups.names[g]!r} whose difference does not fit "
                    f"in {mode_map.low_bits} signed bits: the map was not decided on this operand"
                )
            X[p] = torch.where(full, zero, torch.where(partial, d, lines[p]))
            eff = torch.where(full, eff, lines[p])
        self.X = X.to(acc)
        self.keep = (m != 0).to(acc)  # 1 where the row builds on its reference's result

    def accumulate(self, out: torch.Tensor, Bg: torch.Tensor, scale: torch.Tensor | float = 1.0) -> None:
        """``out += C_g * scale`` for ``Bg`` ``(..., K_g, n)``; ``out`` ``(*lead, S, n)`` contiguous.

        ``C_g`` is built line by line: position 0 computes, then for every later
        position ``C_g[p] = X[p] . Bg + keep[p] * C_g[p-1]`` with ``keep = 0`` for
        COMPUTE rows and ``1`` for PARTIAL (``X = d``: the low-bit correction onto the
        neighbour's result) and FULL rows (``X = 0``: the neighbour's result as is).
        All values are integers held exactly in ``acc``.
        """
        grid = self.grid
        C = torch.matmul(self.X, Bg)  # (L, *lead, nl, n): 8x8 for COMPUTE rows, low-bit for PARTIAL
        for p in range(1, C.shape[0]):
            C[p].addcmul_(self.keep[p], C[p - 1])
        lead = tuple(out.shape[:-2])
        n = out.shape[-1]
        others = [s for d, s in enumerate(grid.shape) if d != self.axis.dim]
        # the output's grid rows viewed in line layout (no copy): (L, *lead, a, b, n)
        out_lines = out[..., grid.grid_slice, :].view(*lead, *grid.shape, n).movedim(len(lead) + self.axis.dim, 0)
        scale = torch.as_tensor(scale, dtype=out.dtype)
        s_lines = scale.unsqueeze(-2) if scale.dim() >= 2 else scale  # (..., 1, 1, n) against (..., a, b, n)
        out_lines.add_(C.reshape(C.shape[0], *lead, *others, n) * s_lines)
        if grid.prefix:
            out[..., : grid.prefix, :].add_(torch.matmul(self.head, Bg) * scale)
        if grid.suffix:
            out[..., grid.prefix + grid.n_grid :, :].add_(torch.matmul(self.tail, Bg) * scale)

    def products(self, Bg: torch.Tensor) -> torch.Tensor:
        """``C_g`` ``(*lead, S, n)`` for ``Bg`` ``(..., K_g, n)`` (integer values in ``acc``)."""
        lead = tuple(self.X.shape[1:-2])
        out = torch.zeros(*lead, self.grid.seq_len, Bg.shape[-1], dtype=self.acc)
        self.accumulate(out, Bg)
        return out


def int8_group_products(
    A_q: torch.Tensor, B_q: torch.Tensor, mode_map: ModeMap, form: str = "literal"
) -> list[torch.Tensor]:
    """Per-group integer products ``C_g`` ``(..., S, N)`` of the int8 path.

    ``form="literal"``: the hardware's recurrence (``C_g[ref] + d . B_g`` for PARTIAL,
    a copy of ``C_g[ref]`` for FULL).  ``form="effective"``: ``eff_q . B_g`` with the
    effective operand gathered through :func:`anchor_index`.  Both are exact and
    equal.  Values are integers held in :func:`int8_acc_dtype`.
    """
    groups = mode_map.groups
    acc = int8_acc_dtype(groups)
    if form == "literal":
        return [
            _LiteralGroupPlan(A_q, mode_map, g, acc).products(B_q[..., sl, :].to(acc))
            for g, sl in enumerate(groups.slices)
        ]
    if form == "effective":
        A_eff = effective_operand(A_q, mode_map)
        return [torch.matmul(A_eff[..., sl].to(acc), B_q[..., sl, :].to(acc)) for sl in groups.slices]
    raise ValueError(f"unknown form {form!r}: use 'literal' or 'effective'")


def dequantize_group_products(
    products: list[torch.Tensor], scale_a: torch.Tensor, scale_b: torch.Tensor, groups: ChannelGroups
) -> torch.Tensor:
    """``sum_g C_g * scale_A[g] * scale_B`` in channel-group order, in the products' dtype."""
    out = None
    for g, Cg in enumerate(products):
        term = Cg * (group_scale(scale_a, groups, g).to(Cg.dtype) * scale_b.to(Cg.dtype))
        out = term if out is None else out + term
    return out


def _check_operands(A: torch.Tensor, B: torch.Tensor, grid: TokenGrid, groups: ChannelGroups) -> tuple[int, ...]:
    if not isinstance(A, torch.Tensor) or not isinstance(B, torch.Tensor):
        raise ValueError("reuse_matmul expects torch tensors A (..., S, K) and B (..., K, N)")
    if A.dim() < 2 or B.dim() < 2:
        raise ValueError(f"A must be (..., S, K) and B (..., K, N); got {tuple(A.shape)} and {tuple(B.shape)}")
    if A.shape[-1] != B.shape[-2]:
        raise ValueError(f"A has K={A.shape[-1]} channels but B has {B.shape[-2]} rows; they must match")
    groups.check_dim(A.shape[-1], "operand A")
    grid.check_seq_len(A.shape[-2], "operand A")
    try:
        return tuple(torch.broadcast_shapes(A.shape[:-2], B.shape[:-2]))
    except RuntimeError:
        raise ValueError(
            f"leading dims of A {tuple(A.shape[:-2])} and B {tuple(B.shape[:-2])} do not broadcast"
        ) from None


def int8_matmul_blocks(
    A_q: torch.Tensor,
    scale_a: torch.Tensor,
    mode_map: ModeMap,
    B: torch.Tensor,
    *,
    b_granularity: str = "column",
    verify: bool = False,
    max_block_elems: int = 1 << 21,
) -> Iterator[tuple[slice, torch.Tensor]]:
    """The int8 path one column block at a time: yields ``(cols, C[..., cols])``.

    ``A_q``/``scale_a`` from :func:`quantize`, ``mode_map`` decided on ``A_q``; ``B``
    (float, ``(..., K, N)``) is quantised here per ``b_granularity``.  A block holds at
    most ``max_block_elems`` output elements (the array's column tiling), dequantised,
    in :func:`int8_acc_dtype`.  ``verify=True`` also computes every block in the
    effective-operand form and raises ``AssertionError`` if it differs from the
    literal form.
    """
    groups = mode_map.groups
    B_q, scale_b = quantize_columns(B, b_granularity)
    acc = int8_acc_dtype(groups)
    plans = [_LiteralGroupPlan(A_q, mode_map, g, acc) for g in range(len(groups))]
    A_eff = effective_operand(A_q, mode_map) if verify else None
    lead = tuple(A_q.shape[:-2])
    S, N = A_q.shape[-2], B.shape[-1]
    rows = max(1, math.prod(lead) * S)
    block = max(1, min(N, max_block_elems // rows))
    for c0 in range(0, N, block):
        cols = slice(c0, min(N, c0 + block))
        sb = (scale_b[..., cols] if scale_b.shape[-1] > 1 else scale_b).to(acc)
        out = torch.zeros(*lead, S, cols.stop - cols.start, dtype=acc)
        for g, (plan, sl) in enumerate(zip(plans, groups.slices)):
            Bg = B_q[..., sl, cols].to(acc)
            plan.accumulate(out, Bg, group_scale(scale_a, groups, g).to(acc) * sb)
            if A_eff is not None:
                Cg, Ce = plan.products(Bg), torch.matmul(A_eff[..., sl].to(acc), Bg)
                if not torch.equal(Cg, Ce):
                    raise AssertionError(
                        f"int8 literal form differs from the effective-operand form in group {groups.names[g]!r} "
                        f"(max |diff| {float((Cg - Ce).abs().max())})"
                    )
        yield cols, out


def int8_matmul_from_map(
    A_q: torch.Tensor,
    scale_a: torch.Tensor,
    mode_map: ModeMap,
    B: torch.Tensor,
    *,
    b_granularity: str = "column",
    verify: bool = False,
    max_block_elems: int = 1 << 21,
) -> torch.Tensor:
    """The whole int8-path product ``(..., S, N)`` (see :func:`int8_matmul_blocks`)."""
    lead = tuple(A_q.shape[:-2])
    C = torch.empty(*lead, A_q.shape[-2], B.shape[-1], dtype=int8_acc_dtype(mode_map.groups))
    for cols, block in int8_matmul_blocks(
        A_q, scale_a, mode_map, B, b_granularity=b_granularity, verify=verify, max_block_elems=max_block_elems
    ):
        C[..., cols] = block
    return C


def reuse_matmul(
    A: torch.Tensor,
    B: torch.Tensor,
    grid: TokenGrid,
    groups: ChannelGroups,
    config: ReuseConfig,
    exact_int8: bool = False,
    *,
    b_granularity: str = "column",
    verify: bool = False,
) -> tuple[torch.Tensor, ModeMap, OpCounts]:
    """``C = A B`` with channel-group reuse along the rows of ``A``.

    ``A`` ``(..., S, K)`` float, rows in sequence order (``S == grid.seq_len``),
    channels partitioned by ``groups``; ``B`` ``(..., K, N)``, leading dims broadcast
    like :func:`torch.matmul`.  Returns ``(C (..., S, N), mode_map (..., S, G),
    op_counts)``; the mode map has the broadcast leading dims.

    ``exact_int8``: the bit-exact integer path (``B`` quantised per ``b_granularity``:
    ``"column"`` or ``"tensor"``; ``verify`` cross-checks the literal hardware form
    against the effective-operand form).  Otherwise the float path.
    """
    C, mode_map = reuse_matmul_map(A, B, grid, groups, config, exact_int8, b_granularity=b_granularity, verify=verify)
    return C, mode_map, mode_map.op_counts(B.shape[-1])


def reuse_matmul_map(
    A: torch.Tensor, B: torch.Tensor, grid: TokenGrid, groups: ChannelGroups, config: ReuseConfig,
    exact_int8: bool = False, *, b_granularity: str = "column", verify: bool = False,
) -> tuple[torch.Tensor, ModeMap]:
    """:func:`reuse_matmul` without the op counts (which copy counts to the host): ``(C, mode_map)``."""
    lead = _check_operands(A, B, grid, groups)
    check_plain_config(config)
    S, K = A.shape[-2], A.shape[-1]
    A = A.expand(*lead, S, K)
    if exact_int8:
        A_q, scale_a = quantize(A, groups, config.granularity)
        mode_map = decide(A_q, grid, groups, config)
        C = int8_matmul_from_map(A_q, scale_a, mode_map, B, b_granularity=b_granularity, verify=verify)
        out_dtype = A.dtype if A.dtype.is_floating_point else torch.float32
        return C.to(out_dtype), mode_map
    mode_map, A_eff = decide_effective(A, grid, groups, config)
    return torch.matmul(A_eff, B), mode_map
