"""Half-precision runs on the CPU against fp32, for every model family: the float path keeps its
input's dtype and device, and decides (nearly) as fp32 does."""

from __future__ import annotations

import pytest
import torch

import kaleido
from kaleido.techniques.kaleido_reuse import KaleidoConfig, get_trace
from kaleido.reuse import ReuseConfig

AGGRESSIVE = KaleidoConfig(reuse=ReuseConfig(4.0, 8.0))


def _cast(kwargs: dict, dtype: torch.dtype) -> dict:
    out = {}
    for k, v in kwargs.items():
        if isinstance(v, torch.Tensor) and v.is_floating_point() and k != "timestep":
            v = v.to(dtype)
        elif isinstance(v, tuple):
            v = tuple(t.to(dtype) if isinstance(t, torch.Tensor) else t for t in v)
        out[k] = v
    return out


class _Probe:
    """Forward hook recording the dtype and device of every patched linear's output."""

    def __init__(self):
        self.seen: set[tuple[torch.dtype, str]] = set()

    def __call__(self, module, inputs, output):
        if isinstance(output, torch.Tensor):
            self.seen.add((output.dtype, output.device.type))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_half_precision_against_fp32(case, dtype):
    ref_model = case.build()
    kw = case.inputs(static=True)
    kaleido.apply(ref_model, AGGRESSIVE)
    with torch.no_grad():
        ref = ref_model(**kw)[0]
    ref_frac = get_trace(ref_model).summary()["whole_transformer"]["saved_fraction"]

    model = case.build().to(dtype)
    report = kaleido.apply(model, AGGRESSIVE).patched
    probe = _Probe()
    handles = [model.get_submodule(m.name).register_forward_hook(probe) for m in report.linears]
    with torch.no_grad():
        out = model(**_cast(kw, dtype))[0]
    for h in handles:
        h.remove()
    assert out.dtype == dtype and out.device == ref.device
    assert probe.seen == {(dtype, "cpu")}  # every reuse linear returned its input's dtype and device
    assert torch.isfinite(out).all()
    rel = float((out.float() - ref).norm() / ref.norm())
    assert rel < 0.1, f"{dtype} Kaleido output is {rel:.3f} (relative L2) from fp32 Kaleido"
    frac = get_trace(model).summary()["whole_transformer"]["saved_fraction"]
    assert ref_frac > 0.05 and abs(frac - ref_frac) < 0.1 * ref_frac + 0.02
    assert get_trace(model).meta["dtype"] == str(dtype).replace("torch.", "")
    kaleido.remove(model)
