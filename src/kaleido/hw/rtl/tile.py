"""Weight-stationary ``R x C`` array tiles: dense and Kaleido (SPEC §5).

Mapping (``kaleido.hw.arch.mapping``, WS): the ``K`` channels of the GEMM sit on the ``R`` rows,
the ``N`` output columns on the ``C`` columns, tokens stream in time.

Timing, both tiles: ``load`` high for ``R`` cycles shifts the weights down the columns (the
word entering at cycle ``c`` ends in row ``R - 1 - c``). A slot presented at the left edge
in cycle ``t`` reaches row ``k`` ``k`` cycles later (the edge skew registers) and column
``n`` ``n`` cycles after that; the partial sum of the row ending a chain, column ``n``, is
in its output register ``e + n + 1`` cycles after ``t`` (``e`` that row). ``out_valid``
flags it: a delay line of the slot's valid bit at the edge, so a column never carries a
valid bit of its own.

The Kaleido tile cuts each column's partial-sum chain at the channel-group boundaries
(``group_sizes``, fixed when the tile is built): group ``g``'s first row starts from 0 and
its last row's two lanes leave the tile as ``tap[g][n][lane]``. The slot former at the edge
turns a slot of up to two tokens (``x[lane][k]``: the operand or difference byte of row
``k``; ``mode[lane][g]``: :class:`kaleido.reuse.Mode` of the token's group ``g``) into each
row's PE mode, lane select and operand word.
"""

from __future__ import annotations

from . import require_amaranth

require_amaranth()

from amaranth import Cat, Elaboratable, Module, Mux, Signal, signed  # noqa: E402

from ..arch.kaleido_pe import PEMode  # noqa: E402
from kaleido.reuse import Mode  # noqa: E402

from .pe import DensePE, KaleidoPE, check_widths  # noqa: E402

MAX_TILE = 64


def check_tile(rows: int, cols: int) -> None:
    """One-line ``ValueError`` for a tile size the RTL is not built for."""
    for name, v in (("rows", rows), ("cols", cols)):
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_TILE:
            raise ValueError(f"tile {name}={v!r} is not supported; use 1..{MAX_TILE} (e.g. an 8x8 or 16x16 tile; "
                             "the 128x128 array is modelled by kaleido.hw)")


def _delay(m: Module, sig: Signal, n: int, name: str) -> Signal:
    """``sig`` delayed by ``n`` registers (``n = 0``: the signal itself)."""
    cur = sig
    for i in range(n):
        nxt = Signal.like(sig, name=f"{name}_d{i + 1}")
        m.d.sync += nxt.eq(cur)
        cur = nxt
    return cur


class DenseTile(Elaboratable):
    """An ``rows x cols`` tile of :class:`~kaleido.hw.rtl.pe.DensePE` (the reference design)."""

    def __init__(self, rows: int, cols: int, acc_bits: int = 32):
        check_tile(rows, cols)
        check_widths(4, acc_bits)
        self.rows, self.cols, self.acc_bits = rows, cols, acc_bits
        self.load = Signal()
        self.w = [Signal(signed(8), name=f"w{n}") for n in range(cols)]
        self.valid = Signal()
        self.x = [Signal(8, name=f"x{k}") for k in range(rows)]
        self.out = [Signal(signed(acc_bits), name=f"out{n}") for n in range(cols)]
        self.out_valid = [Signal(name=f"out_valid{n}") for n in range(cols)]

    def ports(self) -> list:
        return [self.load, *self.w, self.valid, *self.x, *self.out, *self.out_valid]

    def elaborate(self, platform):
        m = Module()
        R, C = self.rows, self.cols
        pe = [[DensePE(self.acc_bits) for _ in range(C)] for _ in range(R)]
        for k in range(R):
            xk = Signal(8, name=f"xg{k}")
            m.d.comb += xk.eq(Mux(self.valid, self.x[k], 0))
            a = _delay(m, xk, k, f"skew{k}")
            for n in range(C):
                p = pe[k][n]
                m.submodules[f"pe_{k}_{n}"] = p
                m.d.comb += [p.load.eq(self.load), p.a_in.eq(a if n == 0 else pe[k][n - 1].a_out),
                             p.w_in.eq(self.w[n] if k == 0 else pe[k - 1][n].w_out),
                             p.psum_in.eq(0 if k == 0 else pe[k - 1][n].psum_out)]
        vline = _delay_taps(m, self.valid, R + C, "vline")
        for n in range(C):
            m.d.comb += [self.out[n].eq(pe[R - 1][n].psum_out), self.out_valid[n].eq(vline[R + n])]
        return m


def _delay_taps(m: Module, sig: Signal, n: int, name: str) -> list[Signal]:
    """``[sig, sig delayed 1, ..., sig delayed n]``."""
    out = [sig]
    for i in range(n):
        nxt = Signal.like(sig, name=f"{name}_{i + 1}")
        m.d.sync += nxt.eq(out[-1])
        out.append(nxt)
    return out


class KaleidoTile(Elaboratable):
    """An ``rows x cols`` tile of :class:`~kaleido.hw.rtl.pe.KaleidoPE` with a slot former and group taps."""

    def __init__(self, rows: int, cols: int, group_sizes: tuple[int, ...], low_bits: int = 4, acc_bits: int = 32):
        check_tile(rows, cols)
        check_widths(low_bits, acc_bits)
        sizes = tuple(int(s) for s in group_sizes)
        if not sizes or any(s < 1 for s in sizes) or sum(sizes) != rows:
            raise ValueError(f"group sizes {sizes} must be positive and sum to the tile's {rows} rows; "
                             "build the tile with rows = the K-fold's channels")
        self.rows, self.cols, self.group_sizes = rows, cols, sizes
        self.low_bits, self.acc_bits = low_bits, acc_bits
        self.packed = 2 * low_bits <= 8
        G = len(sizes)
        self.load = Signal()
        self.w = [Signal(signed(8), name=f"w{n}") for n in range(cols)]
        self.valid = [Signal(name=f"valid{l}") for l in range(2)]
        self.x = [[Signal(8, name=f"x{l}_{k}") for k in range(rows)] for l in range(2)]
        self.mode = [[Signal(2, name=f"mode{l}_{g}", init=int(Mode.FULL)) for g in range(G)] for l in range(2)]
        self.tap = [[[Signal(signed(acc_bits), name=f"tap{g}_{n}_{l}") for l in range(2)] for n in range(cols)]
                    for g in range(G)]
        self.tap_valid = [[Signal(name=f"tap_valid{g}_{n}") for n in range(cols)] for g in range(G)]

    def ports(self) -> list:
        flat = [s for lane in self.x for s in lane] + [s for lane in self.mode for s in lane]
        taps = [s for g in self.tap for n in g for s in n] + [s for g in self.tap_valid for s in g]
        return [self.load, *self.w, *self.valid, *flat, *taps]

    def elaborate(self, platform):
        m = Module()
        R, C, lb = self.rows, self.cols, self.low_bits
        offs = [sum(self.group_sizes[:g]) for g in range(len(self.group_sizes))]
        last = [o + s - 1 for o, s in zip(offs, self.group_sizes)]
        # slot former: per group, the PE mode and lane select of the slot's (up to) two tokens
        pe_mode, pe_sel = [], []
        for g in range(len(self.group_sizes)):
            m0 = Signal(2, name=f"sm0_{g}")
            m1 = Signal(2, name=f"sm1_{g}")
            m.d.comb += [m0.eq(Mux(self.valid[0], self.mode[0][g], int(Mode.FULL))),
                         m1.eq(Mux(self.valid[1], self.mode[1][g], int(Mode.FULL)))]
            pm, ps = Signal(2, name=f"pm{g}"), Signal(name=f"ps{g}")
            with m.If(m0 == int(Mode.COMPUTE)):
                m.d.comb += [pm.eq(int(PEMode.COMPUTE)), ps.eq(0)]
            with m.Elif(m1 == int(Mode.COMPUTE)):
                m.d.comb += [pm.eq(int(PEMode.COMPUTE)), ps.eq(1)]
            with m.Elif((m0 == int(Mode.PARTIAL)) & (m1 == int(Mode.PARTIAL)) & int(self.packed)):
                m.d.comb += [pm.eq(int(PEMode.PACKED)), ps.eq(0)]
            with m.Elif(m0 == int(Mode.PARTIAL)):
                m.d.comb += [pm.eq(int(PEMode.PARTIAL)), ps.eq(0)]
            with m.Elif(m1 == int(Mode.PARTIAL)):
                m.d.comb += [pm.eq(int(PEMode.PARTIAL)), ps.eq(1)]
            with m.Else():
                m.d.comb += [pm.eq(int(PEMode.FULL)), ps.eq(0)]
            pe_mode.append(pm)
            pe_sel.append(ps)
        pe = [[KaleidoPE(lb, self.acc_bits) for _ in range(C)] for _ in range(R)]
        for k in range(R):
            g = max(i for i, o in enumerate(offs) if o <= k)
            word = Signal(8, name=f"word{k}")
            x0, x1 = self.x[0][k], self.x[1][k]
            packed_word = Cat(x0[0:lb], x1[0:lb]) if self.packed else x0
            m.d.comb += word.eq(Mux(pe_mode[g] == int(PEMode.PACKED), packed_word,
                                    Mux(pe_mode[g] == int(PEMode.FULL), 0, Mux(pe_sel[g], x1, x0))))
            a = _delay(m, word, k, f"skew_a{k}")
            md = _delay(m, pe_mode[g], k, f"skew_m{k}")
            sl = _delay(m, pe_sel[g], k, f"skew_s{k}")
            for n in range(C):
                p = pe[k][n]
                m.submodules[f"pe_{k}_{n}"] = p
                left = pe[k][n - 1] if n else None
                m.d.comb += [p.load.eq(self.load),
                             p.a_in.eq(left.a_out if left else a),
                             p.mode_in.eq(left.mode_out if left else md),
                             p.sel_in.eq(left.sel_out if left else sl),
                             p.w_in.eq(self.w[n] if k == 0 else pe[k - 1][n].w_out)]
                for lane in range(2):
                    above = 0 if k in offs else pe[k - 1][n].psum_out[lane]  # the chain starts at a group's first row
                    m.d.comb += p.psum_in[lane].eq(above)
        vline = _delay_taps(m, self.valid[0] | self.valid[1], R + C, "vline")
        for g, e in enumerate(last):
            for n in range(C):
                m.d.comb += [self.tap[g][n][lane].eq(pe[e][n].psum_out[lane]) for lane in range(2)]
                m.d.comb += self.tap_valid[g][n].eq(vline[e + n + 1])
        return m
