"""The top-level run: a workload + reuse statistics -> cycles, time, utilisation, energy.

For every GEMM record of the workload (and every distinct per-step statistics of its
op kind) this computes, per instance, the dense array's cycles and actions and
Kaleido's at each dispatcher level, then multiplies by the instance count.  Nothing
here loops over cycles; the work per GEMM is a handful of numpy operations on fold
and pattern-class arrays.  The A100 roofline runs on the same GEMMs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kaleido.reuse import Mode, ModeStats

from .compute import dense_cycles, folded_cycles
from .config import ArrayConfig
from .dispatcher import LEVELS, RowStats, dispatch
from .energy import ActionCounts, EnergyTable
from .gpu import A100Config, a100_gemm
from .memory import dram_bytes, sram_bytes
from .profile import Profile
from .workloads import Gemm, Workload

DESIGN_LEVEL = "scheduler+matcher"


@dataclass
class GemmResult:
    """One GEMM (``count`` instances) on the dense array and on Kaleido."""

    op: str
    M: int
    K: int
    N: int
    count: float
    macs: float
    dense_cycles: float
    kaleido_cycles: dict[str, float]
    dispatcher_exposed_cycles: float
    work_pe_cycles: float
    dense_counts: ActionCounts
    kaleido_counts: ActionCounts
    dram_bytes: float
    a100_s: float
    a100_j: float
    mac8: float
    mac_low: float
    skipped: float
    dispatch_model: str

    def to_dict(self) -> dict:
        return {k: (v.to_dict() if hasattr(v, "to_dict") else v) for k, v in self.__dict__.items()}


def _rowstats(st: ModeStats | None, g: Gemm, fold_full: np.ndarray | None = None) -> RowStats:
    if st is None:
        return RowStats.dense(g.K, g.M)
    if sum(st.group_sizes) != g.K:
        raise ValueError(f"{g.op}: statistics cover {sum(st.group_sizes)} channels, the GEMM has K={g.K}")
    if fold_full is not None and len(fold_full) != len(st.group_sizes):
        fold_full = None
    return RowStats.from_mode_stats(st, g.grid_rows, g.M - g.grid_rows, fold_full)


def window_rows(cfg: ArrayConfig, K: int) -> int:
    """Rows the dispatcher reorders at once: half the ifmap buffer's rows of K bytes."""
    if cfg.dispatch_window_rows is not None:
        return max(cfg.rows, cfg.dispatch_window_rows)
    return max(cfg.rows, (cfg.buffers.usable_bytes("ifmap") // max(1, K)) // cfg.rows * cfg.rows)


def simulate_gemm(
    M: int, K: int, N: int, rs: RowStats, cfg: ArrayConfig, *, count: float = 1.0, op: str = "proj_q",
    grid_rows: int | None = None, dram: float | None = None,
) -> GemmResult:
    """One GEMM with rows described by ``rs`` (per instance), ``count`` instances."""
    if rs.n_rows != M or rs.K != K:
        raise ValueError(f"row statistics are for {rs.n_rows} rows x {rs.K} channels, the GEMM is {M} x {K}")
    grid_rows = M if grid_rows is None else grid_rows
    R, C = cfg.rows, cfg.cols
    sizes = np.asarray(rs.group_sizes, dtype=np.float64)
    packed = cfg.packed_partial
    lb = cfg.low_bits
    d_cyc = dense_cycles(M, K, N, cfg)
    decided = rs.source != "dense"  # the decision unit runs for every op with reuse enabled
    W = window_rows(cfg, K)
    if decided:
        dr = dispatch(rs, N, cfg.dataflow, R, C, packed, W)
        k_cyc = {lv: folded_cycles(dr.stream[lv], dr.fold_mult[lv] * dr.col_folds, cfg) for lv in LEVELS}
        work, model = dr.work_pe_cycles, dr.model
    else:
        k_cyc = {lv: d_cyc for lv in LEVELS}
        work, model = float(M) * K * N, "dense"
    # the decision unit: one int8 subtract + one compare per channel, R channels per cycle
    decision_cycles = grid_rows * K / R
    exposed = max(0.0, decision_cycles - k_cyc[DESIGN_LEVEL]) if decided else 0.0
    k_cyc = {lv: v + exposed for lv, v in k_cyc.items()}

    marg = rs.marginals
    mac8 = float((marg[:, Mode.COMPUTE] * sizes).sum() * N)
    mac_low = float((marg[:, Mode.PARTIAL] * sizes).sum() * N)
    dense_macs = float(M) * K * N
    skipped = dense_macs - mac8 - mac_low
    reuse_items = float((marg[:, Mode.PARTIAL] + marg[:, Mode.FULL]).sum() * N)
    a_frac = float(((marg[:, Mode.COMPUTE] + marg[:, Mode.PARTIAL] * lb / 8) * sizes).sum() / (M * K))
    dram = float(dram if dram is not None else M * K + K * N + M * N)

    dense = ActionCounts(lb, mac8=dense_macs, pe_reg_bytes=6 * dense_macs,
                         sram_bytes=sram_bytes(M, K, N, cfg), dram_bytes=dram, cycles=d_cyc)
    kal = ActionCounts(
        lb, mac8=mac8, mac_low=mac_low,
        pe_reg_bytes=6 * mac8 + (5 if packed else 6) * mac_low,
        reuse_reg_bytes=8 * reuse_items, reuse_adds=float((marg[:, Mode.PARTIAL] * N).sum()),
        sram_bytes=sram_bytes(M, K, N, cfg, a_frac, grid_rows if decided else 0), dram_bytes=dram,
        dispatch_ops=(2.0 * grid_rows * K + grid_rows * (np.ceil(np.log2(W)) + len(sizes))) if decided else 0.0,
        cycles=k_cyc[DESIGN_LEVEL],
    )
    return GemmResult(op, M, K, N, count, dense_macs * count, d_cyc * count,
                      {k: v * count for k, v in k_cyc.items()}, exposed * count, work * count,
                      dense.scaled(count), kal.scaled(count), dram * count, 0.0, 0.0,
                      mac8 * count, mac_low * count, skipped * count, model)


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

    # -- totals -------------------------------------------------------------------------
    def _clock(self) -> float:
        return self.array["clock_ghz"] * 1e9

    def cycles(self, which: str) -> float:
        if which == "dense":
            return sum(g.dense_cycles for g in self.gemms)
        return sum(g.kaleido_cycles[which] for g in self.gemms)

    def time_s(self, which: str) -> float:
        """Per GEMM ``max(compute, DRAM)`` (double-buffered transfers), summed."""
        bw = self.array["buffers"]["dram_gbps"] * 1e9
        tot = 0.0
        for g in self.gemms:
            cyc = g.dense_cycles if which == "dense" else g.kaleido_cycles[which]
            tot += max(cyc / self._clock(), g.dram_bytes / bw)
        return tot

    def utilisation(self, which: str) -> float:
        pes = self.array["rows"] * self.array["cols"]
        if which == "dense":
            return sum(g.macs for g in self.gemms) / max(1.0, pes * self.cycles("dense"))
        return sum(g.work_pe_cycles for g in self.gemms) / max(1.0, pes * self.cycles(which))

    def counts(self, which: str) -> ActionCounts:
        out = ActionCounts(self.array["low_bits"])
        for g in self.gemms:
            out = out + (g.dense_counts if which == "dense" else g.kaleido_counts)
        return out

    def energy_pj(self, which: str) -> dict[str, float]:
        kib = {n: self.array["buffers"][f"{n}_kib"] for n in ("ifmap", "filter", "ofmap")}
        e = self.energy_table.energy_pj(self.counts(which), kib, self.array["clock_ghz"])
        e["static"] = self.energy_table.static_w * self.time_s(which if which == "dense" else DESIGN_LEVEL) * 1e12
        return e

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
        iso = 624e12 / array_peak
        t_k, t_d, t_g = self.time_s(DESIGN_LEVEL), self.time_s("dense"), self.a100_time_s()
        e_k, e_d = sum(self.energy_pj(DESIGN_LEVEL).values()) * 1e-12, sum(self.energy_pj("dense").values()) * 1e-12
        e_g = self.a100_energy_j()
        return {
            "time_s": {"kaleido": t_k, "dense_array": t_d, "a100": t_g},
            "cycles": {"dense_array": self.cycles("dense"), **{f"kaleido[{lv}]": self.cycles(lv) for lv in LEVELS}},
            "utilisation": {"dense_array": self.utilisation("dense"), **{lv: self.utilisation(lv) for lv in LEVELS}},
            "energy_j": {"kaleido": e_k, "dense_array": e_d, "a100": e_g},
            "energy_by_component_j": {
                "kaleido": {k: v * 1e-12 for k, v in self.energy_pj(DESIGN_LEVEL).items()},
                "dense_array": {k: v * 1e-12 for k, v in self.energy_pj("dense").items()},
            },
            "speedup": {"vs_dense_array": t_d / t_k, "vs_a100_raw": t_g / t_k,
                        "vs_a100_iso_peak": t_g / (t_k / iso)},
            "energy_savings": {"vs_dense_array": e_d / e_k, "vs_a100": e_g / e_k},
            "normalisation": {
                "array_peak_tops_int8": array_peak / 1e12, "a100_peak_tops_int8": 624.0,
                "iso_peak_factor": iso,
                "raw": "one Kaleido array against one A100",
                "iso_peak": f"Kaleido time divided by {iso:.1f} (A100 int8 peak / array peak: that many arrays, "
                            "perfect scaling assumed, DRAM not scaled)",
            },
            "macs": {"dense": sum(g.macs for g in self.gemms), "mac8": sum(g.mac8 for g in self.gemms),
                     "mac_low": sum(g.mac_low for g in self.gemms), "skipped": sum(g.skipped for g in self.gemms)},
            "dispatcher_exposed_cycles": sum(g.dispatcher_exposed_cycles for g in self.gemms),
        }

    def to_dict(self) -> dict:
        return {"workload": self.workload, "array": self.array, "profile": self.profile,
                "a100": self.a100.to_dict(), "energy_table": self.energy_table.to_dict(),
                "summary": self.summary(), "by_op": self.by_op(), "notes": self.notes,
                "gemms": [g.to_dict() for g in self.gemms]}


def simulate(
    wl: Workload, profile: Profile | None, cfg: ArrayConfig | None = None, *,
    energy: EnergyTable | None = None, a100: A100Config | None = None, transfer: bool = False,
) -> SimResult:
    """Run ``wl`` with reuse statistics from ``profile`` (``None``: everything dense)."""
    cfg = cfg or ArrayConfig()
    energy = energy or EnergyTable()
    a100 = a100 or A100Config()
    notes = []
    if profile is not None:
        profile.check_applies(wl, transfer)
        if profile.model != wl.model.name or profile.grid != tuple(wl.grid_thw):
            notes.append(f"profile measured on {profile.model} grid {profile.grid} carried to {wl.name} "
                         f"grid {tuple(wl.grid_thw)} by the documented transfer rule")
        for op, e in profile.ops.items():
            # a narrower difference runs unchanged on the array's wider PARTIAL multiplier
            # (costed at the array's width); a wider one does not fit it
            if e is not None and e.stats.low_bits > cfg.low_bits:
                raise ValueError(f"profile op {op!r} was measured with low_bits={e.stats.low_bits} but the array's "
                                 f"PARTIAL multiplier takes {cfg.low_bits} bits; pass ArrayConfig(low_bits>="
                                 f"{e.stats.low_bits})")
    cache: dict = {}
    results = []
    for g in wl.gemms:
        per_step = g.count // wl.steps
        groups: dict[int, tuple[ModeStats | None, int]] = {}
        if profile is None:
            groups[0] = (None, wl.steps)
        else:
            entry = profile.ops.get(g.op)
            steps_iter = range(wl.steps) if (entry is not None and entry.per_step) else [None]
            for s in steps_iter:
                st = profile.stats_for(wl, g.op, g.K, step=s, transfer=transfer)
                key = id(st)
                n = 1 if s is not None else wl.steps
                prev = groups.get(key)
                groups[key] = (st, (prev[1] if prev else 0) + n)
        a_s, a_j = a100_gemm(g, a100)
        dram = dram_bytes(g, cfg)
        for st, n_steps in groups.values():
            ck = (id(st), g.M, g.K, g.N, g.grid_rows, g.op)
            if ck not in cache:
                ff = None
                if profile is not None and st is not None and cfg.dataflow == "os":
                    ff = profile.fold_full_for(wl, g.op, g.K, cfg.rows, transfer)
                cache[ck] = (st, simulate_gemm(g.M, g.K, g.N, _rowstats(st, g, ff), cfg, count=1.0, op=g.op,
                                               grid_rows=g.grid_rows, dram=dram))
            one = cache[ck][1]
            k = per_step * n_steps
            r = GemmResult(g.op, g.M, g.K, g.N, k, one.macs * k, one.dense_cycles * k,
                           {lv: v * k for lv, v in one.kaleido_cycles.items()}, one.dispatcher_exposed_cycles * k,
                           one.work_pe_cycles * k, one.dense_counts.scaled(k), one.kaleido_counts.scaled(k),
                           one.dram_bytes * k, a_s * n_steps / wl.steps, a_j * n_steps / wl.steps,
                           one.mac8 * k, one.mac_low * k, one.skipped * k, one.dispatch_model)
            results.append(r)
    prof = {"none": True} if profile is None else {"model": profile.model, "grid": list(profile.grid),
                                                   "label": profile.label, "source": profile.source,
                                                   "transfer": transfer}
    return SimResult(wl.to_dict(), cfg.to_dict(), prof, results, energy, a100, notes)
