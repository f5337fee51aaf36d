"""Replaying accelerator-baseline traces with their dataflows' utilisation costs (kaleido.hw.designs.baseline_replay)."""

import pytest

from kaleido.hw.designs.baseline_replay import BaselineProfile, Cell, replay
from kaleido.hw.inputs.baseline_profile import baseline_profile_from_trace
from kaleido.hw.inputs.workloads import get_workload

WL = get_workload("wan-1.3b-480p", steps=4)
HY = get_workload("hunyuan-720p", steps=2)
KINDS = ("self_attn_qk", "self_attn_pv", "proj_q", "proj_k", "proj_v", "proj_out", "cross_proj_q", "cross_attn_qk",
         "cross_attn_pv", "cross_proj_kv", "cross_proj_out", "ffn_up", "ffn_down")


def profile(method, cell_of, steps=2, layers=2):
    ops = {k: [[cell_of(k, s, l) for l in range(layers)] for s in range(steps)] for k in KINDS}
    return BaselineProfile(method, {}, "WanTransformer3DModel", (5, 16, 16), 128, ops)


@pytest.mark.parametrize("method", ["adaptiv", "exion", "cambricon_d"])
def test_nothing_skipped_is_dense_plus_exactly_the_overheads(method):
    # EXION's prediction still runs when it keeps every key: its cost is the only overhead
    est = 0.25 if method == "exion" else 0.0
    prof = profile(method, lambda k, s, l: Cell(1.0, 0.0, 0.0, estimate=est if k == "self_attn_qk" else 0.0))
    r = replay(WL, prof)
    assert r.cycles == pytest.approx(r.dense_cycles + sum(r.overhead_cycles.values()), rel=1e-12)
    if method == "exion":
        qk = [g for g in WL.gemms if g.op == "self_attn_qk"][0]
        expect = est * qk.M * qk.K * qk.N / (128 * 128) * qk.count
        assert r.overhead_cycles["EXION eager prediction on the array"] == pytest.approx(expect)
    else:
        assert r.cycles == pytest.approx(r.dense_cycles)


CELLS = {
    "adaptiv": lambda k, s, l: Cell(0.3 + 0.1 * l, 0.0, 0.7 - 0.1 * l, estimate=0.01) if k in ("self_attn_qk",
                                                                                               "self_attn_pv")
    else Cell.dense(),
    "exion": lambda k, s, l: (Cell(0.4, 0.0, 0.6, estimate=0.25 if k == "self_attn_qk" else 0.0, tile=0.7)
                              if k in ("self_attn_qk", "self_attn_pv", "ffn_up", "ffn_down") and s else Cell.dense()),
    "cambricon_d": lambda k, s, l: (Cell(0.0, 0.5, 0.5, 4, outliers=0.02) if s and "attn" not in k
                                    else Cell.dense()),
}


@pytest.mark.parametrize("method", list(CELLS))
@pytest.mark.parametrize("wl", [WL, HY], ids=["wan", "hunyuan"])
def test_utilisation_costs_are_no_better_than_the_upper_bound(method, wl):
    r = replay(wl, profile(method, CELLS[method]))
    assert r.cycles >= r.upper_bound_cycles - 1e-6
    assert r.cycles < r.dense_cycles or method == "exion"  # EXION's prediction may cost more than it saves
    assert 0 < r.utilisation(128 * 128) <= 1.0 + 1e-9
    assert r.time_s >= r.cycles / 1e9 - 1e-12
    assert all(v for v in r.inputs.values())


def test_utilisation_costs_bite_where_measured():
    # EXION: a tile union wider than the kept share costs cycles the ideal model does not see
    tight = profile("exion", lambda k, s, l: Cell(0.4, 0.0, 0.6, tile=0.4) if k == "ffn_up" else Cell.dense())
    loose = profile("exion", lambda k, s, l: Cell(0.4, 0.0, 0.6, tile=0.9) if k == "ffn_up" else Cell.dense())
    a, b = replay(WL, tight), replay(WL, loose)
    assert a.upper_bound_cycles == pytest.approx(b.upper_bound_cycles)
    assert b.cycles > a.cycles
    # Cambricon-D: outliers and the reference-output traffic cost time
    no = replay(WL, profile("cambricon_d", lambda k, s, l: Cell(0.0, 0.5, 0.5, 4, outliers=0.0)
                            if "attn" not in k else Cell.dense()))
    yes = replay(WL, profile("cambricon_d", lambda k, s, l: Cell(0.0, 0.5, 0.5, 4, outliers=0.1)
                             if "attn" not in k else Cell.dense()))
    assert yes.cycles > no.cycles and no.cycles == pytest.approx(no.upper_bound_cycles)
    # AdapTiV on joint attention: HunyuanVideo's text rows never merge
    r = replay(HY, profile("adaptiv", CELLS["adaptiv"]))
    assert r.cycles > r.upper_bound_cycles


def test_profile_json_round_trip_and_validation(tmp_path):
    p = profile("exion", CELLS["exion"])
    path = tmp_path / "p.json"
    import json

    path.write_text(json.dumps(p.to_dict()))
    back = BaselineProfile.load(path)
    assert replay(WL, back).cycles == replay(WL, p).cycles
    with pytest.raises(ValueError, match="add up to 1"):
        Cell(0.5, 0.0, 0.4)
    with pytest.raises(ValueError, match="replay models"):  # a method no design replays: refused by the replay
        replay(WL, BaselineProfile("tome", {}, "m", (1, 1, 1), 128, {}))
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        BaselineProfile.load(path)


def test_replay_of_a_recorded_trace():
    import torch

    from kaleido.techniques import make_method
    from kaleido.compare.pipelines import load_pipeline

    pipe, call = load_pipeline("random-wan")
    call = dict(call, max_sequence_length=16)
    h = make_method("cambricon_d").apply(pipe.transformer)
    try:
        pipe(prompt="a red ball", generator=torch.Generator().manual_seed(0), output_type="np", **call)
        trace = h.accel_trace()
    finally:
        h.remove()
    prof, notes = baseline_profile_from_trace(trace, WL)
    r = replay(WL, prof)
    assert r.upper_bound_cycles <= r.cycles < r.dense_cycles
    assert r.overhead_cycles["Cambricon-D outlier path (8-bit)"] > 0  # measured outliers on the random model
    with pytest.raises(ValueError, match="not Kaleido's mode statistics"):
        from kaleido.hw.inputs.trace_adapter import profile_from_trace

        profile_from_trace(trace)
