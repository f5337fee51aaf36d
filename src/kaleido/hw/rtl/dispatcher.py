"""The data dispatcher in hardware: the scheduler and the matcher of one dispatch window (SPEC §5).

*Scheduler*: tokens arrive one per cycle with their mode string (one
:class:`kaleido.reuse.Mode` per channel group of the K-fold). A token FULL in every group
uses no lane and is dropped; every other token is appended to the list of its class (its
mode string): one counter, head and tail per class, one next-pointer per token.

*Matcher*: then, one slot per cycle, it takes the first viable entry of a fixed priority
list of class pairs and pops one token of each class (two of one class) into the slot's
two lanes. The classes are ranked as :func:`kaleido.hw.arch.dispatcher.greedy_pairing` ranks
them (heaviest lane usage first, ties in mode-string order) and two classes are compatible
when their :func:`kaleido.hw.arch.dispatcher.usage` adds up to at most 2 in every group, so
taking the first viable entry each cycle is that greedy, one pair at a time. When no pair
is left the remaining tokens go one per slot; then ``done`` is raised for one cycle and the
window's state is cleared.

With ``pair_enable`` low (no matcher) every used token goes, in arrival order, one per slot.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from . import require_amaranth

require_amaranth()

from amaranth import Array, Elaboratable, Module, Mux, Signal  # noqa: E402

from ..arch.dispatcher import usage  # noqa: E402
from kaleido.reuse import Mode  # noqa: E402

MAX_GROUPS = 4
MAX_WINDOW = 4096


@dataclass(frozen=True)
class ClassTable:
    """The matcher's static tables for ``groups`` groups: ranked classes and the pair priority list.

    ``classes[r]``: the mode string of rank ``r`` (FULL in every group excluded);
    ``entries``: ``(i, j)`` compatible rank pairs in the greedy's order.
    """

    classes: tuple[tuple[int, ...], ...]
    entries: tuple[tuple[int, int], ...]

    @classmethod
    def build(cls, groups: int, packed: bool, complementary: bool = True) -> "ClassTable":
        every = [c for c in itertools.product(range(3), repeat=groups) if any(x != Mode.FULL for x in c)]
        use = usage(np.array(every, dtype=np.uint8), packed)
        order = np.argsort(-use.sum(1), kind="stable")
        classes = tuple(every[i] for i in order)
        use = use[order]
        used = use > 0
        entries = []
        for i in range(len(classes)):
            for j in range(len(classes)):
                ok = bool((use[i] + use[j] <= 2).all())
                if not complementary:
                    ok &= bool((used[i] == used[j]).all())
                if ok:
                    entries.append((i, j))
        return cls(classes, tuple(entries))


def check_dispatcher(window: int, groups: int) -> None:
    if isinstance(window, bool) or not isinstance(window, int) or not 2 <= window <= MAX_WINDOW:
        raise ValueError(f"dispatch window={window!r} tokens is not supported by the RTL dispatcher; use 2..{MAX_WINDOW}")
    if isinstance(groups, bool) or not isinstance(groups, int) or not 1 <= groups <= MAX_GROUPS:
        raise ValueError(f"{groups!r} channel groups per K-fold: the RTL dispatcher is built for 1..{MAX_GROUPS}")


class Dispatcher(Elaboratable):
    """Scheduler + matcher for windows of up to ``window`` tokens with ``groups`` groups each."""

    def __init__(self, window: int, groups: int, low_bits: int = 4, complementary: bool = True):
        check_dispatcher(window, groups)
        self.window, self.groups = window, groups
        self.packed = 2 * low_bits <= 8
        self.table = ClassTable.build(groups, self.packed, complementary)
        iw = max(1, (window - 1).bit_length())
        self.idx_bits = iw
        # ingest
        self.pair_enable = Signal(init=1)
        self.in_valid = Signal()
        self.in_modes = Signal(2 * groups)  # group g in bits 2g..2g+1
        self.in_last = Signal()  # with the window's last token: start matching
        # output slots
        self.out_valid = Signal()
        self.out_v = [Signal(name=f"out_v{l}") for l in range(2)]
        self.out_idx = [Signal(iw, name=f"out_idx{l}") for l in range(2)]
        self.done = Signal()

    def ports(self) -> list:
        return [self.pair_enable, self.in_valid, self.in_modes, self.in_last, self.out_valid,
                *self.out_v, *self.out_idx, self.done]

    def elaborate(self, platform):
        m = Module()
        W, iw = self.window, self.idx_bits
        classes, entries = self.table.classes, self.table.entries
        P = len(classes)
        cw = (W).bit_length()
        cnt = Array(Signal(cw, name=f"cnt{c}") for c in range(P))
        head = Array(Signal(iw, name=f"head{c}") for c in range(P))
        tail = Array(Signal(iw, name=f"tail{c}") for c in range(P))
        nxt = Array(Signal(iw, name=f"next{t}") for t in range(W))
        idx = Signal(iw)
        matching = Signal()

        # class of the arriving token (P: FULL everywhere, dropped)
        cls_in = Signal(range(P + 1))
        with m.Switch(self.in_modes):
            for r, c in enumerate(classes):
                with m.Case(sum(int(v) << (2 * g) for g, v in enumerate(c))):
                    m.d.comb += cls_in.eq(r)
            with m.Default():
                m.d.comb += cls_in.eq(P)
        push = Signal(range(P + 1))
        m.d.comb += push.eq(Mux(self.pair_enable, cls_in, 0))  # no matcher: one list, arrival order
        with m.If(self.in_valid & ~matching):
            m.d.sync += idx.eq(idx + 1)
            with m.If(cls_in != P):
                with m.If(cnt[push] == 0):
                    m.d.sync += head[push].eq(idx)
                with m.Else():
                    m.d.sync += nxt[tail[push]].eq(idx)
                m.d.sync += [tail[push].eq(idx), cnt[push].eq(cnt[push] + 1)]
            with m.If(self.in_last):
                m.d.sync += matching.eq(1)

        # matcher: the first viable pair entry, else a single token, else done
        ci, cj = Signal(range(P)), Signal(range(P))
        pair, same, single = Signal(), Signal(), Signal()
        # a priority encoder as independent assignments, lowest priority first: the last one that
        # applies wins (a flat form, not a chain of hundreds of nested else-ifs)
        for c in reversed(range(P)):
            with m.If(cnt[c] != 0):
                m.d.comb += [ci.eq(c), single.eq(1)]
        for i, j in reversed(entries):
            ok = (cnt[i] >= 2) if i == j else ((cnt[i] != 0) & (cnt[j] != 0))
            with m.If(ok & self.pair_enable):
                m.d.comb += [ci.eq(i), cj.eq(j), pair.eq(1), same.eq(int(i == j)), single.eq(0)]
        t0, t1 = Signal(iw), Signal(iw)
        m.d.comb += [t0.eq(head[ci]), t1.eq(Mux(same, nxt[head[ci]], head[cj]))]
        with m.If(matching):
            with m.If(pair):
                m.d.comb += [self.out_valid.eq(1), self.out_v[0].eq(1), self.out_v[1].eq(1),
                             self.out_idx[0].eq(t0), self.out_idx[1].eq(t1)]
                with m.If(same):
                    m.d.sync += [head[ci].eq(nxt[t1]), cnt[ci].eq(cnt[ci] - 2)]
                with m.Else():
                    m.d.sync += [head[ci].eq(nxt[t0]), cnt[ci].eq(cnt[ci] - 1),
                                 head[cj].eq(nxt[t1]), cnt[cj].eq(cnt[cj] - 1)]
            with m.Elif(single):
                m.d.comb += [self.out_valid.eq(1), self.out_v[0].eq(1), self.out_idx[0].eq(t0)]
                m.d.sync += [head[ci].eq(nxt[t0]), cnt[ci].eq(cnt[ci] - 1)]
            with m.Else():
                m.d.comb += self.done.eq(1)
                m.d.sync += [matching.eq(0), idx.eq(0)]
        return m

