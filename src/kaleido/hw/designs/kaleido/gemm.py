"""Kaleido's costing of one GEMM on the array: its dense reference and its PE modes at each dispatcher level.

For a GEMM whose rows are described by row statistics (the COMPUTE / PARTIAL / FULL shares of each channel
group, :class:`~kaleido.hw.arch.dispatcher.RowStats`) this counts the dense array's cycles and actions and
Kaleido's at each dispatcher level (:mod:`kaleido.hw.arch.dispatcher`), with the decision unit, the anchor
store (:class:`~kaleido.hw.arch.kaleido_pe.AnchorPlan`) and the P.V row skip. Nothing here loops over cycles;
the work per GEMM is a handful of numpy operations on fold and pattern-class arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kaleido.reuse import Mode, ModeStats

from ...arch.compute import dense_cycles, folded_cycles
from ...arch.config import ArrayConfig
from ...arch.dispatcher import LEVELS, RowStats, dispatch
from ...arch.energy import ActionCounts
from ...arch.kaleido_pe import ANCHOR_BYTES_PER_ITEM, AnchorPlan
from ...arch.memory import sram_bytes
from ...inputs.workloads import Gemm

#: the dispatcher level Kaleido's design is counted at (:data:`kaleido.hw.arch.dispatcher.LEVELS`)
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


def rowstats(st: ModeStats | None, g: Gemm, fold_full: np.ndarray | None = None) -> RowStats:
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

