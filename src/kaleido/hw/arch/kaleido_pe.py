"""The reconfigurable Kaleido PE: four execution modes and a bit-exact tile model (SPEC §5).

Modes (our choice for the fourth one is PACKED):

=========  ==========================================  ===============  =========================
mode       what the PE does per channel and column     PE-cycles        energy actions
=========  ==========================================  ===============  =========================
COMPUTE    ``acc += a * b`` (8 x 8-bit multiply)       1                one 8x8 MAC
PARTIAL    ``acc += d * b`` (low_bits x 8-bit), onto   1                one low x 8 MAC
           the reference's partial kept in the extra
           register (read once per row/group/column)
PACKED     two PARTIAL differences ``d1, d2`` of two   1/2 per operand  two low x 8 MACs, one
           tokens share one 8-bit lane; the split                       shared ``b`` operand
           8x8 multiplier forms ``d1*b`` and ``d2*b``
           in one cycle into two accumulators
           (needs ``2 * low_bits <= 8``)
FULL       no multiply: the reference's partial is     0                reuse-register read/write
           forwarded to the output
=========  ==========================================  ===============  =========================

:func:`split_multiply` is the bit-level model of PACKED (two signed ``low_bits``
fields of one byte, each multiplied by a signed byte by summing its partial
products, the sign bit weighted negatively).  :func:`pe_tile_products` runs a small
GEMM through these modes, tokens in stream (raster) order, and returns the per-group
int64 partial products the hardware produces; it must equal the reuse core's int8
path bit for bit (``tests/hw/arch/test_pe_functional.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import torch

from kaleido.reuse import Mode, ModeMap


class PEMode(IntEnum):
    COMPUTE = 0
    PARTIAL = 1
    FULL = 2
    PACKED = 3


def mode_cycle_cost(mode: PEMode, packed_available: bool) -> float:
    """PE-cycles per (channel, column) operand in ``mode``."""
    if mode == PEMode.COMPUTE:
        return 1.0
    if mode == PEMode.PARTIAL:
        return 0.5 if packed_available else 1.0
    if mode == PEMode.PACKED:
        if not packed_available:
            raise ValueError("PACKED needs 2*low_bits <= 8")
        return 0.5
    return 0.0


def pack_pair(d1: np.ndarray, d2: np.ndarray, low_bits: int) -> np.ndarray:
    """Two signed ``low_bits``-wide values -> one byte (``d1`` low field, ``d2`` high field)."""
    if 2 * low_bits > 8:
        raise ValueError(f"two {low_bits}-bit differences do not fit one 8-bit lane (need low_bits <= 4)")
    lim = 1 << (low_bits - 1)
    for d in (d1, d2):
        if np.any(d < -lim) or np.any(d >= lim):
            raise ValueError(f"difference outside the signed {low_bits}-bit range [{-lim}, {lim - 1}]")
    mask = (1 << low_bits) - 1
    return ((np.asarray(d1) & mask) | ((np.asarray(d2) & mask) << low_bits)).astype(np.uint8)


def split_multiply(word: np.ndarray, b: np.ndarray, low_bits: int) -> tuple[np.ndarray, np.ndarray]:
    """The split multiplier: the two signed fields of ``word`` times signed bytes ``b``.

    Each product is the sum of the field's partial products ``bit_j * b * 2**j``, the
    top (sign) bit weighted ``-2**(low_bits-1)`` - a Baugh-Wooley-style signed array
    multiplier cut into two ``low_bits x 8`` halves.  Returns two int64 arrays.
    """
    w = np.asarray(word).astype(np.int64)
    b = np.asarray(b).astype(np.int64)
    out = []
    for field in range(2):
        acc = np.zeros(np.broadcast(w, b).shape, dtype=np.int64)
        for j in range(low_bits):
            bit = (w >> (field * low_bits + j)) & 1
            weight = -(1 << j) if j == low_bits - 1 else (1 << j)
            acc = acc + bit * b * weight
        out.append(acc)
    return out[0], out[1]


def _low_multiply(d: np.ndarray, b: np.ndarray, low_bits: int) -> np.ndarray:
    """A single (unpacked) ``low_bits x 8`` multiply via the same partial products."""
    word = pack_pair(d, np.zeros_like(d), low_bits) if 2 * low_bits <= 8 else None
    if word is not None:
        return split_multiply(word, b, low_bits)[0]
    lim = 1 << (low_bits - 1)
    if np.any(d < -lim) or np.any(d >= lim):
        raise ValueError(f"difference outside the signed {low_bits}-bit range")
    return np.asarray(d, np.int64) * np.asarray(b, np.int64)


def pe_tile_products(A_q: torch.Tensor | np.ndarray, B_q: torch.Tensor | np.ndarray, mode_map: ModeMap) -> np.ndarray:
    """Per-group int64 partial products ``(G, S, N)`` of one GEMM instance, as the PEs form them.

    ``A_q``: ``(S, K)`` int8 values (the quantised operand the map was decided on);
    ``B_q``: ``(K, N)`` int8 values; ``mode_map``: ``(S, G)`` modes for ``A_q``.
    Tokens enter in sequence order.  PARTIAL rows of a group are packed two at a time
    (the matcher's pairing) when ``2*low_bits <= 8``; a PARTIAL row accumulates its
    difference products onto its reference's partial, a FULL row forwards it.
    """
    A = np.asarray(A_q, dtype=np.int64)
    B = np.asarray(B_q, dtype=np.int64)
    modes = mode_map.modes.numpy() if isinstance(mode_map.modes, torch.Tensor) else np.asarray(mode_map.modes)
    if modes.ndim != 2 or A.ndim != 2 or B.ndim != 2:
        raise ValueError("pe_tile_products takes one instance: A (S, K), B (K, N), modes (S, G)")
    S, K = A.shape
    if B.shape[0] != K or modes.shape != (S, len(mode_map.groups)):
        raise ValueError(f"shapes A {A.shape}, B {B.shape}, modes {modes.shape} do not agree")
    grid, groups, lb = mode_map.grid, mode_map.groups, int(mode_map.low_bits)
    if np.abs(A).max(initial=0) > 128 or np.abs(B).max(initial=0) > 128:
        raise ValueError("A_q and B_q must hold int8 values")
    packed = 2 * lb <= 8
    N = B.shape[1]
    out = np.zeros((len(groups), S, N), dtype=np.int64)
    off = grid.prefix
    for g, (sl, axis) in enumerate(zip(groups.slices, groups.axes)):
        ref_grid = grid.ref_index(axis).numpy()
        ref = np.full(S, -1, dtype=np.int64)
        ref[off:off + grid.n_grid] = np.where(ref_grid >= 0, ref_grid + off, -1)
        m = modes[:, g]
        if np.any((m != Mode.COMPUTE) & (ref < 0)):
            raise ValueError(f"group {groups.names[g]!r}: a row without a reference is not COMPUTE")
        Ag, Bg = A[:, sl], B[sl, :]
        # effective operand along the chain (what each row's result represents)
        eff = Ag.copy()
        for i in range(S):
            if m[i] == Mode.FULL:
                eff[i] = eff[ref[i]]
        # the array pass: COMPUTE rows (8x8) and PARTIAL rows' difference products
        prod = np.zeros((S, N), dtype=np.int64)
        comp = np.nonzero(m == Mode.COMPUTE)[0]
        prod[comp] = Ag[comp] @ Bg  # 8x8 MACs, exact in int64
        part = np.nonzero(m == Mode.PARTIAL)[0]
        if len(part):
            d = Ag[part] - eff[ref[part]]  # (P, k)
            if packed:
                if len(part) % 2:
                    d = np.vstack([d, np.zeros((1, d.shape[1]), np.int64)])
                word = pack_pair(d[0::2], d[1::2], lb)  # (P/2, k) bytes
                p1, p2 = split_multiply(word[:, :, None], Bg[None, :, :], lb)  # (P/2, k, N)
                pp = np.empty((d.shape[0], N), dtype=np.int64)
                pp[0::2], pp[1::2] = p1.sum(1), p2.sum(1)
                prod[part] = pp[: len(part)]
            else:
                prod[part] = _low_multiply(d[:, :, None], Bg[None, :, :], lb).sum(1)
        # output stage: resolve references in stream order (refs always come earlier)
        res = out[g]
        for i in range(S):
            if m[i] == Mode.COMPUTE:
                res[i] = prod[i]
            elif m[i] == Mode.PARTIAL:
                res[i] = res[ref[i]] + prod[i]
            else:
                res[i] = res[ref[i]]
    return out


# -- where a reference's partial result lives ---------------------------------------------
#: How a FULL / PARTIAL reference read is priced (``docs/hardware.md``, "Where an anchor's
#: partial result lives"): ``mapped`` derives the location from the stream order (the
#: default), ``register`` prices every reference as a PE register (the paper's wording),
#: ``sram_1m`` prices every reference as a 1 MB SRAM access (the pessimistic bound).
ANCHOR_PRICINGS = ("mapped", "register", "sram_1m")
REUSE_AXES = ("t", "h", "w")
#: bytes per (row, group, output column) reuse item: read the reference's int32 partial, write this row's
ANCHOR_BYTES_PER_ITEM = 8
PSUM_BYTES = 4


def anchor_distance_rows(axis: str, grid_thw: tuple[int, int, int]) -> int:
    """Rows of the raster-ordered stream between a row and its reference along ``axis``.

    Tokens stream t-major, then h, then w (SPEC §2), in both dataflows (the WS stream
    and the OS row folds keep the arrival order between anchors and the rows that
    reuse them): the reference along w is the previous row, along h ``W`` rows back,
    along t ``H * W`` rows back.
    """
    if axis not in REUSE_AXES:
        raise ValueError(f"reuse axis {axis!r} is not one of {REUSE_AXES}")
    _, H, W = (int(x) for x in grid_thw)
    return {"w": 1, "h": W, "t": H * W}[axis]


@dataclass(frozen=True)
class AnchorPlan:
    """Where the reference partials of one GEMM's groups live, and what reading them costs.

    ``axis_mix``: ``(G, 3)`` share of group ``g``'s reuse items whose reference lies
    along t / h / w (a RoPE group has one axis; a chunk group carried from several
    measured groups has the channel-weighted mix).  ``group_fold``: the K-fold each
    group sits in (WS: only that fold's groups are live at once; OS: all groups, one
    fold index).  ``cols``: output columns held at once (the array's C).

    A reference one row back (distance 1) is still in the PE's extra register (it
    was produced on the previous stream cycle).  Any farther reference has left the
    array: it sits in an on-chip anchor store that holds ``distance x cols x 4``
    bytes for every group of the live fold that reuses along that axis, priced per
    byte as an SRAM of that size (``EnergyTable.sram_pj_per_byte``).
    """

    axis_mix: np.ndarray
    grid_thw: tuple[int, int, int]
    group_fold: tuple[int, ...]
    cols: int
    pricing: str = "mapped"

    def __post_init__(self) -> None:
        mix = np.asarray(self.axis_mix, dtype=np.float64)
        if mix.ndim != 2 or mix.shape[1] != 3 or len(self.group_fold) != mix.shape[0]:
            raise ValueError(f"AnchorPlan.axis_mix must be (G, 3) with one fold per group, got {mix.shape}")
        if self.pricing not in ANCHOR_PRICINGS:
            raise ValueError(f"anchor pricing {self.pricing!r}: use one of {ANCHOR_PRICINGS}")
        object.__setattr__(self, "axis_mix", mix)

    def store_kib(self) -> np.ndarray:
        """``(G, 3)`` KiB of the anchor store each (group, axis) reads from (0: the PE register)."""
        folds = np.asarray(self.group_fold, dtype=np.int64)
        out = np.zeros(self.axis_mix.shape)
        for a, axis in enumerate(REUSE_AXES):
            d = anchor_distance_rows(axis, self.grid_thw)
            if d <= 1:
                continue
            live = np.bincount(folds, weights=self.axis_mix[:, a])[folds]  # groups of the live fold on this axis
            out[:, a] = live * d * self.cols * PSUM_BYTES / 1024.0
        return out

    def split_bytes(self, items: np.ndarray) -> tuple[float, dict[str, float]]:
        """``(register bytes, {store KiB: bytes})`` of ``items[g]`` reuse items per group."""
        items = np.asarray(items, dtype=np.float64)
        b = items[:, None] * self.axis_mix * ANCHOR_BYTES_PER_ITEM
        if self.pricing == "register":
            return float(b.sum()), {}
        if self.pricing == "sram_1m":
            return 0.0, ({"1024": float(b.sum())} if b.sum() > 0 else {})
        kib = self.store_kib()
        reg = float(b[kib == 0].sum())
        far = (kib > 0) & (b > 0)
        uniq, inv = np.unique(kib[far], return_inverse=True)
        sums = np.bincount(inv.reshape(-1), weights=b[far], minlength=len(uniq))
        return reg, {f"{k:.6g}": float(v) for k, v in zip(uniq, sums)}
