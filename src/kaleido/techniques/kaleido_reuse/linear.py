"""Activation reuse on linear layers (q/k/v/out projections, feed-forward), as diffusers hooks.

Each patched ``nn.Linear`` gets a :class:`LinearReuseHook` registered in its diffusers
``HookRegistry`` under :data:`LINEAR_HOOK`; its ``new_forward`` computes
``y = x W^T + b`` on the reuse core's float path - the steps of
:func:`kaleido.reuse.reuse_linear`: :func:`~kaleido.reuse.decide_effective` (quantise, decide
and gather the effective operand in one pass), then a dense GEMM on it (rows = the tokens of ``x`` ``(B, S, C_in)``,
chunk groups over ``C_in``) - or densely through the original forward when the op is
off at this layer and step.  A down projection (more input than output features: an
FFN's second linear, HunyuanVideo's single-stream ``proj_out``) with a large input runs tile
by tile (:func:`kaleido.reuse.linear.linear_in_tiles`, same decisions), so the effective copy
of the block's widest activation never exists whole.

Layers that read the same activation tensor (``to_q``, ``to_k``, ``to_v`` of one
attention; HunyuanVideo's single-stream ``proj_mlp`` too) share one decision: the
operand ``A`` is the same, so its mode map is too (on hardware, one A streamed against
the concatenated weights).  The runtime keeps the last decision, keyed by the tensor's
identity and version and by the groups and thresholds.  Every other linear/conv layer of the
transformer gets a plain forward hook that only counts its dense MACs
(:class:`DenseCounter`), so traces cover the whole transformer.

A ``FeedForward``'s hidden activation is the feed-forward's own temporary: an
:class:`ActivationOwner` hook on its activation module marks it, and the down projection
decides it in place instead of copying it.  Every other operand's effective copy goes into the
runtime's one reused buffer (:meth:`~kaleido.techniques.kaleido_reuse.runtime.KaleidoRuntime.effective_out`),
but a down projection's wide input that is not marked (HunyuanVideo's single-stream
``proj_out``) gets a fresh one, tiled when large.
"""

from __future__ import annotations

import math

import torch
from diffusers.hooks import ModelHook

import torch.nn.functional as F

from kaleido.reuse import decide_effective
from kaleido.reuse.linear import linear_in_tiles

from kaleido.techniques.call_context import sees_tensors
from kaleido.techniques.kaleido_reuse.config import OP_SWITCH_OF
from kaleido.techniques.kaleido_reuse.runtime import KaleidoRuntime

#: name of Kaleido's hook in each patched linear layer's diffusers HookRegistry
LINEAR_HOOK = "kaleido_linear_reuse"
#: a down projection whose input has more elements than this runs tile by tile
#: (:func:`kaleido.reuse.linear.linear_in_tiles`; 32 Mi elements = 128 MiB of float32 per tile, tiles
#: balanced).  Each tile is a GEMM that streams the whole weight again, so tiles are kept large: measured
#: on 2 CPU cores at Wan 14B's FFN (3120 x 13824 -> 5120), 3 tiles cost +11% on that GEMM, 11 tiles
#: (4 Mi elements) +46%; at 64 MiB tiles the four real-shape models ran 2-3 tiles per down projection
TILE_ELEMENTS = 1 << 25


class LinearReuseHook(ModelHook):
    """Replaces an ``nn.Linear``'s forward by reuse on its input activations."""

    _is_stateful = False

    def __init__(self, runtime: KaleidoRuntime, name: str, layer: int, op: str):
        super().__init__()
        self.runtime = runtime
        self.name = name
        self.layer = layer
        self.op = op
        self.switch = OP_SWITCH_OF[op]

    def new_forward(self, module: torch.nn.Linear, x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        rt = self.runtime
        if x.dim() < 3:
            raise ValueError(f"Kaleido: linear {self.name} expects (B, S, C_in) activations, got {tuple(x.shape)}")
        S, c_in = x.shape[-2], x.shape[-1]
        grid = rt.grid_for(S, f"linear {self.name}")
        groups = rt.groups(self.switch, self.layer, c_in)
        cfg = rt.plan(self.switch, self.layer)
        batch = math.prod(x.shape[:-2])
        if rt.observers:
            rt.observe(layer=self.layer, op=self.op, role="x", module=self.name, operand=x, grid=grid, groups=groups)
        if cfg is None:
            y = self.fn_ref.original_forward(x, *args, **kwargs)
            rt.record_dense(layer=self.layer, op=self.op, module=self.name, batch=batch, heads=1, rows=S,
                            dim=c_in, n_cols=module.out_features, grid=grid, groups=groups,
                            low_bits=rt.low_bits(self.switch, self.layer))
            return y
        y, mode_map = self._reuse(module, x, grid, groups, cfg)
        rt.record_modes(layer=self.layer, op=self.op, module=self.name, mode_map=mode_map,
                        n_cols=module.out_features, heads=1)
        return y.to(x.dtype)

    def _reuse(self, module: torch.nn.Linear, x: torch.Tensor, grid, groups, cfg):
        """``(y, mode_map)`` of the float path, with the effective operand wherever it costs least."""
        rt = self.runtime
        if rt.owns(x):  # a feed-forward's own activation: decided in place, no effective copy made or kept
            mode_map, x_eff = decide_effective(x, grid, groups, cfg, out=x)
            return F.linear(x_eff, module.weight, module.bias), mode_map
        down = module.in_features > module.out_features
        if down and x.numel() > TILE_ELEMENTS:
            # a down projection's input is the widest activation of its block: copying it whole as the
            # effective operand would raise the forward's peak memory by that much; go tile by tile
            tiled = linear_in_tiles(x, module.weight, module.bias, grid, groups, cfg, TILE_ELEMENTS)
            if tiled is not None:
                return tiled
        cached = rt.shared_decision(x, groups, cfg)
        if cached is None:
            # into the runtime's effective-operand buffer, but a down projection's wide input into a
            # fresh tensor: a buffer of that size held through the block would sit on top of the
            # dense forward's own peak (the FFN's hidden state, then its activation)
            out = None if down else rt.effective_out(x)
            mode_map, x_eff = decide_effective(x, grid, groups, cfg, out=out)
            rt.keep_decision(x, groups, cfg, mode_map, x_eff)
        else:
            mode_map, x_eff = cached
        return F.linear(x_eff, module.weight, module.bias), mode_map

    def __repr__(self) -> str:
        return f"LinearReuseHook({self.name!r}, layer={self.layer}, op={self.op!r})"


class ActivationOwner:
    """Forward hook on a diffusers ``FeedForward``'s activation module (``net.0``: GELU, GEGLU, ...).

    Its output is the feed-forward's hidden activation, the widest tensor of the block, which
    ``FeedForward.forward`` hands (through an inference-mode dropout) to the down projection
    ``net.2`` and to nothing else.  The hook marks it in the runtime
    (:meth:`~kaleido.techniques.kaleido_reuse.runtime.KaleidoRuntime.own_activation`), so the down projection's
    :class:`LinearReuseHook` decides it in place: no effective copy of that size is made (on the
    CPU its page faults were two thirds of that decision's time at Wan 1.3B's shapes), and no
    tiling is needed to bound the peak memory.  It marks nothing while another PyTorch hook could
    see the tensor afterwards (a forward hook on the activation, which could keep its output, or
    any hook on the down projection, which would see its input overwritten, unless it is marked
    as reading shapes only: :func:`~kaleido.techniques.call_context.reads_shapes_only`): then the
    down projection copies, as for any other operand.
    """

    def __init__(self, runtime: KaleidoRuntime, reader: torch.nn.Module):
        self.runtime = runtime
        self.reader = reader

    def __call__(self, module: torch.nn.Module, inputs: tuple, output: torch.Tensor) -> None:
        if self.runtime.call is None or not isinstance(output, torch.Tensor):
            return
        if len(module._forward_hooks) == 1 and not _torch_hooks(self.reader) and not _global_torch_hooks():
            self.runtime.own_activation(output)


def _torch_hooks(module: torch.nn.Module) -> bool:
    """Whether ``module`` has PyTorch forward or forward-pre hooks that may see its tensors (diffusers' registry
    hooks are not those, nor a hook marked as reading shapes only: a technique handle's)."""
    return any(sees_tensors(h) for h in (*module._forward_hooks.values(), *module._forward_pre_hooks.values()))


def _global_torch_hooks() -> bool:
    from torch.nn.modules import module as m

    return bool(m._global_forward_hooks or m._global_forward_pre_hooks)


class DenseCounter:
    """Forward hook counting the dense MACs of a linear or conv layer Kaleido leaves alone.

    Its records carry the op the adapter names the layer by (:meth:`ModelAdapter.dense_op
    <kaleido.models.adapter.ModelAdapter.dense_op>`: ``cross_proj_kv`` for Wan's text-side
    key/value projections, ``dense`` for every other layer).
    """

    def __init__(self, runtime: KaleidoRuntime, name: str, layer: int):
        self.runtime = runtime
        self.name = name
        self.layer = layer
        self.op = runtime.adapter.dense_op(name)

    def __call__(self, module: torch.nn.Module, inputs: tuple, output: torch.Tensor) -> None:
        if self.runtime.call is None or not isinstance(output, torch.Tensor):
            return
        if isinstance(module, torch.nn.Linear):
            k, n = module.in_features, module.out_features
        elif isinstance(module, torch.nn.modules.conv._ConvNd):
            k, n = module.in_channels // module.groups * math.prod(module.kernel_size), module.out_channels
        else:
            return
        rows = output.numel() // max(1, n)
        if rows > 0 and k > 0 and n > 0:
            self.runtime.record_dense(layer=self.layer, op=self.op, module=self.name, batch=1, heads=1, rows=rows,
                                      dim=k, n_cols=n)
