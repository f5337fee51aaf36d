"""The exact P.V row skip through the diffusers integration: with every self-attention group reused along one
axis, the all-FULL rows' P.V is recorded as skipped (no P.V decision), survives a trace round trip, and the
simulator costs the skip from q.k^T's patterns without a P.V decision unit."""

import torch

import kaleido
from kaleido.hw.inputs.trace_adapter import profile_from_trace
from kaleido.techniques.kaleido_reuse import KaleidoConfig
from kaleido.trace import ReuseTrace


def _trace(model, axes):
    torch.manual_seed(0)
    x = torch.randn(1, 4, 1, 8, 8).expand(-1, -1, 3, -1, -1).contiguous()
    cfg = KaleidoConfig.from_dict({"reuse": {"theta1": 64, "theta2": 64, "low_bits": 7, "dense_steps": 0},
                                   "ops": {"self_qk": {"axes": axes, "theta1": 64, "theta2": 64, "low_bits": 7}}})
    kaleido.apply(model, cfg)
    with torch.no_grad():
        for i in range(2):
            with model.cache_context("cond", step_index=i, num_inference_steps=2):
                model(x, torch.tensor([900.0 - 400 * i]), torch.randn(1, 7, 16), return_dict=False)
    return kaleido.remove(model)


def test_one_axis_groups_skip_pv_rows_and_the_trace_says_so(tmp_path, wan_model):
    tr = _trace(wan_model, "t")  # a static clip: along t every row repeats its predecessor
    pv = tr.select(op="self_pv")
    assert pv and all(not r.enabled for r in pv)  # no P.V decision was made...
    full = sum(int(r.head_counts[..., 2].sum()) for r in pv)
    assert full > 0  # ...but the skipped rows are FULL
    qk_all_full = sum(int(r.pattern_counts[-1]) for r in tr.select(op="self_qk"))
    assert sum(int(r.head_counts[:, 0, 2].sum()) for r in pv) == qk_all_full  # exactly q.k^T's all-FULL rows
    s = tr.summary()["per_op"]["self_pv"]
    assert s["saved_fraction"] > 0
    back = ReuseTrace.load(tr.save(tmp_path / "t.safetensors"))
    assert back.summary() == tr.summary()
    profile, _ = profile_from_trace(back)
    assert profile.ops.get("self_attn_pv") is None  # P.V stays undecided in the simulator's profile


def test_the_default_axes_skip_no_pv_row(wan_model):
    tr = _trace(wan_model, ["w", "t", "t"])  # the default's per-group axes: a row FULL in all three has two anchors
    assert tr.summary()["per_op"]["self_pv"]["saved_fraction"] == 0.0
