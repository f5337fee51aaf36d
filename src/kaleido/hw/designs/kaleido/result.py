"""A whole workload on Kaleido, beside its dense reference and the A100: totals, energy and the summary."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ...arch.area import ChipArea
from ...arch.dispatcher import LEVELS
from ...arch.energy import ActionCounts, EnergyTable
from ...arch.gpu import A100Config
from .gemm import DESIGN_LEVEL, GemmResult

@dataclass
class SimResult:
    """A whole workload on Kaleido, the dense array and the A100."""

    workload: dict
    array: dict
    profile: dict
    gemms: list[GemmResult]
    energy_table: EnergyTable
    a100: A100Config
    notes: list[str] = field(default_factory=list)
    #: the chip the run used (``ChipConfig.to_dict()``), ``None``: one array
    chip: dict | None = None
    #: area of one Kaleido array and of one dense array (``None``: no synthesis figures)
    area: dict[str, ChipArea] | None = None
    #: the dense array given Kaleido's area as extra PEs: ``{"pes", "rows", "cols", "time_s"}``
    #: (``None`` on a chip or without synthesis figures)
    iso_area: dict | None = None

    # -- totals -------------------------------------------------------------------------
    def _clock(self) -> float:
        return self.array["clock_ghz"] * 1e9

    @property
    def arrays(self) -> int:
        """Arrays of the chip (1 without one)."""
        return 1 if self.chip is None else int(self.chip["arrays"])

    def _dram_bw(self) -> float:
        """DRAM bandwidth in bytes/s: the chip's shared DRAM, or the single array's."""
        gbps = self.array["buffers"]["dram_gbps"] if self.chip is None else self.chip["dram_gbps"]
        return gbps * 1e9

    def cycles(self, which: str) -> float:
        if which == "dense":
            return sum(g.dense_cycles for g in self.gemms)
        return sum(g.kaleido_cycles[which] for g in self.gemms)

    def time_s(self, which: str, arrays: float = 1.0) -> float:
        """Per GEMM ``max(compute, DRAM)`` (double-buffered transfers), summed.

        ``arrays``: compute time divided by that many arrays (perfect scaling) while
        the DRAM bandwidth stays that of the memory - the iso-peak shortcut.  On a chip
        the cycles are the chip's (:mod:`kaleido.hw.arch.chip`) and the DRAM is shared.
        """
        return self.roofline_time_s([g.dense_cycles if which == "dense" else g.kaleido_cycles[which]
                                     for g in self.gemms], arrays)

    def roofline_time_s(self, cycles: list[float], arrays: float = 1.0) -> float:
        """Per GEMM ``max(cycles[i] / clock / arrays, DRAM time)``, summed (``cycles``: one entry per GEMM)."""
        bw = self._dram_bw()
        return sum(max(c / self._clock() / arrays, g.dram_bytes / bw) for c, g in zip(cycles, self.gemms, strict=True))

    def iso_peak_factor(self) -> float:
        """Copies of this chip (or array) that match the A100's peak at the precision it runs (``a100.precision``)."""
        return self.a100.peak_ops / (2.0 * self.array["rows"] * self.array["cols"] * self._clock() * self.arrays)

    def utilisation(self, which: str) -> float:
        pes = self.array["rows"] * self.array["cols"] * self.arrays
        if which == "dense":
            return sum(g.macs for g in self.gemms) / max(1.0, pes * self.cycles("dense"))
        return sum(g.work_pe_cycles for g in self.gemms) / max(1.0, pes * self.cycles(which))

    def counts(self, which: str) -> ActionCounts:
        out = ActionCounts(self.array["low_bits"])
        for g in self.gemms:
            out = out + (g.dense_counts if which == "dense" else g.kaleido_counts)
        return out

    def energy_pj(self, which: str) -> dict[str, float]:
        """Energy by component (pJ): the counted actions priced by ``energy_table`` (``EnergyTable.price``, as
        every design on the array is priced)."""
        kib = {n: self.array["buffers"][f"{n}_kib"] for n in ("ifmap", "filter", "ofmap")}
        # EnergyTable.static_w is one array's (with its buffers); a chip leaks in every array
        t = self.time_s(which if which == "dense" else DESIGN_LEVEL)
        return self.energy_table.price([self.counts(which)], kib, self.array["clock_ghz"], t * self.arrays)

    def priced_by(self, energy: EnergyTable) -> "SimResult":
        """The same counts priced by another energy table (counting never reads one)."""
        return replace(self, energy_table=energy)

    def a100_time_s(self) -> float:
        return sum(g.a100_s for g in self.gemms)

    def a100_energy_j(self) -> float:
        return sum(g.a100_j for g in self.gemms)

    def by_op(self) -> dict[str, dict]:
        out: dict[str, dict] = {}
        for g in self.gemms:
            d = out.setdefault(g.op, {"macs": 0.0, "dense_cycles": 0.0, "kaleido_cycles": 0.0, "a100_s": 0.0,
                                      "mac8": 0.0, "mac_low": 0.0, "skipped": 0.0})
            d["macs"] += g.macs
            d["dense_cycles"] += g.dense_cycles
            d["kaleido_cycles"] += g.kaleido_cycles[DESIGN_LEVEL]
            d["a100_s"] += g.a100_s
            d["mac8"] += g.mac8
            d["mac_low"] += g.mac_low
            d["skipped"] += g.skipped
        for d in out.values():
            d["speedup_vs_dense"] = d["dense_cycles"] / max(1.0, d["kaleido_cycles"])
        return out

    def summary(self) -> dict:
        pe = self.array["rows"] * self.array["cols"]
        array_peak = 2.0 * pe * self._clock()
        iso = self.iso_peak_factor()
        t_k, t_d, t_g = self.time_s(DESIGN_LEVEL), self.time_s("dense"), self.a100_time_s()
        t_iso = self.time_s(DESIGN_LEVEL, arrays=iso)
        e_k, e_d = sum(self.energy_pj(DESIGN_LEVEL).values()) * 1e-12, sum(self.energy_pj("dense").values()) * 1e-12
        e_g = self.a100_energy_j()
        out = {
            "time_s": {"kaleido": t_k, "dense_array": t_d, "a100": t_g},
            "cycles": {"dense_array": self.cycles("dense"), **{f"kaleido[{lv}]": self.cycles(lv) for lv in LEVELS}},
            "utilisation": {"dense_array": self.utilisation("dense"), **{lv: self.utilisation(lv) for lv in LEVELS}},
            "energy_j": {"kaleido": e_k, "dense_array": e_d, "a100": e_g},
            "energy_by_component_j": {
                "kaleido": {k: v * 1e-12 for k, v in self.energy_pj(DESIGN_LEVEL).items()},
                "dense_array": {k: v * 1e-12 for k, v in self.energy_pj("dense").items()},
            },
            "speedup": {"vs_dense_array": t_d / t_k, "vs_a100_raw": t_g / t_k,
                        "vs_a100_iso_peak": t_g / t_iso},
            "energy_savings": {"vs_dense_array": e_d / e_k, "vs_a100": e_g / e_k},
            "normalisation": {
                "array_peak_tops_int8": array_peak / 1e12, "a100_precision": self.a100.precision,
                "a100_peak_tops": self.a100.peak_ops / 1e12,
                "iso_peak_factor": iso,
                "raw": ("one Kaleido array against one A100" if self.chip is None else
                        f"a chip of {self.arrays} Kaleido arrays ({self.chip['name']}) against one A100"),
                "iso_peak": f"Kaleido's compute time divided by {iso:.2f} (A100 {self.a100.precision} peak / "
                            f"{'array' if self.chip is None else 'chip'} int8 peak: that many copies, perfect "
                            "scaling assumed), DRAM time not scaled",
            },
            "macs": {"dense": sum(g.macs for g in self.gemms), "mac8": sum(g.mac8 for g in self.gemms),
                     "mac_low": sum(g.mac_low for g in self.gemms), "skipped": sum(g.skipped for g in self.gemms)},
            "dispatcher_exposed_cycles": sum(g.dispatcher_exposed_cycles for g in self.gemms),
            "dispatcher_exposed_cycles_by_level": {lv: sum(g.exposed_cycles.get(lv, 0.0) for g in self.gemms)
                                                   for lv in LEVELS},
        }
        if self.area is not None:
            ka, da = self.area["kaleido"], self.area["dense_array"]
            out["area_mm2"] = {"kaleido": ka.to_dict(), "dense_array": da.to_dict(),
                               "kaleido_over_dense": ka.total_mm2 / da.total_mm2,
                               "scope": "one array with its buffers" + ("" if self.chip is None else
                                                                        f"; the chip has {self.arrays}")}
        if self.iso_area is not None:
            out["iso_area"] = {**self.iso_area, "speedup_vs_dense_iso_area": self.iso_area["time_s"] / t_k}
            out["speedup"]["vs_dense_array_iso_area"] = self.iso_area["time_s"] / t_k
        if self.chip is not None:
            out["chip"] = {**{k: v for k, v in self.chip.items() if k != "array"},
                           "vs_a100": t_g / t_k, "energy_vs_a100": e_g / e_k,
                           "average_power_w": e_k / t_k, "dense_average_power_w": e_d / t_d,
                           "dram_bound_share_of_time": self.dram_bound_share(DESIGN_LEVEL)}
        return out

    def dram_bound_share(self, which: str) -> float:
        """Share of the time spent in GEMMs whose DRAM time exceeds their compute time."""
        bw, clk = self._dram_bw(), self._clock()
        tot = bound = 0.0
        for g in self.gemms:
            c = (g.dense_cycles if which == "dense" else g.kaleido_cycles[which]) / clk
            d = g.dram_bytes / bw
            tot += max(c, d)
            bound += d if d > c else 0.0
        return bound / max(tot, 1e-30)

    def to_dict(self) -> dict:
        d = {"workload": self.workload, "array": self.array, "profile": self.profile,
             "a100": self.a100.to_dict(), "energy_table": self.energy_table.to_dict(),
             "summary": self.summary(), "by_op": self.by_op(), "notes": self.notes,
             "gemms": [g.to_dict() for g in self.gemms]}
        if self.chip is not None:
            d["chip"] = self.chip
        return d

