"""Run one GEMM tile through the circuits (Amaranth's simulator) and through the cost model.

:func:`run_kaleido_tile` streams one WS K-fold: the dispatcher circuit
(:class:`~kaleido.hw.rtl.dispatcher.Dispatcher`) forms the slots of each dispatch window, the
tile circuit (:class:`~kaleido.hw.rtl.tile.KaleidoTile`) multiplies them, and the output stage
(the anchor store, played by the test bench: it is an SRAM, priced from CACTI, not RTL)
resolves the taps in sequence order - a COMPUTE item is its product, a PARTIAL item its
reference's result plus its product, a FULL item its reference's result.
:func:`model_tile` is what :mod:`kaleido.hw` charges for the same tile:
:func:`kaleido.hw.arch.dispatcher.dispatch` for the stream and
:func:`kaleido.hw.arch.compute.folded_cycles` for the cycles.

``cycles`` of a run counts clock edges from the first weight-load edge until the last
result sits in its output register.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from . import require_amaranth

require_amaranth()

from amaranth.sim import Simulator  # noqa: E402

from ..arch.compute import dense_cycles, folded_cycles  # noqa: E402
from ..arch.config import ArrayConfig  # noqa: E402
from ..arch.dispatcher import RowStats, dispatch  # noqa: E402
from kaleido.reuse import Mode, ModeMap, effective_operand  # noqa: E402

from .dispatcher import Dispatcher  # noqa: E402
from .tile import DenseTile, KaleidoTile, check_tile  # noqa: E402

#: dispatcher levels the circuits implement (WS: the scheduler level streams what "none" streams)
RTL_LEVELS = ("none", "scheduler+matcher")


@dataclass
class TileRun:
    """What the circuits produced for one tile.

    ``products``: ``(G, S, N)`` int64 per-group results after the output stage (dense:
    ``(1, S, N)``); ``cycles``: clock edges until the last result is registered;
    ``stream``: slots streamed; ``slots``: ``(lane-0 token, lane-1 token or -1)`` per slot;
    ``dispatcher_cycles``: per window, cycles the dispatcher took (ingest + one per slot +
    one to finish); ``idle_lane_taps``: taps of an unused lane that were not 0 (a wiring
    error if any).
    """

    products: np.ndarray
    cycles: int
    stream: int
    slots: list = field(default_factory=list)
    dispatcher_cycles: list = field(default_factory=list)
    idle_lane_taps: int = 0


@dataclass(frozen=True)
class ModelTile:
    """What :mod:`kaleido.hw` charges for the tile: streamed slots, cycles, the dispatch window used."""

    stream: float
    cycles: float
    window_rows: int


def tile_config(rows: int, cols: int, low_bits: int, window_rows: int | None = None) -> ArrayConfig:
    """The :class:`~kaleido.hw.arch.config.ArrayConfig` of an ``rows x cols`` WS tile."""
    return ArrayConfig(rows=rows, cols=cols, dataflow="ws", timing="default", low_bits=low_bits,
                       dispatch_window_rows=window_rows)


def _modes(mode_map: ModeMap) -> np.ndarray:
    m = mode_map.modes.numpy().astype(np.uint8)
    if m.ndim != 2:
        raise ValueError(f"the RTL tile takes one GEMM instance: a mode map (S, G), got shape {tuple(m.shape)}; "
                         "index the leading dims first")
    return m


def _check_level(level: str) -> None:
    if level not in RTL_LEVELS:
        raise ValueError(f"dispatcher level {level!r} is not built in RTL; use one of {RTL_LEVELS}")


def model_tile(mode_map: ModeMap, n_cols: int, cols: int, window_rows: int | None = None,
               level: str = "scheduler+matcher", complementary: bool = True) -> ModelTile:
    """The cost model's stream and cycles for ``mode_map`` on a WS tile of ``K x cols`` PEs."""
    _check_level(level)
    m = _modes(mode_map)
    R = mode_map.groups.dim
    cfg = tile_config(R, cols, int(mode_map.low_bits), window_rows)
    rs = RowStats.from_rows(m[None], mode_map.groups.sizes)
    W = window_rows if window_rows is not None else m.shape[0]
    dr = dispatch(rs, n_cols, "ws", R, cols, cfg.packed_partial, W, complementary, cfg.timing)
    stream = dr.stream[level]
    return ModelTile(float((stream * dr.fold_mult[level]).sum()),
                     folded_cycles(stream, dr.fold_mult[level] * dr.col_folds, cfg), dr.window_rows)


def _run(dut, steps: int, drive, watch) -> None:
    """Simulate ``steps`` cycles: ``drive(ctx, c)`` sets inputs, ``watch(ctx, c)`` reads outputs, then a clock edge."""
    sim = Simulator(dut)
    sim.add_clock(1e-6)

    async def bench(ctx):
        for c in range(steps):
            drive(ctx, c)
            if watch(ctx, c):
                return
            await ctx.tick()

    sim.add_testbench(bench)
    sim.run()


def run_dispatcher(modes: np.ndarray, window: int, low_bits: int, level: str = "scheduler+matcher",
                   complementary: bool = True) -> tuple[list[tuple[int, int]], list[int]]:
    """Slots the dispatcher circuit forms for ``modes`` ``(S, G)``, window by window of ``window`` rows.

    Returns ``(slots, cycles per window)``; token indices are sequence indices.
    """
    _check_level(level)
    modes = np.asarray(modes, dtype=np.uint8)
    S, G = modes.shape
    dut = Dispatcher(max(2, window), G, low_bits, complementary)
    slots: list[tuple[int, int]] = []
    cycles: list[int] = []
    starts = list(range(0, S, window))
    codes = [sum(int(v) << (2 * g) for g, v in enumerate(row)) for row in modes]
    st = {"w": 0, "c0": 0}  # the window being dispatched, the cycle it began

    def drive(ctx, c):
        s0 = starts[st["w"]]
        n = min(window, S - s0)
        j = c - st["c0"]
        ctx.set(dut.pair_enable, int(level != "none"))
        ctx.set(dut.in_valid, int(j < n))
        ctx.set(dut.in_modes, codes[s0 + j] if j < n else 0)
        ctx.set(dut.in_last, int(j == n - 1))

    def watch(ctx, c):
        s0 = starts[st["w"]]
        if ctx.get(dut.out_valid):
            i0 = s0 + ctx.get(dut.out_idx[0])
            i1 = s0 + ctx.get(dut.out_idx[1]) if ctx.get(dut.out_v[1]) else -1
            slots.append((i0, i1))
        if ctx.get(dut.done):
            cycles.append(c + 1 - st["c0"])
            st["w"] += 1
            st["c0"] = c + 1
            return st["w"] == len(starts)
        return False

    if starts:
        _run(dut, 3 * S + 4 * len(starts) + 4, drive, watch)
    if len(cycles) != len(starts):
        raise RuntimeError("the dispatcher circuit did not finish its windows")
    return slots, cycles


def _differences(A: np.ndarray, mode_map: ModeMap, modes: np.ndarray) -> np.ndarray:
    """``(S, K)``: each PARTIAL item's difference to its reference's effective operand (0 elsewhere)."""
    grid, groups, lb = mode_map.grid, mode_map.groups, int(mode_map.low_bits)
    eff = effective_operand(torch.tensor(A), mode_map).numpy()
    d = np.zeros_like(A)
    lim = 1 << (lb - 1)
    for g, (sl, axis) in enumerate(zip(groups.slices, groups.axes)):
        ref = _refs(mode_map, axis)
        rows = np.nonzero(modes[:, g] == Mode.PARTIAL)[0]
        if len(rows):
            d[rows, sl] = A[rows, sl] - eff[ref[rows], sl]
            if d[rows, sl].min() < -lim or d[rows, sl].max() >= lim:
                raise ValueError(f"group {groups.names[g]!r}: a PARTIAL difference does not fit {lb} bits; "
                                 "the mode map was not decided for this operand and low_bits")
    return d


def _refs(mode_map: ModeMap, axis) -> np.ndarray:
    """``(S,)`` sequence index of each row's reference along ``axis`` (-1: none)."""
    grid = mode_map.grid
    ref = np.full(grid.seq_len, -1, dtype=np.int64)
    r = grid.ref_index(axis).numpy()
    ref[grid.prefix:grid.prefix + grid.n_grid] = np.where(r >= 0, r + grid.prefix, -1)
    return ref


def _int8(x, what: str) -> np.ndarray:
    a = np.asarray(x.numpy() if isinstance(x, torch.Tensor) else x).astype(np.int64)
    if a.ndim != 2:
        raise ValueError(f"{what} must be a 2-D matrix, got shape {a.shape}")
    if a.size and (a.min() < -128 or a.max() > 127):
        raise ValueError(f"{what} holds values outside int8 [-128, 127]; quantise it first (kaleido.reuse.quantize)")
    return a


def run_kaleido_tile(A_q, B_q, mode_map: ModeMap, cols: int | None = None, window_rows: int | None = None,
                     level: str = "scheduler+matcher", complementary: bool = True) -> TileRun:
    """Run ``C = A_q B_q`` under ``mode_map`` through the dispatcher and a ``K x cols`` Kaleido tile.

    ``A_q`` ``(S, K)`` and ``B_q`` ``(K, N)`` int8 values, ``mode_map`` ``(S, G)`` decided on
    ``A_q``; ``K`` (the groups' channels) is the tile's rows, ``N <= cols``. The dispatch
    window is the one :func:`model_tile` reports for ``window_rows``.
    """
    _check_level(level)
    A, B = _int8(A_q, "A_q"), _int8(B_q, "B_q")
    modes = _modes(mode_map)
    groups, lb = mode_map.groups, int(mode_map.low_bits)
    S, K = A.shape
    N = B.shape[1]
    cols = N if cols is None else cols
    if K != groups.dim or B.shape[0] != K or modes.shape[0] != S:
        raise ValueError(f"shapes A {A.shape}, B {B.shape}, mode map {modes.shape} with {groups.dim} group channels "
                         "do not agree; the mode map must be A's")
    check_tile(K, cols)
    if N > cols:
        raise ValueError(f"B has {N} columns but the tile {cols}; build the tile with cols >= N (or split B by columns)")
    W = model_tile(mode_map, N, cols, window_rows, level, complementary).window_rows
    slots, dcyc = run_dispatcher(modes, W, lb, level, complementary)
    d = _differences(A, mode_map, modes)
    dut = KaleidoTile(K, cols, groups.sizes, lb)
    Bp = np.zeros((K, cols), np.int64)
    Bp[:, :N] = B
    G, T, R = len(groups), len(slots), K
    gslot = [np.nonzero(np.repeat(np.arange(G), groups.sizes) == g)[0] for g in range(G)]
    prod = np.zeros((G, S, N), np.int64)
    seen = np.zeros((G, S), np.int64)
    count = [[0] * cols for _ in range(G)]
    state = {"last": -1, "idle": 0}

    def drive(ctx, c):
        ctx.set(dut.load, int(c < R))
        for n in range(cols):
            ctx.set(dut.w[n], int(Bp[R - 1 - c, n]) if c < R else 0)
        s = c - R
        live = 0 <= s < T
        for lane in range(2):
            t = slots[s][lane] if live else -1
            ctx.set(dut.valid[lane], int(t >= 0))
            for g in range(G):
                mg = int(modes[t, g]) if t >= 0 else int(Mode.FULL)
                ctx.set(dut.mode[lane][g], mg)
                for k in gslot[g]:
                    v = A[t, k] if mg == Mode.COMPUTE else d[t, k] if mg == Mode.PARTIAL else 0
                    ctx.set(dut.x[lane][k], int(v) & 0xFF)

    def watch(ctx, c):
        for g in range(G):
            for n in range(cols):
                if not ctx.get(dut.tap_valid[g][n]):
                    continue
                s = count[g][n]
                count[g][n] += 1
                state["last"] = c
                for lane in range(2):
                    t = slots[s][lane]
                    v = int(ctx.get(dut.tap[g][n][lane]))
                    if t >= 0 and modes[t, g] != Mode.FULL:
                        if n < N:
                            prod[g, t, n] = v
                        seen[g, t] += n == 0
                    elif v != 0:
                        state["idle"] += 1
        return all(count[g][n] == T for g in range(G) for n in range(cols))

    if T:
        _run(dut, 2 * R + cols + T + 4, drive, watch)
    for g in range(G):
        need = modes[:, g] != Mode.FULL
        if not np.array_equal(seen[g] > 0, need) or seen[g].max(initial=0) > 1:
            raise RuntimeError(f"group {g}: the slots did not carry every used item exactly once")
    # the output stage: references resolved in sequence order (references always come earlier)
    res = np.zeros_like(prod)
    for g, axis in enumerate(groups.axes):
        ref = _refs(mode_map, axis)
        for i in range(S):
            mi = modes[i, g]
            res[g, i] = prod[g, i] if mi == Mode.COMPUTE else res[g, ref[i]] + (prod[g, i] if mi == Mode.PARTIAL else 0)
    return TileRun(res, state["last"] if T else 0, T, slots, dcyc, state["idle"])


def run_dense_tile(A_q, B_q, cols: int | None = None) -> TileRun:
    """Run the dense ``C = A_q B_q`` through a ``K x cols`` dense tile, one token per cycle."""
    A, B = _int8(A_q, "A_q"), _int8(B_q, "B_q")
    M, K = A.shape
    N = B.shape[1]
    cols = N if cols is None else cols
    if B.shape[0] != K:
        raise ValueError(f"A {A.shape} and B {B.shape} do not chain (K differs)")
    check_tile(K, cols)
    if N > cols:
        raise ValueError(f"B has {N} columns but the tile {cols}; build the tile with cols >= N")
    dut = DenseTile(K, cols)
    Bp = np.zeros((K, cols), np.int64)
    Bp[:, :N] = B
    out = np.zeros((1, M, N), np.int64)
    count = [0] * cols
    state = {"last": -1}

    def drive(ctx, c):
        ctx.set(dut.load, int(c < K))
        for n in range(cols):
            ctx.set(dut.w[n], int(Bp[K - 1 - c, n]) if c < K else 0)
        s = c - K
        ctx.set(dut.valid, int(0 <= s < M))
        for k in range(K):
            ctx.set(dut.x[k], int(A[s, k]) & 0xFF if 0 <= s < M else 0)

    def watch(ctx, c):
        for n in range(cols):
            if ctx.get(dut.out_valid[n]):
                if n < N:
                    out[0, count[n], n] = int(ctx.get(dut.out[n]))
                count[n] += 1
                state["last"] = c
        return all(x == M for x in count)

    _run(dut, 2 * K + cols + M + 4, drive, watch)
    return TileRun(out, state["last"], M, [(i, -1) for i in range(M)])


def model_dense_cycles(M: int, K: int, N: int, cols: int) -> float:
    """The cost model's cycles for the dense GEMM on a ``K x cols`` WS tile."""
    return dense_cycles(M, K, N, tile_config(K, cols, 4))
