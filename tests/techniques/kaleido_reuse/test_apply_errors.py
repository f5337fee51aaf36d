"""Bad input to apply / generation: each a clear ValueError."""

from __future__ import annotations

import pytest
import torch

import kaleido
from kaleido.techniques.kaleido_reuse import KaleidoConfig
from kaleido.models.adapter import supported_models


def _wan(**kw):
    from diffusers import WanTransformer3DModel

    torch.manual_seed(0)
    args = dict(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=24, in_channels=4, out_channels=4,
                text_dim=16, freq_dim=16, ffn_dim=32, num_layers=2, rope_max_seq_len=64)
    args.update(kw)
    return WanTransformer3DModel(**args).eval()


def test_unknown_model_class_names_the_supported_ones():
    with pytest.raises(ValueError) as e:
        kaleido.apply(torch.nn.Sequential(torch.nn.Linear(4, 4)))
    msg = str(e.value)
    assert "Sequential" in msg
    for name in ("WanTransformer3DModel", "HunyuanVideoTransformer3DModel", "CogVideoXTransformer3DModel"):
        assert name in msg and name in supported_models()
    with pytest.raises(ValueError, match="pipe.transformer"):
        kaleido.apply(object())


def test_ltx_and_mochi_are_refused_with_the_reason():
    for name, words in (("LTXVideoTransformer3DModel", "interleaved"), ("MochiTransformer3DModel", "mix")):
        cls = type(name, (torch.nn.Module,), {})
        with pytest.raises(ValueError) as e:
            kaleido.apply(cls())
        assert name in str(e.value) and words in str(e.value)


def test_refuses_to_patch_nothing():
    model = _wan()
    off = {k: {"enabled": False} for k in ("self_qk", "cross_qk", "proj", "ffn", "pv")}
    with pytest.raises(ValueError, match="would patch nothing"):
        kaleido.apply(model, {"ops": off})
    with pytest.raises(ValueError, match="filter accepted no module"):
        kaleido.apply(model, filter_fn=lambda name, module: False)
    assert not kaleido.techniques.kaleido_reuse.is_applied(model)


def test_filter_limits_patching():
    model = _wan()
    report = kaleido.apply(model, filter_fn=lambda name, m: name.startswith("blocks.1")).patched
    assert report.attention and all(m.layer == 1 for m in report.attention + report.linears)
    assert any(n.startswith("blocks.0") for n in report.dense_counted)


def test_double_apply_layers_and_axes_errors():
    model = _wan()
    kaleido.apply(model)
    with pytest.raises(ValueError, match="already applied"):
        kaleido.apply(model)
    kaleido.remove(model)
    with pytest.raises(ValueError, match="not applied"):
        kaleido.remove(model)
    with pytest.raises(ValueError, match="has 2 layers"):
        kaleido.apply(model, {"layers": {"5": {"proj": {"enabled": False}}}})
    with pytest.raises(ValueError, match="1 or 3 axes"):
        kaleido.apply(model, {"ops": {"self_qk": {"axes": ["t", "h"]}}})
    with pytest.raises(ValueError, match="one per chunk"):
        kaleido.apply(model, {"ops": {"proj": {"chunk_size": 8, "axes": ["t", "h", "w"]}}})
    assert not kaleido.techniques.kaleido_reuse.is_applied(model)


def test_fused_projections_are_refused():
    model = _wan()
    model.fuse_qkv_projections()
    with pytest.raises(ValueError, match="unfuse"):
        kaleido.apply(model)


def test_grid_not_derivable():
    model = _wan()
    kaleido.apply(model)
    with torch.no_grad(), pytest.raises(ValueError, match="cannot be derived"):
        model(torch.randn(1, 4, 8, 8), torch.tensor([1.0]), torch.randn(1, 7, 16))
    with torch.no_grad(), pytest.raises(ValueError, match="smaller than the patch"):
        model(torch.randn(1, 4, 3, 1, 8), torch.tensor([1.0]), torch.randn(1, 7, 16))
    # a block called on its own has no grid
    with torch.no_grad(), pytest.raises(ValueError, match="outside a call"):
        model.blocks[0].attn1.to_q(torch.randn(1, 48, 48))


def test_schedule_needs_the_number_of_steps():
    model = _wan()
    cfg = KaleidoConfig.from_dict({"reuse": {"theta1": 1, "theta2": 4, "schedule": [[0.5, 2, 8]]}})
    kaleido.apply(model, cfg)
    x = torch.randn(1, 4, 3, 8, 8)
    with torch.no_grad(), pytest.raises(ValueError, match="set_num_steps"):
        model(x, torch.tensor([1.0]), torch.randn(1, 7, 16))
    kaleido.techniques.kaleido_reuse.set_num_steps(model, 4)
    with torch.no_grad():
        model(x, torch.tensor([1.0]), torch.randn(1, 7, 16))
    with pytest.raises(ValueError, match="positive int"):
        kaleido.techniques.kaleido_reuse.set_num_steps(model, 0)
