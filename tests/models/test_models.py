"""One tester run against every supported transformer class (tiny random models, CPU)."""

from __future__ import annotations

import torch

import kaleido
from kaleido.techniques.kaleido_reuse import KaleidoConfig, get_trace, reset
from kaleido.trace import DENSE_OP
from kaleido.reuse import Mode, ReuseConfig



def run(model: torch.nn.Module, kwargs: dict) -> torch.Tensor:
    with torch.no_grad():
        return model(**kwargs)[0]

AGGRESSIVE = KaleidoConfig(reuse=ReuseConfig(4.0, 8.0))


def test_remove_restores_bit_identical_output(case):
    model = case.build()
    kw = case.inputs()
    before = run(model, kw)
    kaleido.apply(model, AGGRESSIVE)
    during = run(model, kw)
    assert torch.isfinite(during).all()
    kaleido.remove(model)
    after = run(model, kw)
    assert torch.equal(before, after)
    assert not hasattr(model, "_kaleido_runtime")
    # no Kaleido hook or processor left anywhere
    for name, m in model.named_modules():
        assert "Kaleido" not in type(getattr(m, "processor", None)).__name__, name
        reg = getattr(m, "_diffusers_hook", None)
        assert reg is None or not any(h.startswith("kaleido") for h in reg.hooks), name


def test_zero_thresholds_equal_dense(case):
    model = case.build()
    kw = case.inputs(static=True)
    dense = run(model, kw)
    kaleido.apply(model, KaleidoConfig.dense())
    out = run(model, kw)
    assert (out - dense).abs().max().item() < 1e-5
    summary = get_trace(model).summary()
    assert summary["whole_transformer"]["saved_fraction"] == 0.0
    assert summary["per_op"]["self_qk"]["mode_fractions"]["compute"] == 1.0


def test_reuse_on_static_video_and_trace_content(case):
    model = case.build()
    report = kaleido.apply(model, AGGRESSIVE).patched
    n_layers = report.to_dict()
    assert report.n_active > 0 and report.attention and report.linears
    run(model, case.inputs(static=True))
    trace = get_trace(model)
    layers = {r.layer for r in trace.records if r.op == "self_qk"}
    assert layers == set(range(len(report.attention) if case.joint else len(report.attention) // 2))
    assert {"self_qk", "proj_q", "ffn_in", DENSE_OP} <= set(trace.ops)
    for r in trace.records:
        # every row of every (head, group) has exactly one mode
        assert (r.head_counts.sum(axis=2) == r.batch * r.rows).all()
    qk = trace.op_kind_stats()["self_qk"]
    frac = qk.fractions()
    if case.has_rope:
        # frames are identical: the h- and w-RoPE groups (reuse axis t) are reused a lot
        h = qk.group_names.index("h")
        assert frac[h, Mode.FULL] + frac[h, Mode.PARTIAL] > 0.3
    # text tokens (joint models) never reuse: all their rows are COMPUTE
    rec = [r for r in trace.records if r.op == "self_qk"][0]
    assert rec.grid.prefix + rec.grid.suffix == rec.rows - rec.grid.n_grid
    s = trace.summary()
    whole = s["whole_transformer"]
    assert whole["dense_macs"] > s["reusable_ops"]["dense_macs"] > 0
    assert 0.0 < whole["saved_fraction"] < 1.0
    del n_layers


def test_text_rows_always_compute(joint_case):
    case = joint_case
    model = case.build()
    kaleido.apply(model, KaleidoConfig(reuse=ReuseConfig(4.0, 8.0), record_maps=True))
    run(model, case.inputs(static=True))
    trace = get_trace(model)
    maps = list(trace.mode_maps())
    assert maps, "the trace recorded no mode map: nothing below would be checked"
    text_rows = 0
    for r, mm in maps:
        g = mm.grid
        text = torch.cat([mm.modes[..., : g.prefix, :], mm.modes[..., g.prefix + g.n_grid :, :]], dim=-2)
        assert text.numel() == 0 or int(text.max()) == int(Mode.COMPUTE), r.op
        assert r.layer >= 0
        text_rows += text.numel()
    assert text_rows > 0, "no map held a text row of the joint sequence"


def test_cfg_in_one_batch_matches_single(case):
    model = case.build()
    kaleido.apply(model, KaleidoConfig(reuse=ReuseConfig(4.0, 8.0), record_maps=True))
    kw2 = case.inputs(batch=2, static=True)
    out2 = run(model, kw2)
    maps2 = [mm.modes[0] for _, mm in get_trace(model).mode_maps()]
    reset(model)
    kw1 = {k: (v[:1] if isinstance(v, torch.Tensor) else v) for k, v in kw2.items()}
    out1 = run(model, kw1)
    maps1 = [mm.modes[0] for _, mm in get_trace(model).mode_maps()]
    assert (out2[:1] - out1).abs().max().item() < 1e-4
    assert len(maps1) == len(maps2)
    assert all(torch.equal(a, b) for a, b in zip(maps1, maps2))


def test_step_index_counts_calls_per_context_and_new_generation(case):
    model = case.build()
    kaleido.apply(model, KaleidoConfig(reuse=ReuseConfig(2.0, 8.0, dense_steps=1)))
    for i, t in enumerate((900.0, 600.0)):
        with model.cache_context("cond"):
            run(model, case.inputs(t=t))
        with model.cache_context("uncond"):
            run(model, case.inputs(t=t, seed=5))
    trace = get_trace(model)
    assert trace.steps == [0, 1]
    assert set(trace.meta["contexts_seen"]) == {"cond", "uncond"}
    # step 0 is the dense warm-up: nothing reused there
    assert all(not r.enabled for r in trace.select(step=0))
    assert any(r.enabled for r in trace.select(step=1))
    # a timestep going back up starts a new generation
    with model.cache_context("cond"):
        run(model, case.inputs(t=900.0))
    assert get_trace(model).steps == [0]
    assert kaleido.get_trace(model) is not None
    # diffusers' end-of-pipeline reset closes the generation; the trace survives it
    model._reset_stateful_cache()
    assert get_trace(model).steps == [0]


def test_per_layer_override_and_disabled_ops(case):
    model = case.build()
    cfg = KaleidoConfig.from_dict({
        "reuse": {"theta1": 4, "theta2": 8, "dense_steps": 0},
        "ops": {"proj": {"enabled": False}},
        "layers": {"0": {"self_qk": {"enabled": False}}},
    })
    report = kaleido.apply(model, cfg).patched
    assert all(not m.active_ops for m in report.linears if m.ops[0].startswith("proj_"))
    run(model, case.inputs(static=True))
    trace = get_trace(model)
    assert all(not r.enabled for r in trace.select(op="self_qk", layer=0))
    assert any(r.enabled for r in trace.select(op="self_qk", layer=1))
    assert all(not r.enabled for r in trace.records if r.op.startswith("proj_"))
