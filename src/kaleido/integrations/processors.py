"""The attention step shared by every model's Kaleido processor.

Model processors (in ``wan.py``, ``hunyuan_video.py``, ``cogvideox.py``) mirror the
stock diffusers processors up to the point where ``q``, ``k``, ``v`` are ready (after
q/k norms and RoPE, shape ``(B, S, H, D)``), then call :func:`reuse_attend` instead of
the attention kernel.  It asks the runtime what this layer does at this step:

* q.k^T and P.V both dense -> the stock kernel (``dense_fn``), recorded as dense;
* otherwise -> :func:`kaleido.reuse.reuse_attention` (its float path: one gather of
  the effective queries, then SDPA), recorded from the mode maps it returns.

The dense branch runs the same operations as the stock processor, so a dense step
or layer gives the stock processor's output bit for bit.
"""

from __future__ import annotations

from typing import Callable

import torch

from kaleido.reuse import ReuseConfig, reuse_attention

from .state import KaleidoRuntime


class KaleidoProcessorBase:
    """Holds the runtime, the site and the processor it replaced."""

    def __init__(self, runtime: KaleidoRuntime, name: str, layer: int, kind: str, original: object):
        self.runtime = runtime
        self.name = name
        self.layer = layer
        self.kind = kind  # "self" or "cross"
        self.original = original
        # stock processors' class attributes read by diffusers' dispatcher
        self._attention_backend = getattr(original, "_attention_backend", None)
        self._parallel_config = getattr(original, "_parallel_config", None)

    @property
    def qk_switch(self) -> str:
        return "self_qk" if self.kind == "self" else "cross_qk"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, layer={self.layer}, kind={self.kind!r})"


def reuse_attend(
    proc: KaleidoProcessorBase,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    dense_fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
    attn_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Attention of ``q`` ``(B, Sq, H, D)`` over ``k``, ``v`` ``(B, Sk, H, D)`` -> ``(B, Sq, H, D)``.

    ``dense_fn(q, k, v)`` is the stock kernel call (mask included).  Records
    ``<kind>_qk`` and ``<kind>_pv`` into the runtime's trace.
    """
    rt = proc.runtime
    B, Sq, H, D = q.shape
    Sk, Dv = k.shape[1], v.shape[-1]
    grid = rt.grid_for(Sq, f"attention {proc.name}")
    qk_op, pv_op = f"{proc.kind}_qk", f"{proc.kind}_pv"
    qk_cfg = rt.plan(proc.qk_switch, proc.layer)
    pv_cfg = rt.plan("pv", proc.layer)
    groups = rt.groups(proc.qk_switch, proc.layer, D)
    if rt.observers:
        rt.observe(layer=proc.layer, op=qk_op, role="q", module=proc.name, operand=q, grid=grid, groups=groups)
        if Sk == Sq:  # self-attention keys are grid tokens too (cross-attention keys are text)
            rt.observe(layer=proc.layer, op=qk_op, role="k", module=proc.name, operand=k, grid=grid, groups=groups)
    if qk_cfg is None and pv_cfg is None:
        out = dense_fn(q, k, v)
        lb = rt.low_bits(proc.qk_switch, proc.layer)
        rt.record_dense(layer=proc.layer, op=qk_op, module=proc.name, batch=B, heads=H, rows=Sq, dim=D,
                        n_cols=Sk, grid=grid, groups=groups, low_bits=lb)
        rt.record_dense(layer=proc.layer, op=pv_op, module=proc.name, batch=B, heads=H, rows=Sq, dim=Sk,
                        n_cols=Dv, grid=grid, groups=rt.pv_record_groups(proc.layer, Sk),
                        low_bits=rt.low_bits("pv", proc.layer))
        return out
    pv_groups = rt.groups("pv", proc.layer, Sk) if pv_cfg is not None else None
    cfg = qk_cfg if qk_cfg is not None else ReuseConfig.dense(low_bits=rt.low_bits(proc.qk_switch, proc.layer))
    out, st = reuse_attention(q, k, v, grid, groups, cfg, pv_config=pv_cfg, pv_groups=pv_groups, attn_mask=attn_mask)
    if qk_cfg is not None:
        rt.record_modes(layer=proc.layer, op=qk_op, module=proc.name, mode_map=st.qk_modes, n_cols=Sk, heads=H)
    else:
        rt.record_dense(layer=proc.layer, op=qk_op, module=proc.name, batch=B, heads=H, rows=Sq, dim=D,
                        n_cols=Sk, grid=grid, groups=groups, low_bits=cfg.low_bits)
    if st.pv_modes is not None:
        rt.record_modes(layer=proc.layer, op=pv_op, module=proc.name, mode_map=st.pv_modes, n_cols=Dv, heads=H)
    elif st.pv_skipped_rows is not None:  # the exact P.V row skip: skipped rows FULL, no P.V decision made
        rt.record_row_skip(layer=proc.layer, op=pv_op, module=proc.name, skipped=st.pv_skipped_rows, n_cols=Dv,
                           grid=grid, groups=rt.pv_record_groups(proc.layer, Sk),
                           low_bits=rt.low_bits("pv", proc.layer))
    else:
        rt.record_dense(layer=proc.layer, op=pv_op, module=proc.name, batch=B, heads=H, rows=Sq, dim=Sk,
                        n_cols=Dv, grid=grid, groups=rt.pv_record_groups(proc.layer, Sk),
                        low_bits=rt.low_bits("pv", proc.layer))
    return out.to(q.dtype)


def record_dense_attention(proc: KaleidoProcessorBase, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, tag: str) -> None:
    """Record an attention Kaleido never reuses (e.g. Wan I2V image-context attention) as dense MACs."""
    rt = proc.runtime
    B, Sq, H, D = q.shape
    Sk, Dv = k.shape[1], v.shape[-1]
    rt.record_other_dense(f"{proc.name}.{tag}_qk", proc.layer, B * H * Sq, D, Sk)
    rt.record_other_dense(f"{proc.name}.{tag}_pv", proc.layer, B * H * Sq, Sk, Dv)
