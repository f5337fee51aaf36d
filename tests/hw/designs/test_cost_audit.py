"""Regression tests for the cost-model audit (docs/hardware.md, "What an audit of the cost model found").

Each test fails on the model before the audit: anchors priced as registers wherever
they lived, complementary pairs for free, decision cycles of the design level added
to every level, decisions charged for ops a trace ran densely, the OS scheduler slower
than no dispatcher on window statistics, no P.V row skip, and an iso-peak figure that
also divided the DRAM time.
"""

import dataclasses

import numpy as np
import pytest
import torch

import kaleido.trace as trace_mod
from kaleido.hw.arch.compute import fold_cycles
from kaleido.hw.arch.config import ArrayConfig, BufferConfig
from kaleido.hw.arch.dispatcher import LEVELS, RowStats, _os_fold_streams, apportion, dispatch
from kaleido.hw.arch.energy import EnergyTable
from kaleido.hw.arch.gpu import A100Config
from kaleido.hw.arch.kaleido_pe import AnchorPlan, anchor_distance_rows
from kaleido.hw.inputs.profile import OpProfile, Profile, window_full_counts
from kaleido.hw.designs.kaleido import DESIGN_LEVEL, simulate, simulate_gemm
from kaleido.hw.inputs.workloads import get_workload
from kaleido.reuse import ChannelGroups, Mode, ModeMap, ModeStats, TokenGrid

KIB = {"ifmap": 1536, "filter": 1536, "ofmap": 512}
WAN480 = (21, 30, 52)


def energy(counts, table=EnergyTable()):
    return sum(table.energy_pj(counts, KIB, 1.0).values())


def stats_from_rows(rows, sizes, names=("t", "h", "w"), low_bits=4):
    G = len(sizes)
    m = rows.reshape(-1, G)
    mc = np.stack([np.bincount(m[:, g], minlength=3) for g in range(G)])
    codes = (m.astype(np.int64) * (3 ** np.arange(G))).sum(1)
    return ModeStats(tuple(sizes), tuple(names), low_bits, mc, np.bincount(codes, minlength=3**G))


# -- where an anchor's partial result lives --------------------------------------------
def test_anchor_distance_follows_the_raster_stream():
    assert anchor_distance_rows("w", WAN480) == 1
    assert anchor_distance_rows("h", WAN480) == 52
    assert anchor_distance_rows("t", WAN480) == 30 * 52
    with pytest.raises(ValueError, match="reuse axis"):
        anchor_distance_rows("x", WAN480)


def test_t_axis_anchors_come_back_from_an_sram_store_w_axis_ones_stay_in_the_register():
    # q.k^T of Wan 480p: the t-group reuses along w, the h/w-groups along t (SPEC §2 defaults)
    mix = np.array([[0, 0, 1], [1, 0, 0], [1, 0, 0]], float)
    plan = AnchorPlan(mix, WAN480, (0, 0, 0), 128)
    kib = plan.store_kib()
    assert kib[0, 2] == 0  # one row back: the PE register
    assert kib[1, 0] == pytest.approx(2 * 1560 * 128 * 4 / 1024)  # both t-groups of the fold: ~1.5 MiB
    reg, stores = plan.split_bytes(np.array([10.0, 20.0, 30.0]))
    assert reg == 80.0 and sum(stores.values()) == 400.0
    rows = np.random.default_rng(0).choice(3, size=(1, 512, 3), p=[0.2, 0.3, 0.5]).astype(np.uint8)
    rs = RowStats.from_rows(rows, (44, 42, 42))
    cfg = ArrayConfig()
    e = {p: energy(simulate_gemm(512, 128, 256, rs, cfg, anchors=dataclasses.replace(plan, pricing=p)).kaleido_counts)
         for p in ("register", "mapped", "sram_1m")}
    assert e["register"] < e["mapped"] < e["sram_1m"]
    w_only = AnchorPlan(np.tile([0.0, 0.0, 1.0], (3, 1)), WAN480, (0, 0, 0), 128)
    assert energy(simulate_gemm(512, 128, 256, rs, cfg, anchors=w_only).kaleido_counts) == pytest.approx(e["register"])


def test_anchor_pricing_orders_the_whole_run_energy():
    wl = get_workload("wan-1.3b-480p", steps=2)  # the profile's step 0 ran dense; step 1 reads its last step
    prof = Profile.load("src/kaleido/assets/profiles/tiny_wan_default.json")
    cfg = ArrayConfig(low_bits=7)
    sav = {p: simulate(wl, prof, cfg, transfer=True, anchor_pricing=p).summary()["energy_savings"]["vs_dense_array"]
           for p in ("register", "mapped", "sram_1m")}
    assert sav["register"] > sav["mapped"] > sav["sram_1m"]
    with pytest.raises(ValueError, match="anchor_pricing"):
        simulate(wl, prof, cfg, transfer=True, anchor_pricing="cache")


# -- the matcher's split partial-sum chains ---------------------------------------------
def test_complementary_pairs_split_the_partial_sum_chain_and_can_be_switched_off():
    rows = np.zeros((1, 256, 2), np.uint8)
    rows[0, 0::2] = (Mode.COMPUTE, Mode.FULL)
    rows[0, 1::2] = (Mode.FULL, Mode.COMPUTE)
    rs = RowStats.from_rows(rows, (64, 64))
    on = dispatch(rs, 128, "ws", 128, 128, True, 512)
    off = dispatch(rs, 128, "ws", 128, 128, True, 512, complementary=False)
    assert on.stream["scheduler+matcher"].sum() == 128 and on.split_pairs == 128
    assert off.stream["scheduler+matcher"].sum() == 256 and off.split_pairs == 0
    r = simulate_gemm(256, 128, 128, rs, ArrayConfig())
    assert r.kaleido_counts.split_psums == 128 * 128
    assert EnergyTable().energy_pj(r.kaleido_counts, KIB, 1.0)["split_chains"] > 0
    # two PARTIALs packed in the same lanes need no split
    part = RowStats.from_rows(np.ones((1, 256, 2), np.uint8), (64, 64))
    assert dispatch(part, 128, "ws", 128, 128, True, 512).split_pairs == 0


# -- decision cycles exposed only where they are ----------------------------------------
def test_exposed_decision_cycles_are_per_level():
    rows = np.zeros((1, 1024, 2), np.uint8)
    rows[0, 0::2] = (Mode.COMPUTE, Mode.FULL)
    rows[0, 1::2] = (Mode.FULL, Mode.COMPUTE)
    r = simulate_gemm(1024, 128, 128, RowStats.from_rows(rows, (64, 64)), ArrayConfig())
    # decision: 1024 rows x 128 channels / 128 per cycle = 1024 cycles; the matcher halves the
    # 1024-row stream, so the decision shows at that level only
    assert r.exposed_cycles["scheduler+matcher"] > 0
    assert r.exposed_cycles["none"] == 0 and r.exposed_cycles["scheduler"] == 0
    assert r.kaleido_cycles["none"] == pytest.approx(1024 + 128 + 254)
    assert r.kaleido_cycles["scheduler+matcher"] == pytest.approx(1024)


# -- ops a trace ran with reuse off -----------------------------------------------------
def _trace(enabled_by_step):
    grid = TokenGrid(3, 4, 6, 0, 0)
    rope = ChannelGroups.from_rope(44, 42, 42)
    recs = []
    for op in ("self_qk", "self_pv"):
        for s, on in enumerate(enabled_by_step):
            on = on and op == "self_qk"
            p = [0.3, 0.4, 0.3] if on else [1.0, 0.0, 0.0]
            modes = torch.tensor(np.random.default_rng(s).choice(3, size=(1, grid.seq_len, 3), p=p), dtype=torch.uint8)
            modes[:, [0]] = 0
            groups = rope if op == "self_qk" else ChannelGroups.from_chunks(72, 24)
            mm = ModeMap(modes, grid, groups, 4)
            recs.append(trace_mod.TraceRecord(s, "cond", 0, op, f"blocks.0.{op}", 1, 1, grid.seq_len, 64, groups, 4,
                                              grid, on, mm.counts()[None], mm.stats().pattern_counts))
    return trace_mod.ReuseTrace(recs, {"model_class": "WanTransformer3DModel"})


def test_ops_switched_off_in_a_trace_get_no_decision_unit():
    from kaleido.hw.inputs.trace_adapter import profile_from_trace

    prof, notes = profile_from_trace(_trace([False, True]))
    assert prof.ops["self_attn_pv"] is None and any("self_attn_pv" in n and "enabled" in n for n in notes)
    qk = prof.ops["self_attn_qk"]
    assert qk.decided == pytest.approx(0.5) and qk.per_step_decided == [0.0, 1.0]
    assert Profile.from_dict(prof.to_dict()).ops["self_attn_qk"].per_step_decided == [0.0, 1.0]
    wl = get_workload("wan-1.3b-480p", steps=2)
    prof.ops.update({k: None for k in wl.op_kinds() if k not in prof.ops})
    r = simulate(wl, prof, transfer=True)
    pv = [g for g in r.gemms if g.op == "self_attn_pv"]
    assert pv and all(g.kaleido_counts.dispatch_ops == 0 for g in pv)
    qk_g = [g for g in r.gemms if g.op == "self_attn_qk"]
    # the dense step (reuse off) has no decision; the other has one per video row and channel
    ops = sorted(g.kaleido_counts.dispatch_ops for g in qk_g)
    assert ops[0] == 0 and ops[-1] > 0


# -- OS scheduler on window statistics ----------------------------------------------------
def test_os_scheduler_never_slower_than_no_dispatcher_on_window_statistics():
    rng = np.random.default_rng(16)
    M, sizes = 1000, (44, 42, 42)
    rows = np.zeros((M, 3), np.uint8)
    i = 0
    while i < M:
        n = int(rng.integers(1, 300))
        rows[i:i + n] = rng.choice(3, size=3, p=rng.dirichlet(np.ones(3)))
        i += n
    st = stats_from_rows(rows, sizes)
    wf = {w: (v[0] / np.maximum(1, v[1])).tolist() for w, v in window_full_counts(rows[None]).items()}
    rs = RowStats.from_mode_stats(st, M, 0, OpProfile(st, window_full=wf).fold_full(128))
    d = dispatch(rs, 128, "os", 128, 128, True, 1000)
    # sorting this window by mode string alone would stream more than the arrival order does
    cl, cnt = rs.classes, apportion(rs.class_counts, M)
    use = cl != Mode.FULL
    order = np.argsort(use.astype(np.int64) @ (2 ** np.arange(3)) * 27 + cl.astype(np.int64) @ (3 ** np.arange(3)),
                       kind="stable")
    sorted_only = _os_fold_streams(use[order], cnt[order].astype(np.int64), np.array(sizes, float),
                                   128, np.array(sizes, float)).sum()
    assert sorted_only > d.stream["none"].sum()
    assert d.stream["scheduler"].sum() <= d.stream["none"].sum()
    # and what the array spends on it (every fold at least R cycles) is never more either
    cyc = {lv: fold_cycles(d.stream[lv], 128, 128, "os", "default").sum() for lv in ("none", "scheduler")}
    assert cyc["scheduler"] <= cyc["none"]


# -- P.V row skip ------------------------------------------------------------------------
def _row_skip_profile(axes):
    wl = get_workload("wan-1.3b-480p", steps=1)
    n = wl.n_video
    rows = np.zeros((n, 3), np.uint8)
    rows[n // 2:] = Mode.FULL  # half the rows FULL in every group
    ops = {k: None for k in wl.op_kinds() if k != "cross_proj_kv"}
    ops["self_attn_qk"] = OpProfile(stats_from_rows(rows, (44, 42, 42)), axes=axes)
    return wl, Profile("wan-1.3b", wl.grid_thw, ops)


def test_pv_rows_with_one_anchor_are_skipped_without_a_decision():
    wl, prof = _row_skip_profile(("t", "t", "t"))
    assert prof.row_skip_for(wl, 128) == (pytest.approx(0.5), "t")
    pv = [g for g in simulate(wl, prof).gemms if g.op == "self_attn_pv"][0]
    assert pv.kaleido_counts.dispatch_ops == 0  # P.V itself is dense: no decision
    assert pv.skipped == pytest.approx(0.5 * pv.macs, rel=1e-3)
    assert pv.kaleido_cycles[DESIGN_LEVEL] == pytest.approx(0.5 * pv.dense_cycles, rel=0.01)
    # FULL along two axes (the default t-group along w): nothing about P.V follows
    wl, prof2 = _row_skip_profile(("w", "t", "t"))
    assert prof2.row_skip_for(wl, 128) == (0.0, None)
    pv2 = [g for g in simulate(wl, prof2).gemms if g.op == "self_attn_pv"][0]
    assert pv2.skipped == 0 and pv2.kaleido_cycles[DESIGN_LEVEL] == pv2.dense_cycles


def test_decided_pv_cannot_save_time_its_decision_is_as_long_as_the_gemm():
    # 90% FULL rows on every chunk group of P.V (K = keys): the decision unit reads R channels per
    # cycle over all keys, as long as the dense P.V stream itself
    M, K, N = 2048, 2048, 128
    rows = np.where(np.random.default_rng(1).random((1, M, 16)) < 0.9, Mode.FULL, Mode.COMPUTE).astype(np.uint8)
    r = simulate_gemm(M, K, N, RowStats.from_rows(rows, (128,) * 16), ArrayConfig())
    assert r.kaleido_cycles[DESIGN_LEVEL] >= M * K / 128  # the decision unit's cycles
    assert r.dense_cycles / r.kaleido_cycles[DESIGN_LEVEL] < 1.02  # only the fill/drain skew is saved


# -- iso-peak ---------------------------------------------------------------------------
def test_iso_peak_leaves_dram_unscaled_and_takes_the_a100s_own_precision():
    wl = get_workload("wan-1.3b-480p", steps=2)  # the profile's step 0 ran dense; step 1 reads its last step
    prof = Profile.load("src/kaleido/assets/profiles/tiny_wan_default.json")
    slow = ArrayConfig(low_bits=7, buffers=BufferConfig(dram_gbps=0.5))  # every GEMM DRAM-bound
    s = simulate(wl, prof, slow, transfer=True).summary()
    assert s["speedup"]["vs_a100_iso_peak"] == pytest.approx(s["speedup"]["vs_a100_raw"], rel=1e-9)
    r16 = simulate(wl, prof, ArrayConfig(low_bits=7), transfer=True)
    r8 = simulate(wl, prof, ArrayConfig(low_bits=7), transfer=True, a100=A100Config(precision="int8"))
    assert r16.iso_peak_factor() == pytest.approx(312e12 / 32.768e12)
    assert r8.iso_peak_factor() == pytest.approx(624e12 / 32.768e12)
    s16 = r16.summary()
    assert s16["speedup"]["vs_a100_iso_peak"] < s16["speedup"]["vs_a100_raw"] * r16.iso_peak_factor()
    assert "DRAM time not scaled" in s16["normalisation"]["iso_peak"]


def test_levels_are_all_reported():
    r = simulate_gemm(256, 128, 128, RowStats.from_rows(np.zeros((1, 256, 2), np.uint8), (64, 64)), ArrayConfig())
    assert set(r.exposed_cycles) == set(LEVELS)
