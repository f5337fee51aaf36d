"""Properties of Kaleido's cost model that must hold on any mode map (hypothesis).

* 0% reuse equals the dense array, in cycles and in energy, up to the decision unit's
  stated cost (its cycles where they exceed the array's, its int8 operations and the
  ifmap reads of A and the reference operand).
* Cycles never rise as FULL grows (in OS the scheduler's sorted packing may shift
  a class boundary: at most one fold per pattern class, which the test allows); energy never rises as FULL grows wherever a FULL
  item is cheaper than the work it removes (anchors in the PE register, or groups at
  least ``EnergyTable.full_break_even_channels`` wide for anchors in an SRAM store).
* A dispatcher level never makes a run slower than the level below, from exact rows
  and from statistics (pattern histogram, measured window statistics) alike.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kaleido.hw.config import ArrayConfig
from kaleido.hw.dispatcher import LEVELS, RowStats
from kaleido.hw.energy import EnergyTable
from kaleido.hw.kaleido_pe import AnchorPlan
from kaleido.hw.profile import OpProfile, window_full_counts
from kaleido.hw.simulate import simulate_gemm
from kaleido.reuse import Mode, ModeStats

KIB = {"ifmap": 1536, "filter": 1536, "ofmap": 512}
TABLE = EnergyTable()
GRID = (21, 30, 52)  # Wan 2.1 480p


def energy(counts):
    return sum(TABLE.energy_pj(counts, KIB, 1.0).values())


def rows_of(M, G, seed, runs):
    """Random modes, i.i.d. or in runs of equal patterns (spatially clustered maps)."""
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(3))
    if not runs:
        return rng.choice(3, size=(1, M, G), p=p).astype(np.uint8)
    out = np.zeros((1, M, G), np.uint8)
    i = 0
    while i < M:
        n = int(rng.integers(1, 200))
        out[0, i:i + n] = rng.choice(3, size=G, p=p)
        i += n
    return out


def stats_of(rows, sizes):
    G = len(sizes)
    m = rows.reshape(-1, G)
    mc = np.stack([np.bincount(m[:, g], minlength=3) for g in range(G)])
    codes = (m.astype(np.int64) * (3 ** np.arange(G))).sum(1)
    return ModeStats(tuple(sizes), tuple(f"g{i}" for i in range(G)), 4, mc, np.bincount(codes, minlength=3**G))


def row_stats(rows, sizes, source):
    """The same rows as the simulator sees them: exact, as a histogram, or with window statistics."""
    if source == "exact":
        return RowStats.from_rows(rows, sizes)
    s = stats_of(rows, sizes)
    ff = None
    if source == "window":
        wf = {w: (v[0] / np.maximum(1, v[1])).tolist() for w, v in window_full_counts(rows).items()}
        ff = OpProfile(s, window_full=wf).fold_full(32) if wf else None
    return RowStats.from_mode_stats(s, rows.shape[1], 0, ff)


SIZES = st.sampled_from([(44, 42, 42), (16, 56, 56), (64, 64), (8, 8, 8, 8), (128, 128)])
FLOW = st.sampled_from(["ws", "os"])


@settings(max_examples=80, deadline=None)
@given(M=st.integers(1, 600), sizes=SIZES, N=st.integers(1, 300), flow=FLOW,
       arr=st.sampled_from([(16, 16), (32, 8), (128, 128)]), timing=st.sampled_from(["default", "scalesim_compat"]),
       grid_rows=st.floats(0.0, 1.0))
def test_zero_reuse_is_the_dense_array_plus_the_decision_unit(M, sizes, N, flow, arr, timing, grid_rows):
    K = sum(sizes)
    cfg = ArrayConfig(*arr, dataflow=flow, timing=timing)
    video = int(round(grid_rows * M))
    r = simulate_gemm(M, K, N, RowStats.from_rows(np.zeros((1, M, len(sizes)), np.uint8), sizes), cfg,
                      grid_rows=video, decision_rows=video)
    decision_cycles = video * K / cfg.rows
    for lv in LEVELS:
        assert r.kaleido_cycles[lv] == pytest.approx(max(r.dense_cycles, decision_cycles), rel=1e-12)
    e_k = TABLE.energy_pj(r.kaleido_counts, KIB, 1.0)
    e_d = TABLE.energy_pj(r.dense_counts, KIB, 1.0)
    # the decision unit's stated cost: its int8 operations and the ifmap reads of A and the reference
    stated = r.kaleido_counts.dispatch_ops * TABLE.pj("add8") + 2.0 * video * K * TABLE.sram_pj_per_byte(KIB["ifmap"])
    assert sum(e_k.values()) - e_k["static"] == pytest.approx(sum(e_d.values()) - e_d["static"] + stated, rel=1e-9)
    assert e_k["dispatcher"] == pytest.approx(r.kaleido_counts.dispatch_ops * TABLE.pj("add8"))


def _raise_to_full(rows, n_up, seed):
    more = rows.copy()
    rng = np.random.default_rng(seed)
    i, g = rng.integers(0, rows.shape[1], size=n_up), rng.integers(0, rows.shape[2], size=n_up)
    more[0, i, g] = Mode.FULL
    return more


@settings(max_examples=80, deadline=None)
@given(M=st.integers(1, 500), sizes=SIZES, N=st.integers(1, 200), flow=FLOW, seed=st.integers(0, 2**31 - 1),
       n_up=st.integers(1, 300), runs=st.booleans(), source=st.sampled_from(["exact", "histogram", "window"]),
       window=st.sampled_from([None, 64, 1000]))
def test_cycles_never_rise_as_full_grows(M, sizes, N, flow, seed, n_up, runs, source, window):
    cfg = ArrayConfig(32, 32, dataflow=flow, dispatch_window_rows=window)
    rows = rows_of(M, len(sizes), seed, runs)
    more = _raise_to_full(rows, n_up, seed + 1)
    r0 = simulate_gemm(M, sum(sizes), N, row_stats(rows, sizes, source), cfg)
    r1 = simulate_gemm(M, sum(sizes), N, row_stats(more, sizes, source), cfg)
    for lv in LEVELS:
        slack = 0.0
        if flow == "os" and lv != "none":
            # the OS scheduler packs sorted pattern classes into R-row folds: moving a row to
            # another class can shift a class boundary, costing at most one more fold (the
            # longest a fold streams, max(K, R) cycles, per column fold) per boundary
            n_cls = len(np.unique(more[0], axis=0))
            slack = n_cls * max(sum(sizes), cfg.rows) * -(-N // cfg.cols)
        assert r1.kaleido_cycles[lv] <= r0.kaleido_cycles[lv] * (1 + 1e-12) + 1e-9 + slack, lv


def _plan(axis, sizes, flow, pricing):
    mix = np.tile([axis == a for a in "thw"], (len(sizes), 1)).astype(float)
    fold = tuple(range(len(sizes))) if flow == "ws" and sum(sizes) > 128 else (0,) * len(sizes)
    return AnchorPlan(mix, GRID, fold, 128, pricing)


@settings(max_examples=80, deadline=None)
@given(M=st.integers(1, 400), N=st.integers(1, 200), flow=FLOW, seed=st.integers(0, 2**31 - 1),
       n_up=st.integers(1, 300), low_bits=st.sampled_from([3, 4, 7]),
       case=st.sampled_from([("register", "t", (44, 42, 42)), ("mapped", "w", (44, 42, 42)),
                             ("mapped", "h", (16, 56, 56)), ("mapped", "t", (128, 128))]))
def test_energy_never_rises_as_full_grows_where_a_full_item_is_cheaper(M, N, flow, seed, n_up, low_bits, case):
    pricing, axis, sizes = case
    plan = _plan(axis, sizes, flow, pricing)
    store = 0.0 if pricing == "register" else float(plan.store_kib().max())
    assert min(sizes) >= TABLE.full_break_even_channels(store)  # the premise of this case
    cfg = ArrayConfig(128, 128, dataflow=flow, low_bits=low_bits)
    rows = rows_of(M, len(sizes), seed, False)
    more = _raise_to_full(rows, n_up, seed + 1)
    e0 = energy(simulate_gemm(M, sum(sizes), N, RowStats.from_rows(rows, sizes), cfg, anchors=plan).kaleido_counts)
    e1 = energy(simulate_gemm(M, sum(sizes), N, RowStats.from_rows(more, sizes), cfg, anchors=plan).kaleido_counts)
    assert e1 <= e0 * (1 + 1e-12)


def test_a_full_from_a_frame_back_costs_energy_on_narrow_groups():
    # the other side of the break-even: q.k^T's 42-channel groups reusing one frame back (Wan 480p)
    plan = _plan("t", (44, 42, 42), "ws", "mapped")
    assert TABLE.full_break_even_channels(float(plan.store_kib().max())) > 44
    rows = np.zeros((1, 256, 3), np.uint8)
    cfg = ArrayConfig()
    e0 = energy(simulate_gemm(256, 128, 128, RowStats.from_rows(rows, (44, 42, 42)), cfg, anchors=plan).kaleido_counts)
    rows[0, 1:, 1] = Mode.FULL
    e1 = energy(simulate_gemm(256, 128, 128, RowStats.from_rows(rows, (44, 42, 42)), cfg, anchors=plan).kaleido_counts)
    assert e1 > e0


@settings(max_examples=80, deadline=None)
@given(M=st.integers(1, 600), sizes=SIZES, N=st.integers(1, 300), flow=FLOW, seed=st.integers(0, 2**31 - 1),
       runs=st.booleans(), source=st.sampled_from(["exact", "histogram", "window"]),
       arr=st.sampled_from([(16, 16), (32, 8), (128, 128)]), window=st.sampled_from([None, 64, 1000]),
       complementary=st.booleans(), low_bits=st.sampled_from([4, 7]))
def test_dispatcher_levels_never_slower_than_the_level_below(M, sizes, N, flow, seed, runs, source, arr, window,
                                                              complementary, low_bits):
    cfg = ArrayConfig(*arr, dataflow=flow, dispatch_window_rows=window, low_bits=low_bits)
    rows = rows_of(M, len(sizes), seed, runs)
    r = simulate_gemm(M, sum(sizes), N, row_stats(rows, sizes, source), cfg, complementary=complementary)
    c = [r.kaleido_cycles[lv] for lv in LEVELS]
    assert c[1] <= c[0] * (1 + 1e-12) and c[2] <= c[1] * (1 + 1e-12), c
