"""Each energy component of one small GEMM, worked out by hand from the cited per-action table.

The per-action energies are rebuilt here from the sources' raw figures and the stated node
scaling (docs/hardware.md section 5), not read from ``EnergyTable``; the action counts are
worked out from the PE modes (section 2) and the memory model (section 4). Every component is
compared on its own, so a component priced twice, dropped, or priced at another entry fails.
"""

import math

import numpy as np
import pytest

from kaleido.hw.designs.baseline_replay import BaselineProfile, Cell, replay
from kaleido.hw.arch.config import ArrayConfig
from kaleido.hw.arch.dispatcher import RowStats
from kaleido.hw.arch.energy import EnergyTable
from kaleido.hw.arch.kaleido_pe import AnchorPlan
from kaleido.hw.designs.kaleido import simulate_gemm
from kaleido.hw.inputs.workloads import MINIATURE, Gemm, Workload
from kaleido.reuse import Mode

# -- the cited table, scaled to 16 nm by hand ------------------------------------------------------
S45, S22 = (0.14 + 0.19) / 2, 0.59  # Stillmaker & Baas 2017: 45 -> 16 nm x0.14-0.19 (midpoint), 22 -> 16 nm x0.59
MULT8 = 0.2 * S45  # Horowitz ISSCC 2014, 45 nm: int8 multiply 0.2 pJ -> 0.033 pJ
ADD32 = 0.1 * S45  # int32 add 0.1 pJ -> 0.0165 pJ
ADD8 = 0.03 * S45  # int8 add 0.03 pJ -> 0.00495 pJ
REG = 0.144 / 2 * S45  # Accelergy/Timeloop example tables: 16-bit register read 0.144 pJ -> per byte 0.01188 pJ
SRAM_64K = (0.19 + 0.46) / 2 * S22  # CACTI 7, 22 nm, midpoints of the reported ranges -> 0.19175 pJ/B
SRAM_256K = (0.48 + 1.04) / 2 * S22  # -> 0.4484 pJ/B
SRAM_1M = (1.06 + 1.97) / 2 * S22  # -> 0.89385 pJ/B
DRAM_BIT = 3.9  # HBM2, pJ per bit, an interface figure: not node-scaled
MAC8 = MULT8 + ADD32  # 8x8 multiply + 32-bit accumulate = 0.0495 pJ
MAC4 = MULT8 * 4 * 8 / 64 + ADD32  # the multiplier scales with the operand widths' product: 0.033 pJ

# on-chip buffers priced per byte, log-log between the 64 KB, 256 KB and 1 MB points, clamped at the ends
KIB = {"ifmap": 1024, "filter": 128, "ofmap": 256}
IFMAP_B, OFMAP_B = SRAM_1M, SRAM_256K
FILTER_B = math.sqrt(SRAM_64K * SRAM_256K)  # 128 KB is halfway between 64 KB and 256 KB on a log scale

# -- the GEMM: 4 video rows x K = 8 (two groups of 4 channels) x N = 2 on an 8x8 WS array ---------
C_, P_, F_ = Mode.COMPUTE, Mode.PARTIAL, Mode.FULL
ROWS = [[C_, C_], [P_, F_], [F_, P_], [F_, F_]]
M, K, N, SIZES = 4, 8, 2, (4, 4)
STATIC_W = 0.5


def _run():
    cfg = ArrayConfig(8, 8, dispatch_window_rows=8, low_bits=4)  # 4-bit PARTIALs pack two to a lane
    # group 0 reuses along w (one row back: the PE register), group 1 along t: H x W = 4 rows back on a
    # 1 x 2 x 2 grid, from an anchor store of 4 rows x 8 columns x 4 bytes = 0.125 KiB
    plan = AnchorPlan(np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]), (1, 2, 2), (0, 0), 8)
    rs = RowStats.from_rows(np.array([ROWS], np.uint8), SIZES)
    return simulate_gemm(M, K, N, rs, cfg, anchors=plan)


def test_kaleido_energy_by_component():
    r = _run()
    # actions, by hand (docs section 2): a COMPUTE item = 4 channels x 2 columns of 8x8 MACs and 6 register
    # bytes each; a PARTIAL item the same at 4 x 8 bits, 5 register bytes each (packed); row 0 computes both
    # groups, rows 1 and 2 one PARTIAL group each
    mac8, mac4 = 2 * 4 * N, 2 * 4 * N
    pe_reg = 6 * mac8 + 5 * mac4
    # every PARTIAL or FULL (row, group, column) moves 8 bytes of reference partials: group 0 has 3 such
    # rows (register), group 1 has 3 (the t store); each PARTIAL adds onto its reference (2 items x 2 columns)
    reg_bytes, store_bytes, adds = 3 * N * 8, 3 * N * 8, 2 * N
    # the matcher pairs (P,F) with (F,P) in the one K-fold: complementary groups split the column's chain,
    # one extra int32 partial per output column (an add and 8 register bytes)
    split = 1 * N
    # SRAM (WS): A streams only what the PEs use - 8 COMPUTE channels at 1 byte, 8 PARTIAL channels at
    # 4 bits = 12 of 32 bytes - plus the decision's read of A and the reference (2 x 4 rows x 8);
    # B once (K x N); int32 outputs of one K-fold (4 x M x N)
    ifmap, filt, ofmap = 12 + 2 * 4 * 8, K * N, 4 * M * N
    dram = M * K + K * N + M * N  # each operand once, C written once
    # decision: a subtract and a compare per channel of each row (2 x 4 x 8), scheduler ceil(log2 8) = 3
    # compares a row, matcher one per group (2)
    dispatch = 2 * 4 * 8 + 4 * (3 + 2)
    # cycles: rows 0-2 use the fold (row 3 is FULL in both groups), the matcher packs two of them: a stream
    # of 2, which still costs R = 8 cycles, plus the skew R + C - 2 and the first preload R, once
    cycles = max(2, 8) + (8 + 8 - 2) + 8
    want = {
        "mac": mac8 * MAC8 + mac4 * MAC4,
        "pe_registers": pe_reg * REG,
        "reuse": reg_bytes * REG + adds * ADD32,
        "anchor_sram": store_bytes * SRAM_64K,  # a 0.125 KiB store is priced at the 64 KB point (clamped)
        "split_chains": split * (ADD32 + 8 * REG),
        "chip_reduction": 0.0,
        "sram": ifmap * IFMAP_B + filt * FILTER_B + ofmap * OFMAP_B,
        "dram": dram * 8 * DRAM_BIT,
        "dispatcher": dispatch * ADD8,
        "static": STATIC_W * cycles * 1e-9 * 1e12,  # 0.5 W for 30 cycles at 1 GHz, in pJ
    }
    got = EnergyTable(static_w=STATIC_W).energy_pj(r.kaleido_counts, KIB, 1.0)
    assert set(got) == set(want)
    for k, v in want.items():
        assert got[k] == pytest.approx(v, rel=1e-12, abs=1e-15), k


def test_dense_array_energy_by_component():
    # the baseline on the same array: every MAC at 8x8 with 6 register bytes, A streamed whole, no decision
    r = _run()
    macs = M * K * N
    want = {
        "mac": macs * MAC8, "pe_registers": 6 * macs * REG, "reuse": 0.0, "anchor_sram": 0.0,
        "split_chains": 0.0, "chip_reduction": 0.0,
        "sram": M * K * IFMAP_B + K * N * FILTER_B + 4 * M * N * OFMAP_B,
        "dram": (M * K + K * N + M * N) * 8 * DRAM_BIT, "dispatcher": 0.0,
        "static": STATIC_W * (max(M, 8) + 14 + 8) * 1e-9 * 1e12,  # a stream of M = 4 rows costs R = 8 too
    }
    got = EnergyTable(static_w=STATIC_W).energy_pj(r.dense_counts, KIB, 1.0)
    for k, v in want.items():
        assert got[k] == pytest.approx(v, rel=1e-12, abs=1e-15), k


def test_exion_class_replay_energy_by_component():
    # one FFN up-projection (4 x 8 . 8 x 16) on the EXION-class design, half its neurons kept, a tile's union
    # of kept columns 3/4 of them (docs/baselines.md)
    g = Gemm("ffn_up", 4, 8, 16, 1, 4)
    wl = Workload("one-gemm", MINIATURE, "test", (1, 2, 2), 1, (g,))
    prof = BaselineProfile("exion", {}, "WanTransformer3DModel", (1, 2, 2), 128,
                           {"ffn_up": [[Cell(0.5, 0.0, 0.5, tile=0.75)]]})
    r = replay(wl, prof, ArrayConfig(), EnergyTable())
    work = 0.5 * 4 * 8 * 16  # the MACs the rows keep, all at 8 bits
    # DRAM: A once, B's 12 compacted columns (ceil(16 x 3/4)), C's 12 columns, and the (4 x 16)-bit reuse mask
    dram = 4 * 8 + 8 * 12 + 4 * 12 + 4 * 16 / 8
    side = 4 * 16 / 8  # ConMerge condenses the (M x N) keep mask on a side unit, 8 bits an int8 operation
    # in joules: tiny, so no absolute tolerance (pytest.approx's default 1e-12 would pass anything here)
    assert r.mac_energy_j == pytest.approx(work * MAC8 * 1e-12, rel=1e-12, abs=0)
    assert r.dram_energy_j == pytest.approx(dram * 8 * DRAM_BIT * 1e-12, rel=1e-12, abs=0)
    assert r.side_energy_j == pytest.approx(side * ADD8 * 1e-12, rel=1e-12, abs=0)


def test_adding_counts_keeps_buffer_order_so_sums_do_not_follow_string_hashing():
    """Buffer names are strings: summing them in set order made the last bit of the energy depend on
    PYTHONHASHSEED.  The sum keeps the first operand's order, then the second's new keys."""
    from kaleido.hw.arch.energy import ActionCounts

    a = ActionCounts(sram_bytes={"ifmap": 1.0, "filter": 2.0})
    b = ActionCounts(sram_bytes={"ofmap": 4.0, "ifmap": 8.0})
    assert list((a + b).sram_bytes) == ["ifmap", "filter", "ofmap"]
    assert (a + b).sram_bytes == {"ifmap": 9.0, "filter": 2.0, "ofmap": 4.0}


def test_simulator_figures_do_not_depend_on_the_hash_seed():
    import os
    import subprocess
    import sys

    code = ("import json; from importlib.resources import files; from kaleido.hw.designs.kaleido import simulate; "
            "from kaleido.hw.inputs.profile import Profile; from kaleido.hw.inputs.workloads import get_workload; "
            "from kaleido.hw.arch.config import ArrayConfig; "
            "p = Profile.load(files('kaleido') / 'assets' / 'profiles' / 'tiny_wan_default.json'); "
            "r = simulate(get_workload('wan-1.3b-480p'), p, ArrayConfig(low_bits=7), transfer=True); "
            "print(json.dumps(r.summary()['energy_j']))")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert len(outs) == 1
