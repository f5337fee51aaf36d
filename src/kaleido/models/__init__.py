"""The model layer: one adapter per diffusers vDiT family, and the attention plug point every technique uses.

An adapter (:class:`~kaleido.models.adapter.ModelAdapter`) names a family's GEMM sites (linears and attentions,
with their op kinds), its token grid and its RoPE channel groups; its attention processor mirrors the stock
diffusers processor up to q, k, v and hands them to a technique's attention core
(:mod:`kaleido.models.attention`).  Supported: ``WanTransformer3DModel``, ``HunyuanVideoTransformer3DModel``,
``CogVideoXTransformer3DModel``; :mod:`kaleido.models.testing` builds a tiny random pipeline of each.
"""

from kaleido.models.adapter import ModelAdapter, adapter_for, register_adapter, supported_models
from kaleido.models import cogvideox, hunyuan_video, wan  # noqa: E402,F401  (each registers its adapter)

__all__ = ["ModelAdapter", "adapter_for", "register_adapter", "supported_models"]
