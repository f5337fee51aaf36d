"""The attention plug point: model processors hand q, k, v to an attention core.

Model processors (in ``wan.py``, ``hunyuan_video.py``, ``cogvideox.py``; one per family)
mirror the stock diffusers processors up to the point where ``q``, ``k``, ``v`` are ready
(after q/k norms and RoPE, text joined as the model joins it, shape ``(B, S, H, D)``), then
call their :class:`AttentionCore` instead of the attention kernel, and finish as the stock
processor does (output projections, text split).  The model-specific code therefore
exists once per family, and every technique that changes attention is a core:

* :class:`ReuseCore` - Kaleido: :func:`reuse_attend` decides q.k^T (and P.V) reuse;
* the baselines' cores (:mod:`kaleido.baselines.attention_core`): Sparse VideoGen, block
  top-k, ToMe, AdapTiV, EXION's attention prediction.

A core gets, besides q, k, v, an :class:`AttentionCall`: the site (name, layer, kind), the
stock kernel with the model's mask (``dense``), the mask itself, and the attention's input
rows of the video tokens.  A core installed on a site is the site's processor's attribute
``core``; no function of another module is replaced.

:func:`reuse_attend` asks the runtime what this layer does at this step:

* q.k^T and P.V both dense -> the stock kernel (``dense_fn``), recorded as dense;
* otherwise -> :func:`kaleido.reuse.reuse_attention` (its float path: one gather of
  the effective queries, then SDPA), recorded from the mode maps it returns.

The dense branch runs the same operations as the stock processor, so a dense step
or layer gives the stock processor's output bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Protocol

import torch

from kaleido.reuse import ReuseConfig, reuse_attention

from .state import KaleidoRuntime

if TYPE_CHECKING:
    from .registry import AttentionSite

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


class ReuseCore:
    """Kaleido's attention core: :func:`reuse_attend` on the runtime of the patched transformer."""

    def __init__(self, runtime: KaleidoRuntime):
        self.runtime = runtime

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, call: AttentionCall) -> torch.Tensor:
        return reuse_attend(self.runtime, call.site, q, k, v, call.dense, attn_mask=call.attn_mask)

    def note_side_attention(self, call: AttentionCall, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                            tag: str) -> None:
        """Record an attention Kaleido never reuses (e.g. Wan I2V image-context attention) as dense MACs."""
        B, Sq, H, D = q.shape
        Sk, Dv = k.shape[1], v.shape[-1]
        name, layer = call.site.name, call.site.layer
        self.runtime.record_other_dense(f"{name}.{tag}_qk", layer, B * H * Sq, D, Sk)
        self.runtime.record_other_dense(f"{name}.{tag}_pv", layer, B * H * Sq, Sk, Dv)


def reuse_attend(
    rt: KaleidoRuntime,
    site: "AttentionSite",
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    dense_fn: DenseKernel,
    attn_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Attention of ``q`` ``(B, Sq, H, D)`` over ``k``, ``v`` ``(B, Sk, H, D)`` -> ``(B, Sq, H, D)``.

    ``dense_fn(q, k, v)`` is the stock kernel call (mask included).  Records
    ``<kind>_qk`` and ``<kind>_pv`` of ``site`` into the runtime's trace.
    """
    B, Sq, H, D = q.shape
    Sk, Dv = k.shape[1], v.shape[-1]
    name, layer = site.name, site.layer
    grid = rt.grid_for(Sq, f"attention {name}")
    qk_switch = "self_qk" if site.kind == "self" else "cross_qk"
    qk_op, pv_op = f"{site.kind}_qk", f"{site.kind}_pv"
    qk_cfg = rt.plan(qk_switch, layer)
    pv_cfg = rt.plan("pv", layer)
    groups = rt.groups(qk_switch, layer, D)
    if rt.observers:
        rt.observe(layer=layer, op=qk_op, role="q", module=name, operand=q, grid=grid, groups=groups)
        if Sk == Sq:  # self-attention keys are grid tokens too (cross-attention keys are text)
            rt.observe(layer=layer, op=qk_op, role="k", module=name, operand=k, grid=grid, groups=groups)
    if qk_cfg is None and pv_cfg is None:
        out = dense_fn(q, k, v)
        lb = rt.low_bits(qk_switch, layer)
        rt.record_dense(layer=layer, op=qk_op, module=name, batch=B, heads=H, rows=Sq, dim=D,
                        n_cols=Sk, grid=grid, groups=groups, low_bits=lb)
        rt.record_dense(layer=layer, op=pv_op, module=name, batch=B, heads=H, rows=Sq, dim=Sk,
                        n_cols=Dv, grid=grid, groups=rt.pv_record_groups(layer, Sk),
                        low_bits=rt.low_bits("pv", layer))
        return out
    pv_groups = rt.groups("pv", layer, Sk) if pv_cfg is not None else None
    cfg = qk_cfg if qk_cfg is not None else ReuseConfig.dense(low_bits=rt.low_bits(qk_switch, layer))
    out, st = reuse_attention(q, k, v, grid, groups, cfg, pv_config=pv_cfg, pv_groups=pv_groups, attn_mask=attn_mask,
                              q_eff_out=None if qk_cfg is None else rt.effective_out(q.transpose(1, 2)))
    if qk_cfg is not None:
        rt.record_modes(layer=layer, op=qk_op, module=name, mode_map=st.qk_modes, n_cols=Sk, heads=H)
    else:
        rt.record_dense(layer=layer, op=qk_op, module=name, batch=B, heads=H, rows=Sq, dim=D,
                        n_cols=Sk, grid=grid, groups=groups, low_bits=cfg.low_bits)
    if st.pv_modes is not None:
        rt.record_modes(layer=layer, op=pv_op, module=name, mode_map=st.pv_modes, n_cols=Dv, heads=H)
    elif st.pv_skipped_rows is not None:  # the exact P.V row skip: skipped rows FULL, no P.V decision made
        rt.record_row_skip(layer=layer, op=pv_op, module=name, skipped=st.pv_skipped_rows, n_cols=Dv,
                           grid=grid, groups=rt.pv_record_groups(layer, Sk),
                           low_bits=rt.low_bits("pv", layer))
    else:
        rt.record_dense(layer=layer, op=pv_op, module=name, batch=B, heads=H, rows=Sq, dim=Sk,
                        n_cols=Dv, grid=grid, groups=rt.pv_record_groups(layer, Sk),
                        low_bits=rt.low_bits("pv", layer))
    return out.to(q.dtype)
