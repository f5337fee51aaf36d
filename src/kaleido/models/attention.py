"""The attention plug point: model processors hand q, k, v to an attention core.

Model processors (in ``wan.py``, ``hunyuan_video.py``, ``cogvideox.py``; one per family)
mirror the stock diffusers processors up to the point where ``q``, ``k``, ``v`` are ready
(after q/k norms and RoPE, text joined as the model joins it, shape ``(B, S, H, D)``), then
call their :class:`AttentionCore` instead of the attention kernel, and finish as the stock
processor does (output projections, text split).  The model-specific code therefore
exists once per family, and every technique that changes attention is a core:

* Kaleido's (:class:`kaleido.techniques.kaleido_reuse.attention.ReuseCore`) decides q.k^T (and P.V) reuse;
* the other techniques' cores (:mod:`kaleido.techniques.attention_core`): Sparse VideoGen, block
  top-k, ToMe, AdapTiV, EXION's attention prediction.

A core gets, besides q, k, v, an :class:`AttentionCall`: the site (name, layer, kind), the
stock kernel with the model's mask (``dense``), the mask itself, and the attention's input
rows of the video tokens.  A core installed on a site is the site's processor's attribute
``core``; no function of another module is replaced.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Protocol

import torch

if TYPE_CHECKING:
    from kaleido.models.adapter import AttentionSite

#: ``dense(q, k, v)``: the stock attention kernel of a site, its mask included; ``(B, S, H, D)`` in and out
DenseKernel = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class AttentionCall:
    """What a core gets besides q, k, v for one call of one attention site.

    ``dense``: the stock kernel with the model's mask; ``attn_mask``: that mask as the kernel
    takes it (``None``, or e.g. HunyuanVideo's ``(B, 1, 1, S)`` bool mask over padded text);
    ``hidden_states``: the attention's input rows of the video tokens, ``(B, S_video, C)``
    (after norm / modulation, before the projections).
    """

    site: "AttentionSite"
    dense: DenseKernel
    attn_mask: torch.Tensor | None
    hidden_states: torch.Tensor


class AttentionCore(Protocol):
    """The attention step of a model processor.

    ``attend(q, k, v, call)``: ``q`` ``(B, Sq, H, D)`` over ``k``, ``v`` ``(B, Sk, H, D)`` -> ``(B, Sq, H, D)``,
    for the site's sequences as the model built them (joint models: text included where the model
    puts it).  ``note_side_attention(call, q, k, v, tag)``: an attention the processor computed
    densely beside the site's own (Wan I2V's image context, ``tag="img"``), for the core's accounting.
    """

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, call: AttentionCall) -> torch.Tensor: ...

    def note_side_attention(self, call: AttentionCall, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                            tag: str) -> None: ...


class CoreAttnProcessor:
    """Base of the model processors: the core, the site and the processor it replaced."""

    def __init__(self, core: AttentionCore, site: "AttentionSite", original: object):
        self.core = core
        self.site = site
        self.original = original
        # stock processors' class attributes read by diffusers' dispatcher
        self._attention_backend = getattr(original, "_attention_backend", None)
        self._parallel_config = getattr(original, "_parallel_config", None)

    def make_call(self, dense: DenseKernel, attn_mask: torch.Tensor | None,
                  hidden_states: torch.Tensor) -> AttentionCall:
        """The :class:`AttentionCall` of this site for one call of the processor."""
        return AttentionCall(self.site, dense, attn_mask, hidden_states)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.site.name!r}, layer={self.site.layer}, kind={self.site.kind!r}, "
                f"core={type(self.core).__name__})")


def project_heads(attn: torch.nn.Module, x: torch.Tensor, kv_source: torch.Tensor | None = None, *,
                  projections: tuple[str, str, str] = ("to_q", "to_k", "to_v"),
                  norms: tuple[str, str] = ("norm_q", "norm_k"),
                  norm_before_split: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q, k, v of a diffusers ``Attention``, each ``(B, S, H, D)``: its projections (``projections``, of ``x``, and
    of ``kv_source`` for the keys and values when given), split into ``attn.heads`` heads, and its q / k norms
    (``norms``; a missing one is skipped) - applied on the heads, or on the whole width before the split
    (``norm_before_split``: Wan's ``norm_q`` / ``norm_k`` span every head).  The steps every stock processor of a
    supported family takes before its attention kernel."""
    kv = x if kv_source is None else kv_source
    q, k, v = (getattr(attn, projections[0])(x), getattr(attn, projections[1])(kv), getattr(attn, projections[2])(kv))
    norm_q, norm_k = (getattr(attn, n, None) for n in norms)
    if norm_before_split:
        q, k = _maybe(norm_q, q), _maybe(norm_k, k)
    q, k, v = (t.unflatten(2, (attn.heads, -1)) for t in (q, k, v))
    if not norm_before_split:
        q, k = _maybe(norm_q, q), _maybe(norm_k, k)
    return q, k, v


def _maybe(norm: Callable | None, x: torch.Tensor) -> torch.Tensor:
    return x if norm is None else norm(x)


def rotate_video_rows(x: torch.Tensor, rotate: Callable[[torch.Tensor], torch.Tensor], n_text: int,
                      text_position: str) -> torch.Tensor:
    """``x`` ``(B, S, H, D)`` with RoPE (``rotate``) applied to its video rows only: the ``n_text`` text rows of a
    joint sequence - before the video (``"prefix"``, CogVideoX) or after it (``"suffix"``, HunyuanVideo) - keep
    their values."""
    if n_text == 0:
        return rotate(x)
    if text_position == "prefix":
        return torch.cat([x[:, :n_text], rotate(x[:, n_text:])], dim=1)
    if text_position == "suffix":
        return torch.cat([rotate(x[:, :-n_text]), x[:, -n_text:]], dim=1)
    raise ValueError(f"text_position={text_position!r}: use 'prefix' or 'suffix'")
