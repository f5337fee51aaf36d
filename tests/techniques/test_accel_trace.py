"""Accelerator baselines record their decisions in the trace format (kaleido.techniques.accel_trace)."""

import pytest
import torch

from kaleido.evaluation.simulator_profiles import simulator_profile_extras
from kaleido.techniques import make_method
from kaleido.techniques.accel_trace import tile_union, trace_op_totals
from kaleido.trace import ReuseTrace

SETTINGS = {"adaptiv": {"tau": 0.6}, "exion": {"attn_density": 0.5, "ffn_tau": 0.05},
            "cambricon_d": {"delta_bits": 4}}


@pytest.fixture(scope="module")
def recorded(random_pipe):
    pipe, call = random_pipe
    out = {}
    for name, st in SETTINGS.items():
        h = make_method(name, **st).apply(pipe.transformer)
        try:
            pipe(prompt="a red ball", generator=torch.Generator().manual_seed(0), output_type="np", **call)
            out[name] = (h.report(), h.accel_trace())
        finally:
            h.remove()
    return out


@pytest.mark.parametrize("name", list(SETTINGS))
def test_trace_matches_the_algorithms_mac_counts(recorded, name):
    report, trace = recorded[name]
    assert trace.method == name and len(trace) > 0
    totals = trace_op_totals(trace)
    for kind, oc in report.op_counts.items():
        if kind == "estimate":
            assert sum(v[3] for v in totals.values()) == oc.total_mac8
            continue
        assert tuple(totals[kind][:3]) == (oc.total_mac8, oc.total_mac_low, oc.total_skipped), kind
    # per step and layer: every transformer call of every block is there
    steps = {r.step for r in trace}
    layers = {r.layer for r in trace}
    assert layers == {0, 1} and len(steps) >= 2
    extra = simulator_profile_extras({"accel": trace})  # the comparison's door to the replay's profile
    assert "accel_profile" in extra, extra.get("accel_profile_error")


def test_design_measurements_recorded(recorded):
    _, ex = recorded["exion"]
    sparse = [r.decision for r in ex if r.op == "ffn_in" and r.decision.skipped > 0]
    assert sparse and all(0 <= d.tile_cols <= d.tile_dense_cols for d in sparse)
    # a tile keeps at least what its rows keep on average
    for d in sparse:
        assert d.tile_cols / d.tile_dense_cols >= d.mac8 / (d.mac8 + d.skipped) - 1e-9
    _, cd = recorded["cambricon_d"]
    diff = [r.decision for r in cd if r.op == "proj_q" and r.decision.mac_low > 0]
    dense = [r.decision for r in cd if r.op == "proj_q" and r.decision.mac_low == 0]
    assert diff and dense and all(d.a_elements > 0 for d in diff) and all(d.outliers == -1 for d in dense)
    assert all(d.low_bits == 4 for d in diff)


def test_trace_round_trips_and_corruption_is_caught(recorded, tmp_path):
    _, trace = recorded["exion"]
    p = trace.save(tmp_path / "exion.safetensors")
    back = ReuseTrace.load(p, expected_model_class="WanTransformer3DModel")
    assert back.method == "exion"
    assert [(r.step, r.context, r.layer, r.op, r.decision) for r in back] == \
           [(r.step, r.context, r.layer, r.op, r.decision) for r in trace]
    assert back.summary()["whole_transformer"]["mac8"] == trace.summary()["whole_transformer"]["mac8"]
    raw = p.read_bytes()
    (tmp_path / "cut.safetensors").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match="truncated or corrupt"):
        ReuseTrace.load(tmp_path / "cut.safetensors")
    # a decision whose MACs do not add up to the GEMM is refused
    from safetensors.torch import load_file, save_file
    from safetensors import safe_open

    t = load_file(str(p))
    with safe_open(str(p), framework="pt") as f:
        meta = f.metadata()
    t["decisions"][0, 3] += 1  # one more skipped MAC
    save_file(t, str(tmp_path / "bad.safetensors"), metadata=meta)
    with pytest.raises(ValueError, match="decision counts"):
        ReuseTrace.load(tmp_path / "bad.safetensors")
    del t["decisions"]
    save_file(t, str(tmp_path / "nodec.safetensors"), metadata=meta)
    with pytest.raises(ValueError, match="no 'decisions' tensor"):
        ReuseTrace.load(tmp_path / "nodec.safetensors")


def test_tile_union():
    keep = torch.zeros(1, 5, 4, dtype=torch.bool)
    keep[0, 0, 0] = keep[0, 1, 1] = keep[0, 4, 3] = True
    assert tile_union(keep, 2) == (3, 12)  # tiles {0,1}: 2 cols, {2,3}: 0, {4}: 1; 3 tiles x 4 cols


def test_exion_keep_mask_reaches_the_recorder_through_the_handle(recorded):
    _, ex = recorded["exion"]
    qk = [r.decision for r in ex if r.op == "self_qk"]
    assert qk and all(0 < d.tile_cols <= d.tile_dense_cols for d in qk)  # every sparse call announced its mask


def test_recorders_attach_by_name_and_patch_nothing(random_pipe):
    from kaleido.techniques import exion as exion_module
    from kaleido.techniques import attention_core

    pipe, _ = random_pipe
    tr = pipe.transformer
    h = make_method("exion", attn_density=0.5).apply(tr)
    try:
        # the module's attention function and the handle's own methods are what they were
        assert exion_module.keep_attention is attention_core.keep_attention
        assert "report" not in vars(h) and "accel_trace" not in vars(h) and "add" not in vars(h.ledger)
        with pytest.raises(ValueError, match="already registered"):
            h.ledger.add_observer("accel_trace", lambda *a: None)
        with pytest.raises(ValueError, match="unknown handle event 'keep mask'"):
            h.observe("keep mask", "mine", lambda keep: None)
        with pytest.raises(ValueError, match="already has"):
            h.register_trace_provider("another", lambda: None)
    finally:
        h.remove()
    tome = make_method("tome", ratio=0.3).apply(tr)
    try:
        with pytest.raises(ValueError) as e:
            tome.accel_trace()
        assert "\n" not in str(e.value) and "tome records no accelerator trace" in str(e.value)
        tome.register_report_extra("mine", lambda: {"seen": 1})
        assert tome.report().extra["seen"] == 1
    finally:
        tome.remove()


def test_ledger_observers_see_every_add_in_order():
    from kaleido.techniques.base import OpLedger

    ledger, seen = OpLedger(), []
    ledger.add_observer("a", lambda *args: seen.append(("a", args)))
    ledger.add_observer("b", lambda *args: seen.append(("b", args)))
    ledger.add("self_qk", mac8=3, skipped=1)
    ledger.remove_observer("a")
    ledger.add("ffn_in", mac_low=2)
    assert seen == [("a", ("self_qk", 3, 0, 1)), ("b", ("self_qk", 3, 0, 1)), ("b", ("ffn_in", 0, 2, 0))]
    assert ledger.op_counts()["self_qk"].total_mac8 == 3
    with pytest.raises(ValueError, match="unknown op kind"):
        ledger.add("nope", mac8=1)
    assert len(seen) == 3  # a refused add reaches no observer
