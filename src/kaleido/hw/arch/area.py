"""Silicon area at 16 nm: logic from synthesised transistor counts, SRAM from CACTI.

Logic: the RTL (:mod:`kaleido.hw.rtl`) is synthesised with Yosys and counted with
``stat -tech cmos`` (transistors of the mapped CMOS gates and flip-flops; no standard-cell
library, no wiring). Transistors become area through a published 16 nm logic density,
:data:`TRANSISTORS_PER_MM2_16NM`; it counts cell area at full placement density, so the
figures are lower bounds for a placed and routed design, the same for every design compared.

SRAM: CACTI 7 (HP Labs' CACTI, scratch RAM, one read/write port, 64-byte lines, ITRS-HP cells,
its other settings as shipped in ``cache.cfg``) at 22 nm, its smallest node, run by us;
:data:`SRAM_22NM_MM2`. Scaled to 16 nm by the ratio of the published high-density 6T bit
cells, 0.070 um^2 (TSMC 16 nm FinFET, IEDM 2013) over 0.092 um^2 (Intel 22 nm, IEDM 2012):
:data:`SRAM_SCALE_22_TO_16`. Between CACTI points, log-log interpolation.
"""

from __future__ import annotations

import importlib.resources
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

#: transistors per mm^2 of logic at 16 nm: TSMC 16FF+, 28.88 MTr/mm^2 (the weighted NAND2 / scan-flop
#: density metric, as reported by WikiChip for the node)
TRANSISTORS_PER_MM2_16NM = 28.88e6
LOGIC_SOURCE = "TSMC 16FF+ logic density 28.88 MTr/mm^2 (WikiChip); transistors from Yosys stat -tech cmos"
#: CACTI 7 data-array area (mm^2) at 22 nm of a scratch RAM of the given KiB (see the module docstring)
SRAM_22NM_MM2: dict[int, float] = {16: 0.0199343, 64: 0.0551846, 256: 0.292746, 1024: 1.07861, 2048: 2.29539}
SRAM_SCALE_22_TO_16 = 0.070 / 0.092
SRAM_SOURCE = ("CACTI 7, 22 nm, scratch RAM, 1 RW port, 64 B lines, itrs-hp; x0.761 to 16 nm (HD 6T bit cell "
               "0.070 um^2 TSMC 16FF, IEDM 2013 / 0.092 um^2 Intel 22 nm, IEDM 2012)")


#: the synthesised PE and dispatcher sizes the simulator prices area with (written by benchmarks/rtl_area.py)
SYNTHESIS_FILE = Path(str(importlib.resources.files("kaleido") / "assets" / "synthesis.json"))


@dataclass(frozen=True)
class SynthesisFigures:
    """Transistors of the synthesised dense PE, Kaleido PEs (per PARTIAL width) and dispatcher (:mod:`kaleido.hw.rtl`)."""

    acc_bits: int
    dense_pe_transistors: float
    #: PARTIAL width (bits) -> transistors of the Kaleido PE built for it
    kaleido_pe_by_low_bits: dict[int, float]
    dispatcher_transistors: float
    dispatcher_window_tokens: int
    #: design -> the Yosys flow that mapped it smallest
    flows: dict

    def kaleido_pe_transistors(self, low_bits: int) -> float:
        """Transistors of the Kaleido PE whose PARTIAL multiplier takes ``low_bits`` bits."""
        if low_bits not in self.kaleido_pe_by_low_bits:
            raise ValueError(f"no synthesised Kaleido PE for {low_bits}-bit PARTIAL differences (have "
                             f"{sorted(self.kaleido_pe_by_low_bits)}); add it with `python benchmarks/rtl_area.py`")
        return self.kaleido_pe_by_low_bits[low_bits]

    def pe_overhead(self, low_bits: int) -> float:
        """Kaleido PE / dense PE - 1."""
        return self.kaleido_pe_transistors(low_bits) / self.dense_pe_transistors - 1.0


def synthesis_figures(path: str | Path = SYNTHESIS_FILE) -> SynthesisFigures:
    """The synthesis figures in ``path`` (JSON; default: the shipped ones)."""
    try:
        d = json.loads(Path(path).read_text())
        kal = {int(lb): float(v["transistors"]) for lb, v in d["kaleido_pe"].items()}
        flows = {"dense_pe": d["dense_pe"]["flow"], "dispatcher": d["dispatcher"]["flow"],
                 **{f"kaleido_pe_{lb}": v["flow"] for lb, v in d["kaleido_pe"].items()}}
        return SynthesisFigures(int(d["acc_bits"]), float(d["dense_pe"]["transistors"]), kal,
                                float(d["dispatcher"]["transistors"]), int(d["dispatcher"]["window_tokens"]), flows)
    except FileNotFoundError:
        raise ValueError(f"{path}: no synthesis figures; write them with `python benchmarks/rtl_area.py`") from None
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"{path}: not a synthesis-figures file ({type(e).__name__}: {e}); "
                         "rewrite it with `python benchmarks/rtl_area.py`") from None


def psum_bits(rows: int) -> int:
    """Bits of the partial sum a column of ``rows`` int8 PEs carries: a 17-bit product (with the
    PARTIAL lane's sign) plus ``ceil(log2(rows))`` bits of growth down the chain."""
    return 17 + math.ceil(math.log2(max(2, rows)))


def pointer_list_kib(window_rows: int) -> float:
    """KiB of the matcher's next-pointer list over a window of ``window_rows`` tokens (one pointer each)."""
    if window_rows < 2:
        return 0.0
    return window_rows * math.ceil(math.log2(window_rows)) / 8 / 1024


def logic_mm2(transistors: float) -> float:
    """Area in mm^2 at 16 nm of ``transistors`` logic transistors."""
    if transistors < 0:
        raise ValueError(f"transistors={transistors!r} must be >= 0")
    return float(transistors) / TRANSISTORS_PER_MM2_16NM


def sram_mm2(kib: float) -> float:
    """Area in mm^2 at 16 nm of a ``kib`` KiB SRAM (CACTI, log-log between its points, linear past the ends)."""
    if not kib > 0:
        raise ValueError(f"SRAM size {kib!r} KiB must be > 0")
    if not SRAM_22NM_MM2:
        raise ValueError("no CACTI SRAM areas are tabulated; fill kaleido.hw.arch.area.SRAM_22NM_MM2")
    xs = np.array(sorted(SRAM_22NM_MM2), dtype=np.float64)
    ys = np.array([SRAM_22NM_MM2[int(x)] for x in xs])
    if kib <= xs[0]:
        a22 = ys[0] * kib / xs[0]
    elif kib >= xs[-1]:
        a22 = ys[-1] * kib / xs[-1]
    else:
        a22 = float(np.exp(np.interp(np.log(kib), np.log(xs), np.log(ys))))
    return a22 * SRAM_SCALE_22_TO_16


@dataclass(frozen=True)
class ChipArea:
    """Area (mm^2, 16 nm) of one array and its buffers, dense or Kaleido."""

    pe_array_mm2: float
    dispatcher_mm2: float
    anchor_store_mm2: float
    buffers_mm2: float

    @property
    def total_mm2(self) -> float:
        return self.pe_array_mm2 + self.dispatcher_mm2 + self.anchor_store_mm2 + self.buffers_mm2

    def to_dict(self) -> dict:
        return {**asdict(self), "total_mm2": self.total_mm2}


def chip_area(n_pes: int, pe_transistors: float, buffers_kib: tuple[float, ...], dispatcher_transistors: float = 0.0,
              anchor_store_kib: float = 0.0) -> ChipArea:
    """One array: ``n_pes`` PEs of ``pe_transistors``, its dispatcher, anchor store and operand buffers."""
    if n_pes < 1:
        raise ValueError(f"n_pes={n_pes!r} must be >= 1")
    return ChipArea(n_pes * logic_mm2(pe_transistors), logic_mm2(dispatcher_transistors),
                    sram_mm2(anchor_store_kib) if anchor_store_kib > 0 else 0.0,
                    sum(sram_mm2(k) for k in buffers_kib))


def dense_array_area(n_pes: int, buffers_kib: tuple[float, ...], fig: SynthesisFigures) -> ChipArea:
    """The dense array of ``n_pes`` synthesised dense PEs and its operand buffers."""
    return chip_area(n_pes, fig.dense_pe_transistors, buffers_kib)


def kaleido_array_area(n_pes: int, buffers_kib: tuple[float, ...], fig: SynthesisFigures, anchor_store_kib: float,
                       window_rows: int, low_bits: int = 4) -> ChipArea:
    """Kaleido's array: its PEs (built for ``low_bits``-bit differences), the dispatcher (synthesised
    logic + the next-pointer list of its ``window_rows``-token window as SRAM), the anchor store and
    the same operand buffers."""
    a = chip_area(n_pes, fig.kaleido_pe_transistors(low_bits), buffers_kib, fig.dispatcher_transistors, anchor_store_kib)
    ptr = pointer_list_kib(window_rows)
    return ChipArea(a.pe_array_mm2, a.dispatcher_mm2 + (sram_mm2(ptr) if ptr > 0 else 0.0), a.anchor_store_mm2,
                    a.buffers_mm2)


def iso_area_pes(kaleido: ChipArea, dense: ChipArea, dense_pe_transistors: float) -> int:
    """PEs a dense array gets when Kaleido's extra area is spent on more dense PEs (the buffers kept)."""
    extra = kaleido.total_mm2 - dense.total_mm2
    return int(round(dense.pe_array_mm2 / logic_mm2(dense_pe_transistors) + max(0.0, extra) / logic_mm2(dense_pe_transistors)))
