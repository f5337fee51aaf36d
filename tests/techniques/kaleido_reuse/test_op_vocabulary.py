"""Every op Kaleido records on the supported models is an OpKind (kaleido.ops); Wan's text-side k/v are named."""

from __future__ import annotations

import torch

import kaleido
from kaleido.techniques.kaleido_reuse import KaleidoConfig
from kaleido.ops import BLOCK_OPS, SWITCH_OF, OpKind

#: every switch on, P.V included, so that every op kind a model has is recorded with reuse
ALL_ON = KaleidoConfig.from_dict({"reuse": {"theta1": 4.0, "theta2": 8.0}, "ops": {"pv": {"enabled": True}}})


def _trace(model: torch.nn.Module, inputs: dict):
    kaleido.apply(model, ALL_ON)
    with torch.no_grad():
        model(**inputs)
    return kaleido.remove(model)


def test_every_recorded_op_is_an_op_kind(case):
    trace = _trace(case.build(), case.inputs(static=True))
    assert trace.records
    kinds = {OpKind.parse(op) for op in trace.ops}
    assert OpKind.DENSE in kinds and OpKind.SELF_QK in kinds
    if case.name == "wan":  # a Wan block is the vocabulary's block: every kind of it is recorded
        assert kinds == set(BLOCK_OPS) | {OpKind.DENSE}
    if case.name == "hunyuan_video":
        assert OpKind.FUSED_OUT in kinds
    for r in trace.records:  # a block op is recorded inside the blocks only
        assert r.layer >= 0 or OpKind(r.op) is OpKind.DENSE, (r.op, r.module)


def test_wan_records_its_text_side_kv_projections_as_cross_proj_kv(wan_model):
    from kaleido.hw.inputs.trace_adapter import profile_from_trace
    from kaleido.hw.inputs.workloads import get_workload

    inputs = dict(hidden_states=torch.randn(1, 4, 3, 8, 8, generator=torch.Generator().manual_seed(0)),
                  timestep=torch.full((1,), 500.0), encoder_hidden_states=torch.randn(1, 7, 16), return_dict=False)
    trace = _trace(wan_model, inputs)
    kv = trace.select(op="cross_proj_kv")
    assert sorted(r.module for r in kv) == [f"blocks.{i}.attn2.to_{x}" for i in (0, 1) for x in "kv"]
    dim = wan_model.config.num_attention_heads * wan_model.config.attention_head_dim
    for r in kv:  # dense (never reused), over the 7 text tokens, no token grid
        assert not r.enabled and r.grid is None and r.rows == 7 and r.dense_macs == 7 * dim * dim
    assert not any(r.module.endswith(("attn2.to_k", "attn2.to_v")) for r in trace.select(op="dense"))
    s = trace.summary()
    assert s["per_op"]["cross_proj_kv"]["switch"] is None
    assert s["per_op"]["cross_proj_kv"]["saved_fraction"] == 0.0
    # the reusable-ops total counts the switched ops only; the whole transformer counts everything
    assert s["reusable_ops"]["dense_macs"] == sum(r.dense_macs for r in trace.records if r.op in SWITCH_OF)
    assert s["whole_transformer"]["dense_macs"] == sum(r.dense_macs for r in trace.records)
    assert "cross_proj_kv" not in trace.op_kind_stats()
    # the simulator keeps the workload's cross_proj_kv GEMM dense and takes nothing from these records
    profile, notes = profile_from_trace(trace, get_workload("wan-1.3b-480p"))
    assert "cross_proj_kv" not in profile.ops and not any("cross_proj_kv" in n for n in notes)
    assert "cross_proj_q" in profile.ops  # recorded (dense here: the one call is the warm-up step)
