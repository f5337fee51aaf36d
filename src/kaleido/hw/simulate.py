"""The top-level run: a workload + reuse statistics -> cycles, time, utilisation, energy.

For every GEMM record of the workload (and every distinct per-step statistics of its
op kind) this computes, per instance, the dense array's cycles and actions and
Kaleido's at each dispatcher level, then multiplies by the instance count.  Nothing
here loops over cycles; the work per GEMM is a handful of numpy operations on fold
and pattern-class arrays.  The A100 roofline runs on the same GEMMs.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from kaleido.reuse import Mode, ModeStats

from .arch.area import (ChipArea, SynthesisFigures, dense_array_area, iso_area_pes, kaleido_array_area, psum_bits,
                   synthesis_figures)
from .arch.chip import ChipConfig, GemmSplit, split_gemm
from .arch.compute import dense_cycles, folded_cycles
from .arch.config import ArrayConfig
from .arch.dispatcher import LEVELS, RowStats, dispatch
from .arch.energy import ActionCounts, EnergyTable
from .arch.kaleido_pe import ANCHOR_BYTES_PER_ITEM, ANCHOR_PRICINGS, AnchorPlan
from .arch.mapping import k_fold_pieces
from .arch.gpu import A100Config, a100_gemm
from .arch.memory import dram_bytes, sram_bytes
from .inputs.profile import Profile
from .inputs.workloads import ATTENTION_KINDS, Gemm, Workload

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
    #: decision-unit cycles not hidden behind the array, per dispatcher level
    exposed_cycles: dict[str, float] = field(default_factory=dict)
    #: KiB of anchor store this GEMM's reuse reads from (0: all in PE registers, or no reuse)
    anchor_store_kib: float = 0.0
    #: rows the dispatcher reorders at once (0: no decided rows, no dispatcher)
    window_rows: int = 0

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
    grid_rows: int | None = None, dram: float | None = None, decision_rows: float | None = None,
    anchors: AnchorPlan | None = None, complementary: bool = True, row_skip: int = 0,
    skip_anchors: AnchorPlan | None = None,
) -> GemmResult:
    """One GEMM with rows described by ``rs`` (per instance), ``count`` instances.

    ``decision_rows``: rows the decision unit judges (default: every video row of an op
    with reuse, none of a dense op); fewer when some layers ran with reuse switched off.
    ``anchors``: where the groups' reference partials live (``None``: in the PE
    register, as for a GEMM whose grid and reuse axes are unknown).
    ``complementary``: the WS matcher may pair rows using different groups.
    ``row_skip``: video rows skipped whole without a decision (the P.V row skip of SPEC
    §4): they never enter the array, their output is one copy of the anchor's output
    row (priced by ``skip_anchors``, one group); ``rs`` then describes the other
    ``M - row_skip`` rows.
    """
    grid_rows = M if grid_rows is None else grid_rows
    if not 0 <= row_skip <= grid_rows:
        raise ValueError(f"row_skip={row_skip} must be within 0..grid_rows={grid_rows}")
    Mk = M - row_skip  # rows entering the array
    if rs.n_rows != Mk or rs.K != K:
        raise ValueError(f"row statistics are for {rs.n_rows} rows x {rs.K} channels, the GEMM streams {Mk} x {K}")
    R, C = cfg.rows, cfg.cols
    sizes = np.asarray(rs.group_sizes, dtype=np.float64)
    packed = cfg.packed_partial
    lb = cfg.low_bits
    d_cyc = dense_cycles(M, K, N, cfg)
    decided = rs.source != "dense"  # the modes of the rows are known: the dispatcher model runs
    if decision_rows is None:
        decision_rows = (grid_rows - row_skip) if decided else 0.0
    if not 0 <= decision_rows <= grid_rows - row_skip:
        raise ValueError(f"decision_rows={decision_rows} must be within 0..{grid_rows - row_skip} (video rows entering the array)")
    W = window_rows(cfg, K)
    split_pairs = 0.0
    if decided and Mk > 0:
        dr = dispatch(rs, N, cfg.dataflow, R, C, packed, W, complementary, cfg.timing)
        k_cyc = {lv: folded_cycles(dr.stream[lv], dr.fold_mult[lv] * dr.col_folds, cfg) for lv in LEVELS}
        work, model = dr.work_pe_cycles, dr.model
        split_pairs = dr.split_pairs
    elif Mk > 0:
        dk = dense_cycles(Mk, K, N, cfg)
        k_cyc = {lv: dk for lv in LEVELS}
        work, model = float(Mk) * K * N, "dense" if row_skip == 0 else "dense+row-skip"
    else:
        k_cyc = {lv: 0.0 for lv in LEVELS}
        work, model = 0.0, "row-skip"
    # the decision unit: one int8 subtract + one compare per channel, R channels per cycle; it
    # overlaps the array at every level, so each level exposes only what its own array time leaves
    decision_cycles = decision_rows * K / R
    exposed = {lv: max(0.0, decision_cycles - k_cyc[lv]) for lv in LEVELS}
    k_cyc = {lv: v + exposed[lv] for lv, v in k_cyc.items()}

    marg = rs.marginals
    mac8 = float((marg[:, Mode.COMPUTE] * sizes).sum() * N)
    mac_low = float((marg[:, Mode.PARTIAL] * sizes).sum() * N)
    dense_macs = float(M) * K * N
    skipped = dense_macs - mac8 - mac_low
    items = (marg[:, Mode.PARTIAL] + marg[:, Mode.FULL]) * N  # reuse items per group
    if anchors is None:
        reg_b, store_b = float(items.sum() * ANCHOR_BYTES_PER_ITEM), {}
    else:
        reg_b, store_b = anchors.split_bytes(items)
    if row_skip:
        sk = np.array([row_skip * float(N)])  # one copy of the anchor's output row each
        r2, s2 = (float(sk.sum() * ANCHOR_BYTES_PER_ITEM), {}) if skip_anchors is None else skip_anchors.split_bytes(sk)
        reg_b += r2
        for k, v in s2.items():
            store_b[k] = store_b.get(k, 0.0) + v
    a_frac = float(((marg[:, Mode.COMPUTE] + marg[:, Mode.PARTIAL] * lb / 8) * sizes).sum() / max(1, M * K))
    dram = float(dram if dram is not None else M * K + K * N + M * N)

    dense = ActionCounts(lb, mac8=dense_macs, pe_reg_bytes=6 * dense_macs,
                         sram_bytes=sram_bytes(M, K, N, cfg), dram_bytes=dram, cycles=d_cyc)
    kal = ActionCounts(
        lb, mac8=mac8, mac_low=mac_low,
        pe_reg_bytes=6 * mac8 + (5 if packed else 6) * mac_low,
        reuse_reg_bytes=reg_b, anchor_sram_bytes=store_b, reuse_adds=float((marg[:, Mode.PARTIAL] * N).sum()),
        sram_bytes=sram_bytes(M, K, N, cfg, a_frac, decision_rows),
        dram_bytes=dram,
        dispatch_ops=(2.0 * decision_rows * K + decision_rows * (np.ceil(np.log2(W)) + len(sizes))),
        split_psums=split_pairs * N,
        cycles=k_cyc[DESIGN_LEVEL],
    )
    store_kib = 0.0
    if decided and Mk > 0 and anchors is not None and anchors.pricing != "register":
        store_kib = 1024.0 if anchors.pricing == "sram_1m" else float(anchors.store_kib().max())
    return GemmResult(op, M, K, N, count, dense_macs * count, d_cyc * count,
                      {k: v * count for k, v in k_cyc.items()}, exposed[DESIGN_LEVEL] * count, work * count,
                      dense.scaled(count), kal.scaled(count), dram * count, 0.0, 0.0,
                      mac8 * count, mac_low * count, skipped * count, model,
                      {k: v * count for k, v in exposed.items()}, store_kib, W if decided and Mk > 0 else 0)


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


def _areas(results: list[GemmResult], cfg: ArrayConfig, fig: SynthesisFigures) -> dict[str, ChipArea]:
    """One dense and one Kaleido array of ``cfg``: the anchor store and dispatch window the run needed at most."""
    buffers = (cfg.buffers.ifmap_kib, cfg.buffers.filter_kib, cfg.buffers.ofmap_kib)
    store = max((g.anchor_store_kib for g in results), default=0.0)
    window = max((g.window_rows for g in results), default=0)
    return {"kaleido": kaleido_array_area(cfg.n_pes, buffers, fig, store, window, cfg.low_bits),
            "dense_array": dense_array_area(cfg.n_pes, buffers, fig)}


def iso_area_shapes(pes: int, cfg: ArrayConfig) -> list[tuple[int, int]]:
    """The dense arrays of about ``pes`` PEs compared at iso-area: square, and ``cfg.rows`` rows made wider."""
    side = max(1, int(round(pes ** 0.5)))
    return sorted({(side, side), (cfg.rows, max(1, int(round(pes / cfg.rows))))})


def _iso_area(r: SimResult, cfg: ArrayConfig, fig: SynthesisFigures) -> dict:
    """The dense array given Kaleido's extra area as extra dense PEs (the faster of :func:`iso_area_shapes`)."""
    pes = iso_area_pes(r.area["kaleido"], r.area["dense_array"], fig.dense_pe_transistors)
    best = None
    for rows, cols in iso_area_shapes(pes, cfg):
        big = replace(cfg, rows=rows, cols=cols)
        t = r.roofline_time_s([dense_cycles(g.M, g.K, g.N, big) * g.count for g in r.gemms])
        if best is None or t < best["time_s"]:
            best = {"pes": pes, "rows": rows, "cols": cols, "time_s": t}
    return best


def _anchor_plan(profile: Profile | None, wl: Workload, g: Gemm, st: ModeStats | None, cfg: ArrayConfig,
                 pricing: str, transfer: bool) -> AnchorPlan | None:
    """Where ``g``'s reference partials live: derived from the groups' reuse axes and the stream order."""
    if st is None:
        return None
    mix = profile.axis_mix_for(wl, g.op, g.K, transfer) if profile is not None else None
    G = len(st.group_sizes)
    if mix is None or mix.shape[0] != G:
        # axes not recorded: priced as the farthest reference (one frame back), the conservative choice
        mix = np.tile([1.0, 0.0, 0.0], (G, 1))
    if cfg.dataflow == "ws":
        pg, pf, _ = k_fold_pieces(tuple(int(x) for x in st.group_sizes), cfg.rows)
        fold = tuple(int(pf[np.nonzero(pg == i)[0][0]]) for i in range(G))
    else:
        fold = (0,) * G
    return AnchorPlan(mix, tuple(wl.grid_thw), fold, cfg.cols, pricing)


def _skip_plan(axis: str | None, wl: Workload, cfg: ArrayConfig, pricing: str) -> AnchorPlan | None:
    if axis is None:
        return None
    return AnchorPlan(np.array([[axis == x for x in "thw"]], dtype=np.float64), tuple(wl.grid_thw), (0,), cfg.cols,
                      pricing)


def _pv_rows(st: ModeStats | None, g: Gemm, skip: int) -> RowStats:
    """Row statistics of the P.V rows that enter the array when ``skip`` video rows are skipped."""
    M = g.M - skip
    if st is None:
        return RowStats.dense(g.K, M)
    return _rowstats(st, Gemm(g.op, M, g.K, g.N, g.count, g.grid_rows - skip, g.layer_kind))


def _chip_instance(g: Gemm, split: GemmSplit, run) -> GemmResult:
    """One instance of ``g`` on a chip: ``run(M, K, N)`` gives one array's result for a sub-GEMM.

    Per unit of ``split.instances`` instances the chip takes the busiest part's cycles
    (its rounds one after another) plus the reduction, and the sum of every array's
    actions; DRAM bytes are the parts' less what the chip moves once
    (``GemmSplit.shared_dram_bytes``).  With one array this is ``run(M, K, N)`` exactly.
    """
    inst = split.instances
    res = [(p, run(p.M, p.K, p.N)) for p in split.parts]
    levels = list(res[0][1].kaleido_cycles)

    def crit(get):
        vals = [get(r) * (p.rounds / inst) for p, r in res]
        i = max(range(len(vals)), key=vals.__getitem__)
        return vals[i], i

    red = split.reduction_cycles / inst
    k_cyc, exposed = {}, {}
    for lv in levels:
        v, i = crit(lambda r: r.kaleido_cycles[lv])
        k_cyc[lv] = v + red
        exposed[lv] = res[i][1].exposed_cycles.get(lv, 0.0) * (res[i][0].rounds / inst)
    d_cyc = crit(lambda r: r.dense_cycles)[0] + red
    w = [p.arrays * p.rounds / inst for p, _ in res]

    def total(get):
        return sum(wi * get(r) for wi, (_, r) in zip(w, res))

    def counts(get):
        out = get(res[0][1]).scaled(w[0])
        for wi, (_, r) in zip(w[1:], res[1:]):
            out = out + get(r).scaled(wi)
        out.reduction_psums += split.reduction_psums / inst
        return out

    S = split.shared_dram_bytes
    dram = S + total(lambda r: r.dram_bytes - S)
    dense, kal = counts(lambda r: r.dense_counts), counts(lambda r: r.kaleido_counts)
    dense.cycles, kal.cycles, dense.dram_bytes, kal.dram_bytes = d_cyc, k_cyc[DESIGN_LEVEL], dram, dram
    r0 = res[0][1]
    return GemmResult(g.op, g.M, g.K, g.N, 1.0, total(lambda r: r.macs), d_cyc, k_cyc, exposed[DESIGN_LEVEL],
                      total(lambda r: r.work_pe_cycles), dense, kal, dram, 0.0, 0.0,
                      total(lambda r: r.mac8), total(lambda r: r.mac_low), total(lambda r: r.skipped),
                      r0.dispatch_model if len(res) == 1 and res[0][0].arrays == 1 else f"{r0.dispatch_model}/{split.kind}",
                      exposed, max(r.anchor_store_kib for _, r in res), max(r.window_rows for _, r in res))


def simulate(
    wl: Workload, profile: Profile | None, cfg: ArrayConfig | None = None, *,
    energy: EnergyTable | None = None, a100: A100Config | None = None, transfer: bool = False,
    anchor_pricing: str = "mapped", complementary: bool = True, chip: ChipConfig | None = None,
    synthesis: SynthesisFigures | None = None,
) -> SimResult:
    """Run ``wl`` with reuse statistics from ``profile`` (``None``: everything dense).

    ``anchor_pricing``: where FULL/PARTIAL reference partials are read from
    (:data:`kaleido.hw.arch.kaleido_pe.ANCHOR_PRICINGS`; ``mapped`` derives it from the
    stream order and the groups' reuse axes).  ``complementary``: whether the WS
    matcher may pair tokens with complementary groups (splitting partial-sum chains).
    ``chip``: run on a chip of ``chip.arrays`` copies of ``chip.array`` sharing one DRAM,
    each GEMM split across them by :func:`kaleido.hw.arch.chip.split_gemm` (``cfg`` must
    then be ``None`` or ``chip.array``); "dense array" figures are then the same chip
    running dense.  ``ChipConfig(1, cfg)`` gives the single array's figures exactly.
    ``synthesis``: the PE and dispatcher sizes area is priced with (default: the shipped
    :func:`kaleido.hw.arch.area.synthesis_figures`); area is one array's, and the iso-area
    dense array is computed for a single array (or a one-array chip) only.
    """
    if chip is not None:
        if not isinstance(chip, ChipConfig):
            raise ValueError(f"chip must be a kaleido.hw.arch.chip.ChipConfig, got {type(chip).__name__}")
        if cfg is not None and cfg != chip.array:
            raise ValueError("simulate: cfg and chip.array differ; pass the array only inside the ChipConfig")
        cfg = chip.array
    cfg = cfg or ArrayConfig()
    energy = energy or EnergyTable()
    a100 = a100 or A100Config()
    if anchor_pricing not in ANCHOR_PRICINGS:
        raise ValueError(f"anchor_pricing={anchor_pricing!r}: use one of {ANCHOR_PRICINGS}")
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
        # key -> (stats, decided share, P.V row-skip share and axis, steps)
        groups: dict[tuple, list] = {}
        if profile is None:
            groups[(None,)] = [None, 0.0, (0.0, None), wl.steps]
        else:
            entry = profile.ops.get(g.op)
            qk = profile.ops.get("self_attn_qk")
            per = (entry is not None and entry.per_step) or (g.op == "self_attn_pv" and qk is not None and qk.per_step)
            for s in (range(wl.steps) if per else [None]):
                st = profile.stats_for(wl, g.op, g.K, step=s, transfer=transfer)
                dec = 0.0 if (st is None or entry is None) else entry.decided_at(s, wl.steps)
                skip = profile.row_skip_for(wl, g.N, s, transfer) if g.op == "self_attn_pv" else (0.0, None)
                key = (id(st), dec, skip)
                n = 1 if s is not None else wl.steps
                prev = groups.get(key)
                groups[key] = [st, dec, skip, (prev[3] if prev else 0) + n]
        a_s, a_j = a100_gemm(g, a100)
        dram = dram_bytes(g, cfg)
        for st, dec, (skip_frac, skip_axis), n_steps in groups.values():
            ck = (id(st), dec, skip_frac, skip_axis, g.M, g.K, g.N, g.grid_rows, g.op)
            if ck not in cache:
                skip = int(round(skip_frac * g.grid_rows))
                ff = None
                if profile is not None and st is not None and cfg.dataflow == "os":
                    ff = profile.fold_full_for(wl, g.op, g.K, cfg.rows, transfer)
                video_in = g.grid_rows - skip

                def run(M, K, N, g=g, st=st, skip=skip, ff=ff, dec=dec, video_in=video_in, skip_axis=skip_axis):
                    gs = g if (M, K, N) == (g.M, g.K, g.N) else Gemm(g.op, M, K, N, g.count, g.grid_rows, g.layer_kind)
                    rs = _pv_rows(st, gs, skip) if skip else _rowstats(st, gs, ff)
                    return simulate_gemm(
                        M, K, N, rs, cfg, count=1.0, op=g.op, grid_rows=g.grid_rows,
                        dram=dram if gs is g else dram_bytes(gs, cfg),
                        decision_rows=dec * video_in if st is not None else 0.0,
                        anchors=_anchor_plan(profile, wl, gs, st, cfg, anchor_pricing, transfer),
                        complementary=complementary, row_skip=skip,
                        skip_anchors=_skip_plan(skip_axis, wl, cfg, anchor_pricing))

                if chip is None:
                    cache[ck] = (st, run(g.M, g.K, g.N))
                else:
                    pv = g.op.split("_attn_")[0] + "_attn_pv" if g.op in ATTENTION_KINDS else None
                    key_split = pv is not None and (profile is None or profile.ops.get(pv) is None)
                    cache[ck] = (st, _chip_instance(g, split_gemm(g, wl.model.heads, chip, key_split), run))
            one = cache[ck][1]
            k = per_step * n_steps
            r = GemmResult(g.op, g.M, g.K, g.N, k, one.macs * k, one.dense_cycles * k,
                           {lv: v * k for lv, v in one.kaleido_cycles.items()}, one.dispatcher_exposed_cycles * k,
                           one.work_pe_cycles * k, one.dense_counts.scaled(k), one.kaleido_counts.scaled(k),
                           one.dram_bytes * k, a_s * n_steps / wl.steps, a_j * n_steps / wl.steps,
                           one.mac8 * k, one.mac_low * k, one.skipped * k, one.dispatch_model,
                           {lv: v * k for lv, v in one.exposed_cycles.items()}, one.anchor_store_kib, one.window_rows)
            results.append(r)
    prof = {"none": True} if profile is None else {"model": profile.model, "grid": list(profile.grid),
                                                   "label": profile.label, "source": profile.source,
                                                   "transfer": transfer}
    arr = cfg.to_dict()
    arr["anchor_pricing"] = anchor_pricing
    arr["complementary_pairs"] = complementary
    fig = synthesis if synthesis is not None else synthesis_figures()
    res = SimResult(wl.to_dict(), arr, prof, results, energy, a100, notes,
                    None if chip is None else chip.to_dict(), _areas(results, cfg, fig))
    if chip is None or chip.arrays == 1:
        res.iso_area = _iso_area(res, cfg, fig)
    else:
        notes.append(f"no iso-area row on a chip of {chip.arrays} arrays: iso-area is defined for one array "
                     "(run without --chip, or with a one-array chip)")
    need = psum_bits(cfg.rows)
    if need != fig.acc_bits:
        notes.append(f"area priced with PEs synthesised for {fig.acc_bits}-bit partial sums; a {cfg.rows}-row "
                     f"array needs {need}: the PE areas are those of the shipped synthesis, not re-synthesised")
    return res
