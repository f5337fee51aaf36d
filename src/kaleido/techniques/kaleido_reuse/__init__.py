"""Kaleido inside diffusers: ``apply`` / ``remove`` on vDiT transformers, and traces.

>>> report = kaleido.apply(pipe.transformer, kaleido.KaleidoConfig())
>>> video = pipe(prompt, num_inference_steps=30).frames[0]
>>> trace = kaleido.get_trace(pipe.transformer)   # the generation's ReuseTrace
>>> kaleido.remove(pipe.transformer)               # back to the stock model

Supported: WanTransformer3DModel, HunyuanVideoTransformer3DModel,
CogVideoXTransformer3DModel (see :mod:`kaleido.integrations.registry`).
"""

from .apply import ApplyReport, apply, get_trace, is_applied, remove, reset, set_num_steps
from .config import OP_SWITCHES, KaleidoConfig, OpConfig
from .registry import ModelAdapter, register_adapter, supported_models
from kaleido.trace import ReuseTrace, TraceRecord
from . import cogvideox, hunyuan_video, wan  # noqa: E402,F401  (each registers its adapter)

__all__ = [
    "apply",
    "remove",
    "get_trace",
    "reset",
    "set_num_steps",
    "is_applied",
    "ApplyReport",
    "KaleidoConfig",
    "OpConfig",
    "OP_SWITCHES",
    "ReuseTrace",
    "TraceRecord",
    "ModelAdapter",
    "register_adapter",
    "supported_models",
]
