"""Dense cycle model: SCALE-Sim v2 compat mode (exact) and the default mode's invariants."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kaleido.hw.arch.compute import dense_cycles, scalesim_sram_counts
from kaleido.hw.arch.config import ArrayConfig, BufferConfig, parse_array
from kaleido.hw.arch.mapping import fold_plan, k_fold_pieces


def scalesim_total(M, K, N, R, C, flow):
    """SCALE-Sim's stall-free totals as written in facts.md (GEMM M x K by K x N); is: v3's.

    Real SCALE-Sim v3 outputs are checked in ``test_scalesim_reference.py``.
    """
    if flow == "os":
        folds = math.ceil(M / R) * math.ceil(N / C)
        return folds * (K + R + C - 2) - 1
    if flow == "is":
        folds = math.ceil(K / R) * math.ceil(M / C)
        return folds * (N + 2 * R + C - 2) - 1
    folds = math.ceil(K / R) * math.ceil(N / C)
    return folds * (M + 2 * R + C - 2) - 1


dims = st.integers(1, 700)
arr = st.sampled_from([4, 8, 16, 32, 128])


@settings(max_examples=200, deadline=None)
@given(M=dims, K=dims, N=dims, R=arr, C=arr, flow=st.sampled_from(["os", "ws", "is"]))
def test_compat_cycles_equal_scalesim_formula(M, K, N, R, C, flow):
    cfg = ArrayConfig(R, C, dataflow=flow, timing="scalesim_compat")
    assert dense_cycles(M, K, N, cfg) == scalesim_total(M, K, N, R, C, flow)


def test_compat_known_values():
    # 4096x128x4096 on 128x128: 32*32 = 1024 OS folds of 128+254 cycles; WS 1*32 folds of 4096+382
    os_ = ArrayConfig(timing="scalesim_compat", dataflow="os")
    ws_ = ArrayConfig(timing="scalesim_compat", dataflow="ws")
    assert dense_cycles(4096, 128, 4096, os_) == 1024 * 382 - 1 == 391167
    assert dense_cycles(4096, 128, 4096, ws_) == 32 * (4096 + 382) - 1 == 143295


@settings(max_examples=200, deadline=None)
@given(M=dims, K=dims, N=dims, R=arr, C=arr)
def test_compat_sram_counts_equal_scalesim(M, K, N, R, C):
    os_ = scalesim_sram_counts(M, K, N, ArrayConfig(R, C, dataflow="os", timing="scalesim_compat"))
    ws_ = scalesim_sram_counts(M, K, N, ArrayConfig(R, C, dataflow="ws", timing="scalesim_compat"))
    folds_os = math.ceil(M / R) * math.ceil(N / C)
    assert os_ == {"ifmap_reads": M * K * math.ceil(N / C), "filter_reads": K * N * math.ceil(M / R),
                   "ofmap_writes": M * N + folds_os * (R + C)}
    assert ws_ == {"ifmap_reads": M * K * math.ceil(N / C), "filter_reads": K * N,
                   "ofmap_writes": M * N * math.ceil(K / R)}
    is_ = scalesim_sram_counts(M, K, N, ArrayConfig(R, C, dataflow="is", timing="scalesim_compat"))
    assert is_ == {"ifmap_reads": M * K, "filter_reads": K * N * math.ceil(M / C),
                   "ofmap_writes": M * N * math.ceil(K / R)}


@settings(max_examples=200, deadline=None)
@given(M=dims, K=dims, N=dims, R=arr, C=arr, flow=st.sampled_from(["os", "ws", "is"]),
       timing=st.sampled_from(["default", "scalesim_compat"]))
def test_cycles_at_least_macs_over_pes_and_default_not_slower(M, K, N, R, C, flow, timing):
    cfg = ArrayConfig(R, C, dataflow=flow, timing=timing)
    cyc = dense_cycles(M, K, N, cfg)
    assert cyc >= M * K * N / (R * C)
    assert M * K * N / (R * C * cyc) <= 1.0
    if timing == "default":
        assert cyc <= dense_cycles(M, K, N, cfg.with_(timing="scalesim_compat")) + R + C


def test_default_mode_large_gemm_near_full_utilisation():
    cfg = ArrayConfig()
    cyc = dense_cycles(4096, 128, 4096, cfg)
    assert cyc == 32 * 4096 + 128 + 254
    assert 4096 * 128 * 4096 / (128 * 128 * cyc) > 0.997


def test_fold_plan_and_k_pieces():
    p = fold_plan(300, 200, 100, "ws", 128, 64)
    assert (p.Sr, p.Sc, p.T, p.row_folds, p.col_folds) == (200, 100, 300, 2, 2)
    p = fold_plan(300, 200, 100, "is", 128, 64)
    assert (p.Sr, p.Sc, p.T, p.row_folds, p.col_folds) == (200, 300, 100, 2, 5)
    with pytest.raises(ValueError, match="'xs' is not a dataflow"):
        fold_plan(1, 1, 1, "xs", 8, 8)
    pg, pf, ps = k_fold_pieces((44, 42, 42), 64)
    assert pg.tolist() == [0, 1, 1, 2] and pf.tolist() == [0, 0, 1, 1] and ps.tolist() == [44, 20, 22, 42]


@pytest.mark.parametrize("bad, match", [
    (dict(rows=0), "rows=0"), (dict(cols=5000), "cols=5000"), (dict(dataflow="xs"), "dataflow='xs'"),
    (dict(clock_ghz=-1.0), "clock_ghz"), (dict(timing="fast"), "timing"), (dict(low_bits=9), "low_bits"),
    (dict(rows=4096, cols=4096, buffers=BufferConfig(ifmap_kib=4)), "cannot hold"),
])
def test_bad_array_config(bad, match):
    with pytest.raises(ValueError, match=match):
        ArrayConfig(**bad)


def test_bad_buffer_config():
    with pytest.raises(ValueError, match="ifmap_kib=0"):
        BufferConfig(ifmap_kib=0)
    with pytest.raises(ValueError, match="dram_gbps"):
        BufferConfig(dram_gbps=0)


def test_parse_array():
    assert parse_array("128x64") == (128, 64)
    with pytest.raises(ValueError, match="RxC"):
        parse_array("128*128")
