"""Processing elements: the dense int8 PE and the reconfigurable Kaleido PE (SPEC §5).

Both are weight-stationary: the PE holds one int8 weight ``b`` (shifted in from above while
``load`` is high), takes an 8-bit operand word from the left and passes it on to the right
one cycle later, and adds its product onto the partial sum coming from above, passing the
sum down one cycle later.

The Kaleido PE's multiplier is split in two signed halves, ``(low_bits + 1) x 8`` and
``(8 - low_bits) x 8``, and it carries two partial-sum lanes (the extra accumulator). Its
mode (:class:`kaleido.hw.arch.kaleido_pe.PEMode`) and lane select travel with the operand:

=========  =====================================================================
COMPUTE    the two halves form ``a * b`` (``a`` = unsigned low field + signed high
           field ``<< low_bits``), added to lane ``sel``
PARTIAL    the low half forms ``d * b`` of the sign-extended ``low_bits`` difference
           ``d``, added to lane ``sel``
PACKED     the word holds two differences (low field, high field) of two tokens:
           ``d0 * b`` goes to lane 0 and ``d1 * b`` to lane 1, one cycle for both
           (only when ``2 * low_bits <= 8``)
FULL       nothing is multiplied or added; the lanes pass through
=========  =====================================================================
"""

from __future__ import annotations

from . import require_amaranth

require_amaranth()

from amaranth import Cat, Const, Elaboratable, Module, Mux, Signal, signed  # noqa: E402

from ..arch.kaleido_pe import PEMode  # noqa: E402

SUPPORTED_LOW_BITS = range(1, 8)
SUPPORTED_ACC_BITS = range(18, 65)


def check_widths(low_bits: int, acc_bits: int) -> None:
    """One-line ``ValueError`` for a bit width the PE cannot be built with."""
    if isinstance(low_bits, bool) or not isinstance(low_bits, int) or low_bits not in SUPPORTED_LOW_BITS:
        raise ValueError(f"low_bits={low_bits!r} is not supported by the RTL PE; use 1..7 (2*low_bits <= 8 enables PACKED)")
    if isinstance(acc_bits, bool) or not isinstance(acc_bits, int) or acc_bits not in SUPPORTED_ACC_BITS:
        raise ValueError(f"acc_bits={acc_bits!r} is not supported by the RTL PE; use 18..64 (32 holds the int32 partials)")


class DensePE(Elaboratable):
    """A dense int8 weight-stationary PE: ``psum_out <= psum_in + a * b``."""

    def __init__(self, acc_bits: int = 32):
        check_widths(4, acc_bits)
        self.acc_bits = acc_bits
        self.a_in = Signal(8)
        self.a_out = Signal(8)
        self.psum_in = Signal(signed(acc_bits))
        self.psum_out = Signal(signed(acc_bits))
        self.load = Signal()
        self.w_in = Signal(signed(8))
        self.w_out = Signal(signed(8))

    def ports(self) -> list:
        return [self.a_in, self.a_out, self.psum_in, self.psum_out, self.load, self.w_in, self.w_out]

    def elaborate(self, platform):
        m = Module()
        b = Signal(signed(8))
        with m.If(self.load):
            m.d.sync += b.eq(self.w_in)
        m.d.comb += self.w_out.eq(b)
        m.d.sync += [self.a_out.eq(self.a_in), self.psum_out.eq(self.psum_in + self.a_in.as_signed() * b)]
        return m


class KaleidoPE(Elaboratable):
    """The reconfigurable PE: four modes, a split multiplier and two partial-sum lanes (module docstring)."""

    def __init__(self, low_bits: int = 4, acc_bits: int = 32):
        check_widths(low_bits, acc_bits)
        self.low_bits, self.acc_bits = low_bits, acc_bits
        self.packed = 2 * low_bits <= 8
        self.a_in, self.a_out = Signal(8), Signal(8)
        self.mode_in, self.mode_out = Signal(2, init=int(PEMode.FULL)), Signal(2, init=int(PEMode.FULL))
        self.sel_in, self.sel_out = Signal(), Signal()
        self.psum_in = [Signal(signed(acc_bits), name=f"psum{l}_in") for l in range(2)]
        self.psum_out = [Signal(signed(acc_bits), name=f"psum{l}_out") for l in range(2)]
        self.load = Signal()
        self.w_in = Signal(signed(8))
        self.w_out = Signal(signed(8))

    def ports(self) -> list:
        return [self.a_in, self.a_out, self.mode_in, self.mode_out, self.sel_in, self.sel_out,
                *self.psum_in, *self.psum_out, self.load, self.w_in, self.w_out]

    def elaborate(self, platform):
        m = Module()
        lb, a, mode = self.low_bits, self.a_in, self.mode_in
        b = Signal(signed(8))
        with m.If(self.load):
            m.d.sync += b.eq(self.w_in)
        m.d.comb += self.w_out.eq(b)

        is_compute = mode == int(PEMode.COMPUTE)
        is_partial = mode == int(PEMode.PARTIAL)
        is_packed = (mode == int(PEMode.PACKED)) if self.packed else Const(0)
        lo = a[0:lb]
        # low half: the unsigned low field of an 8-bit operand, or a sign-extended difference
        op_lo = Signal(signed(lb + 1))
        m.d.comb += op_lo.eq(Mux(is_compute, Cat(lo, Const(0, 1)),
                                 Mux(is_partial | is_packed, Cat(lo, lo[lb - 1]), 0)))
        # high half: the signed high field of an 8-bit operand, or the second (packed) difference
        hi_w = 8 - lb
        op_hi = Signal(signed(hi_w))
        hi_packed = Cat(a[lb:2 * lb], *([a[2 * lb - 1]] * (hi_w - lb))) if self.packed else Const(0, hi_w)
        m.d.comb += op_hi.eq(Mux(is_compute, a[lb:8], Mux(is_packed, hi_packed, 0)))
        p_lo = Signal(signed(lb + 9))
        p_hi = Signal(signed(hi_w + 8))
        p8 = Signal(signed(17))
        m.d.comb += [p_lo.eq(op_lo * b), p_hi.eq(op_hi * b), p8.eq(p_lo + (p_hi << lb))]
        # lane inputs: one product into lane `sel`, or both halves (PACKED) into lanes 0 and 1
        single = Signal(signed(17))
        m.d.comb += single.eq(Mux(is_compute, p8, Mux(is_partial, p_lo, 0)))
        add0, add1 = Signal(signed(17)), Signal(signed(17))
        m.d.comb += [add0.eq(Mux(is_packed, p_lo, Mux(self.sel_in, 0, single))),
                     add1.eq(Mux(is_packed, p_hi, Mux(self.sel_in, single, 0)))]
        m.d.sync += [self.a_out.eq(a), self.mode_out.eq(mode), self.sel_out.eq(self.sel_in),
                     self.psum_out[0].eq(self.psum_in[0] + add0), self.psum_out[1].eq(self.psum_in[1] + add1)]
        return m
