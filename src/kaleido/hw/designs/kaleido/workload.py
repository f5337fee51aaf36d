"""Kaleido's run over a workload: every GEMM record (and every distinct per-step statistics of its op kind) costed
on the array (:mod:`.gemm`), on one array or a chip of several, with area and the iso-area dense array.

For every GEMM record this computes, per instance, the dense array's cycles and actions and Kaleido's at each
dispatcher level, then multiplies by the instance count.  The A100 roofline runs on the same GEMMs.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from kaleido.reuse import ModeStats

from ...arch.area import (ChipArea, SynthesisFigures, dense_array_area, iso_area_pes, kaleido_array_area, psum_bits,
                          synthesis_figures)
from ...arch.chip import ChipConfig, GemmSplit, array_of, split_gemm
from ...arch.compute import dense_cycles
from ...arch.config import ArrayConfig
from ...arch.dispatcher import RowStats
from ...arch.energy import EnergyTable
from ...arch.kaleido_pe import ANCHOR_PRICINGS, AnchorPlan
from ...arch.mapping import k_fold_pieces
from ...arch.gpu import A100Config, a100_gemm
from ...arch.memory import dram_bytes
from ...inputs.profile import Profile
from ...inputs.workloads import ATTENTION_KINDS, Gemm, Workload
from .gemm import DESIGN_LEVEL, GemmResult, rowstats, simulate_gemm
from .result import SimResult

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
    return rowstats(st, Gemm(g.op, M, g.K, g.N, g.count, g.grid_rows - skip, g.layer_kind))


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
    cfg = array_of(cfg, chip, "simulate")
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
                    rs = _pv_rows(st, gs, skip) if skip else rowstats(st, gs, ff)
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
