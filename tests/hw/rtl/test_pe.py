"""One RTL PE against SPEC §5's mode table, worked out by hand for each mode.

The tile tests never drive a FULL PE with a non-zero operand (the tile zeroes a FULL item's
word before it enters the array), so the PE's own muxes are checked here on arbitrary words:
a FULL PE must pass both partial sums through whatever its operand holds.
"""

import pytest

pytest.importorskip("amaranth")

from amaranth.sim import Simulator  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kaleido.hw.arch.kaleido_pe import PEMode  # noqa: E402
from kaleido.hw.rtl.pe import DensePE, KaleidoPE  # noqa: E402


def sext(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def expected(mode: PEMode, a: int, b: int, sel: int, lb: int, ps: tuple[int, int]) -> tuple[int, int]:
    """The lanes after one cycle, from the mode table (not from the RTL's own signals)."""
    out = list(ps)
    if mode == PEMode.COMPUTE:
        out[sel] += sext(a, 8) * b
    elif mode == PEMode.PARTIAL:
        out[sel] += sext(a, lb) * b
    elif mode == PEMode.PACKED:
        out[0] += sext(a, lb) * b
        out[1] += sext(a >> lb, lb) * b
    return out[0], out[1]


def run_pe(pe: KaleidoPE, steps: list[tuple], b: int) -> list[tuple[int, int]]:
    got = []

    async def bench(ctx):
        ctx.set(pe.load, 1)
        ctx.set(pe.w_in, b)
        await ctx.tick()
        ctx.set(pe.load, 0)
        for mode, a, sel, p0, p1 in steps:
            ctx.set(pe.mode_in, int(mode))
            ctx.set(pe.a_in, a)
            ctx.set(pe.sel_in, sel)
            ctx.set(pe.psum_in[0], p0)
            ctx.set(pe.psum_in[1], p1)
            await ctx.tick()
            got.append((ctx.get(pe.psum_out[0]), ctx.get(pe.psum_out[1])))

    sim = Simulator(pe)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return got


psum = st.integers(-(1 << 20), 1 << 20)


@settings(max_examples=25, deadline=None)
@given(lb=st.sampled_from([2, 3, 4, 5, 7]), b=st.integers(-128, 127),
       steps=st.lists(st.tuples(st.sampled_from(list(PEMode)), st.integers(0, 255), st.integers(0, 1), psum, psum),
                 min_size=4, max_size=12))
def test_every_mode_on_arbitrary_words_matches_the_mode_table(lb, b, steps):
    pe = KaleidoPE(low_bits=lb)
    # PACKED needs 2 * low_bits <= 8: a wider PE treats the code as nothing to add (FULL)
    steps = [(PEMode.FULL if (m == PEMode.PACKED and not pe.packed) else m, *rest) for m, *rest in steps]
    got = run_pe(pe, steps, b)
    want = [expected(m, a, b, sel, lb, (p0, p1)) for m, a, sel, p0, p1 in steps]
    assert got == want


def test_full_passes_both_lanes_through_whatever_the_word_holds():
    pe = KaleidoPE(low_bits=4)
    steps = [(PEMode.FULL, a, sel, 1000, -7) for a in (0x7F, 0x80, 0xFF, 0x35) for sel in (0, 1)]
    assert run_pe(pe, steps, b=-93) == [(1000, -7)] * len(steps)


def test_dense_pe_multiplies_signed_operands():
    pe = DensePE()
    got = []

    async def bench(ctx):
        ctx.set(pe.load, 1)
        ctx.set(pe.w_in, -128)
        await ctx.tick()
        ctx.set(pe.load, 0)
        for a, p in ((0x80, 5), (0x7F, 0), (0xFF, -3)):
            ctx.set(pe.a_in, a)
            ctx.set(pe.psum_in, p)
            await ctx.tick()
            got.append(ctx.get(pe.psum_out))

    sim = Simulator(pe)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert got == [5 + 128 * 128, -127 * 128, -3 + 128]
