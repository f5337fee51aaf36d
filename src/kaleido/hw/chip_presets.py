"""Chips on equal terms with the A100: iso-peak (int8 / bf16), iso-power and iso-memory.

Every preset gives the chip the A100's memory system, one shared HBM2e of
``A100Config.hbm_gbps`` (2,039 GB/s), and differs in the number of arrays:

* ``iso-peak-int8``: the chip's int8 peak nearest the A100's int8 peak (624 TOPS):
  ``round(624 / 32.8) = 19`` arrays of the default 128x128 array at 1 GHz;
* ``iso-peak-bf16``: the chip's int8 peak nearest the A100's bf16 peak (312 TFLOPS, the
  precision the A100 runs these models in): ``round(9.52) = 10`` arrays;
* ``iso-power``: as many arrays as fit the A100's board power (400 W) at full load:
  ``floor((400 W - P_dram) / (P_dyn + P_static))``, where ``P_dyn`` is one array's dynamic
  power running dense at full rate (MACs, PE registers, its SRAM buffers; the most
  power-hungry GEMM shape of the published workloads, from the energy model),
  ``P_static`` its static power and ``P_dram`` the DRAM interface at the chip's full
  bandwidth (bandwidth x 8 x the energy table's pJ/bit);
* ``iso-memory``: equal memory bandwidth, and as many arrays as that bandwidth feeds at
  the single array's balance (``ArrayConfig.buffers.dram_gbps`` per array, one HBM2 stack
  each): ``floor(2039 / 256) = 7``.

Static power (an assumption: we found no public 16 nm leakage figure for a comparable
array to cite): ``STATIC_FRACTION = 0.2`` of the array's full-load dynamic power, with a
stated range of 0.1-0.3; ``static_w_per_array`` overrides it.  It is charged in every
preset (``EnergyTable.static_w``, one array's, times the arrays).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .arch.chip import ChipConfig
from .arch.config import ArrayConfig
from .arch.dispatcher import RowStats
from .arch.energy import EnergyTable
from .arch.gpu import PEAK, A100Config
from .designs.kaleido import simulate_gemm
from .inputs.workloads import get_workload, workload_names

PRESETS = ("iso-peak-int8", "iso-peak-bf16", "iso-power", "iso-memory")
#: static power of one array as a share of its full-load dynamic power (assumption; range below)
STATIC_FRACTION = 0.2
STATIC_FRACTION_RANGE = (0.1, 0.3)


@dataclass(frozen=True)
class ChipPreset:
    """A preset chip, the energy table it is priced with, and how its array count was derived."""

    chip: ChipConfig
    energy: EnergyTable
    array_dynamic_w: float
    array_static_w: float
    dram_interface_w: float
    derivation: str

    def to_dict(self) -> dict:
        return {"chip": self.chip.to_dict(), "array_dynamic_w": self.array_dynamic_w,
                "array_static_w": self.array_static_w, "dram_interface_w": self.dram_interface_w,
                "derivation": self.derivation, "static_w_per_array": self.energy.static_w}


def array_full_load_power_w(cfg: ArrayConfig, energy: EnergyTable, workloads: tuple[str, ...] | None = None) -> float:
    """One array's dynamic power (W) running dense at full rate: the largest over the GEMM shapes of ``workloads``.

    Energy of MACs, PE registers and the array's SRAM buffers (no DRAM, no static) over the
    GEMM's compute time, from :func:`~kaleido.hw.designs.kaleido.simulate_gemm`'s dense counts.
    """
    kib = {n: getattr(cfg.buffers, f"{n}_kib") for n in ("ifmap", "filter", "ofmap")}
    shapes = {(g.M, g.K, g.N) for w in (workloads or tuple(workload_names())) for g in get_workload(w, 1).gemms}
    best = 0.0
    for M, K, N in sorted(shapes):
        r = simulate_gemm(M, K, N, RowStats.dense(K, M), cfg)
        e = energy.energy_pj(r.dense_counts, kib, cfg.clock_ghz)
        on_chip = sum(v for k, v in e.items() if k not in ("dram", "static"))
        best = max(best, on_chip * 1e-12 / (r.dense_cycles / (cfg.clock_ghz * 1e9)))
    return best


def chip_preset(name: str, array: ArrayConfig | None = None, energy: EnergyTable | None = None,
                a100: A100Config | None = None, static_w_per_array: float | None = None) -> ChipPreset:
    """The preset ``name`` (one of :data:`PRESETS`) built from ``array``, ``energy`` and ``a100``."""
    if name not in PRESETS:
        raise ValueError(f"chip preset {name!r} is not one of {', '.join(PRESETS)}; or give --arrays N")
    array = array or ArrayConfig()
    energy = energy or EnergyTable()
    a100 = a100 or A100Config()
    if static_w_per_array is not None and not static_w_per_array >= 0:
        raise ValueError(f"static_w_per_array={static_w_per_array!r} must be >= 0 W")
    p_dyn = array_full_load_power_w(array, energy)
    p_static = STATIC_FRACTION * p_dyn if static_w_per_array is None else float(static_w_per_array)
    bw = a100.hbm_gbps
    p_dram = bw * 1e9 * 8 * energy.pj("dram_bit") * 1e-12
    peak = array.peak_ops_per_s
    if name.startswith("iso-peak"):
        prec = name.rsplit("-", 1)[1]
        n = max(1, round(PEAK[prec] / peak))
        how = (f"round(A100 {prec} peak {PEAK[prec] / 1e12:.0f} T / array int8 peak {peak / 1e12:.1f} T "
               f"= {PEAK[prec] / peak:.2f}) = {n}")
    elif name == "iso-power":
        n = math.floor((a100.power_w - p_dram) / (p_dyn + p_static))
        if n < 1:
            raise ValueError(f"iso-power: one array ({p_dyn + p_static:.1f} W) and the DRAM interface "
                             f"({p_dram:.1f} W) exceed the A100's {a100.power_w:.0f} W; use a smaller array or clock")
        how = (f"floor(({a100.power_w:.0f} W - DRAM {p_dram:.1f} W) / (dynamic {p_dyn:.2f} W + static "
               f"{p_static:.2f} W per array)) = {n}")
    else:
        n = max(1, math.floor(bw / array.buffers.dram_gbps))
        how = f"floor(A100 HBM2e {bw:.0f} GB/s / {array.buffers.dram_gbps:.0f} GB/s per array) = {n}"
    chip = ChipConfig(n, array, dram_gbps=bw, name=name)
    e = EnergyTable(entries=dict(energy.entries), node_nm=energy.node_nm, static_w=p_static)
    return ChipPreset(chip, e, p_dyn, p_static, p_dram, how)

