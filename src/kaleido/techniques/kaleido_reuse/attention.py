"""Kaleido's attention core: the q.k^T (and P.V) reuse decision inside every attention site a model adapter names.

A model processor (:mod:`kaleido.models.attention`) hands q, k, v to :class:`ReuseCore`, which calls
:func:`reuse_attend`.  It asks the runtime what this layer does at this step:

* q.k^T and P.V both dense -> the stock kernel (``dense_fn``), recorded as dense;
* otherwise -> :func:`kaleido.reuse.reuse_attention` (its float path: one gather of
  the effective queries, then SDPA), recorded from the mode maps it returns.

The dense branch runs the same operations as the stock processor, so a dense step
or layer gives the stock processor's output bit for bit.
"""

from __future__ import annotations

import torch

from kaleido.models.adapter import AttentionSite
from kaleido.models.attention import AttentionCall, DenseKernel
from kaleido.reuse import ReuseConfig, reuse_attention
from kaleido.techniques.kaleido_reuse.runtime import KaleidoRuntime


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
    site: AttentionSite,
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
