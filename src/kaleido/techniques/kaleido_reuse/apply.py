"""``kaleido.apply`` / ``kaleido.remove``: patch a diffusers vDiT transformer in place.

Shape of diffusers' own hooks (``apply_first_block_cache`` and friends): one verb, one
config, optional filter; everything is registered by name on the model (its diffusers
``HookRegistry``, its attention processors) so it can be removed and stacked; state
lives on the model, never in globals, and is reset at the end of each pipeline call.

Unlike hooks whose module patterns silently match nothing, :func:`apply` returns an
:class:`ApplyReport` of what it patched (also logged at INFO on ``kaleido``) and
raises ``ValueError`` when nothing would reuse anything.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import torch

from kaleido.techniques.kaleido_reuse.config import OP_SWITCH_OF, KaleidoConfig
from kaleido.techniques.call_context import remove_hook
from kaleido.techniques.kaleido_reuse.hooks import GRID_HOOK, GridCaptureHook
from kaleido.techniques.kaleido_reuse.linear import LINEAR_HOOK, ActivationOwner, DenseCounter, LinearReuseHook
from kaleido.techniques.kaleido_reuse.attention import ReuseCore
from kaleido.models.adapter import adapter_for, feed_forwards
from kaleido.techniques.kaleido_reuse.runtime import KaleidoRuntime
from kaleido.trace import ReuseTrace

logger = logging.getLogger("kaleido")
_RUNTIME_ATTR = "_kaleido_runtime"


@dataclass
class PatchedModule:
    name: str
    layer: int
    ops: tuple[str, ...]
    active_ops: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"name": self.name, "layer": self.layer, "ops": list(self.ops), "active_ops": list(self.active_ops)}


@dataclass
class ApplyReport:
    """What :func:`apply` patched.

    ``attention``: attention modules given a Kaleido processor; ``linears``: linear
    layers given activation reuse; ``dense_counted``: other linear/conv layers whose
    MACs are only counted.  ``active_ops`` lists the ops that reuse at some step.
    """

    model_class: str
    adapter: str
    rope_split: tuple[int, int, int] | None
    attention: list[PatchedModule] = field(default_factory=list)
    linears: list[PatchedModule] = field(default_factory=list)
    dense_counted: list[str] = field(default_factory=list)

    @property
    def n_active(self) -> int:
        return sum(1 for m in self.attention + self.linears if m.active_ops)

    def ops_by_kind(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for m in self.attention + self.linears:
            for op in m.active_ops:
                out[op] = out.get(op, 0) + 1
        return dict(sorted(out.items()))

    def summary(self) -> str:
        kinds = ", ".join(f"{op} x{n}" for op, n in self.ops_by_kind().items()) or "none"
        return (
            f"Kaleido patched {self.model_class}: {len(self.attention)} attention modules, "
            f"{len(self.linears)} linear layers ({self.n_active} reusing: {kinds}); "
            f"{len(self.dense_counted)} other layers counted as dense; RoPE split "
            f"{self.rope_split if self.rope_split else 'none (chunk groups)'}"
        )

    def to_dict(self) -> dict:
        return {
            "model_class": self.model_class,
            "adapter": self.adapter,
            "rope_split": None if self.rope_split is None else list(self.rope_split),
            "attention": [m.to_dict() for m in self.attention],
            "linears": [m.to_dict() for m in self.linears],
            "dense_counted": list(self.dense_counted),
            "active_ops": self.ops_by_kind(),
        }


@dataclass
class _Undo:
    processors: list[tuple[torch.nn.Module, Any]] = field(default_factory=list)
    hooked: list[torch.nn.Module] = field(default_factory=list)
    handles: list[Any] = field(default_factory=list)


def _active(config: KaleidoConfig, switch: str, layer: int) -> bool:
    return config.op_config(switch, layer).enabled


def apply(
    transformer: torch.nn.Module,
    config: KaleidoConfig | Mapping | str | Path | None = None,
    *,
    filter_fn: Callable[[str, torch.nn.Module], bool] | None = None,
    on_remove: Callable[[ReuseTrace | None], None] | None = None,
) -> ApplyReport:
    """Patch ``transformer`` (e.g. ``pipe.transformer``) in place with Kaleido reuse.

    ``config``: a :class:`KaleidoConfig`, its dict, or a JSON/YAML path (default:
    ``KaleidoConfig()``).  ``filter_fn(name, module)``: patch only the attention and
    linear modules it accepts (the others are counted as dense).  ``on_remove(trace)``: called by
    :func:`remove` once everything is undone, with the trace it returns (the handle of
    :class:`~kaleido.techniques.kaleido_reuse.method.KaleidoHandle` follows its runtime this way).
    Returns an :class:`ApplyReport`; raises ``ValueError`` for an unsupported model,
    a config that does not fit it, or when nothing would reuse anything.
    """
    if hasattr(transformer, _RUNTIME_ATTR):
        raise ValueError("Kaleido is already applied to this transformer; remove it first: kaleido.remove(transformer) "
                         "undoes what kaleido.apply put on it, kaleido.techniques.kaleido_reuse.remove(transformer) "
                         "what this module's apply installed")
    adapter = adapter_for(transformer)
    cfg = KaleidoConfig.coerce(config)
    adapter.check_model(transformer)
    n_layers = adapter.num_layers(transformer)
    if cfg.max_layer_index() >= n_layers:
        raise ValueError(
            f"KaleidoConfig layers override layer {cfg.max_layer_index()} but {type(transformer).__name__} has "
            f"{n_layers} layers (0..{n_layers - 1}); fix the layer keys"
        )
    meta = adapter.describe(transformer)
    runtime = KaleidoRuntime(transformer, adapter, cfg, meta)
    report = ApplyReport(type(transformer).__name__, type(adapter).__name__, runtime.rope_split)
    accept = filter_fn or (lambda name, module: True)

    # Validate groups now (chunk/axes counts against the real dims), not mid-generation.
    for layer in range(n_layers):
        runtime.make_groups("self_qk", layer, runtime.head_dim)
        runtime.make_groups("cross_qk", layer, runtime.head_dim)

    att_sites = [s for s in adapter.attention_sites(transformer) if accept(s.name, s.module)]
    lin_sites = [s for s in adapter.linear_sites(transformer) if accept(s.name, s.module)]
    for s in att_sites:
        adapter.require_stock_processor(s, "Kaleido", "Kaleido replaces the stock processor only (undo the other "
                                        "technique, e.g. fused projections or a custom processor, first)")
    for s in lin_sites:
        in_f = s.module.in_features
        runtime.make_groups(OP_SWITCH_OF[s.op], s.layer, in_f)

    qk_switch = {"self": "self_qk", "cross": "cross_qk"}
    for s in att_sites:
        ops = (f"{s.kind}_qk", f"{s.kind}_pv")
        active = tuple(op for op, sw in zip(ops, (qk_switch[s.kind], "pv")) if _active(cfg, sw, s.layer))
        report.attention.append(PatchedModule(s.name, s.layer, ops, active))
    for s in lin_sites:
        active = (s.op,) if _active(cfg, OP_SWITCH_OF[s.op], s.layer) else ()
        report.linears.append(PatchedModule(s.name, s.layer, (s.op,), active))
    if report.n_active == 0:
        why = "the filter accepted no module" if not (att_sites or lin_sites) else "the config enables no op on them"
        raise ValueError(
            f"kaleido.apply would patch nothing on {type(transformer).__name__}: {why}. "
            "Enable at least one of ops.self_qk / cross_qk / proj / ffn / pv, or widen filter_fn"
        )

    from diffusers.hooks import HookRegistry

    undo = _Undo()
    patched = set()
    try:
        registry = HookRegistry.check_if_exists_or_initialize(transformer)
        registry.register_hook(GridCaptureHook(runtime), GRID_HOOK)
        undo.hooked.append(transformer)
        core = ReuseCore(runtime)
        for s in att_sites:
            original = s.module.processor
            s.module.set_processor(s.make_processor(core, s, original))
            undo.processors.append((s.module, original))
        for s in lin_sites:
            reg = HookRegistry.check_if_exists_or_initialize(s.module)
            reg.register_hook(LinearReuseHook(runtime, s.name, s.layer, s.op), LINEAR_HOOK)
            undo.hooked.append(s.module)
            patched.add(id(s.module))
        for _, _, ff in feed_forwards(transformer, lin_sites):  # both linears patched: its activation is owned
            undo.handles.append(ff.net[0].register_forward_hook(ActivationOwner(runtime, ff.net[2])))
        for name, module in transformer.named_modules():
            if id(module) in patched:
                continue
            if isinstance(module, (torch.nn.Linear, torch.nn.modules.conv._ConvNd)):
                undo.handles.append(module.register_forward_hook(DenseCounter(runtime, name, adapter.layer_of(transformer, name))))
                report.dense_counted.append(name)
        if hasattr(registry, "invalidate_child_registries_cache"):
            registry.invalidate_child_registries_cache()
    except Exception:
        _undo(transformer, undo)
        raise
    runtime.undo = undo
    runtime.report = report
    runtime.on_remove = on_remove
    setattr(transformer, _RUNTIME_ATTR, runtime)
    logger.info(report.summary())
    return report


def _undo(transformer: torch.nn.Module, undo: _Undo) -> None:
    for module, original in reversed(undo.processors):
        module.set_processor(original)
    for h in undo.handles:
        h.remove()
    for module in reversed(undo.hooked):  # leave each module as it was: no registry, the class's own forward
        remove_hook(module, GRID_HOOK if module is transformer else LINEAR_HOOK)
    reg = getattr(transformer, "_diffusers_hook", None)
    if reg is not None and hasattr(reg, "invalidate_child_registries_cache"):
        reg.invalidate_child_registries_cache()


def _runtime(transformer: torch.nn.Module) -> KaleidoRuntime:
    rt = getattr(transformer, _RUNTIME_ATTR, None)
    if rt is None:
        raise ValueError(f"Kaleido is not applied to this {type(transformer).__name__}; call kaleido.apply first")
    return rt


def remove(transformer: torch.nn.Module) -> ReuseTrace | None:
    """Undo :func:`apply`: stock processors and forwards back, hooks gone.

    Returns the last generation's trace (``None`` if nothing ran).  Afterwards the
    transformer computes exactly what it computed before ``apply``.
    """
    rt = _runtime(transformer)
    trace = rt.finish_generation()
    _undo(transformer, rt.undo)
    delattr(transformer, _RUNTIME_ATTR)
    if rt.on_remove is not None:
        rt.on_remove(trace)
    return trace


def get_trace(transformer: torch.nn.Module) -> ReuseTrace | None:
    """The trace of the generation in progress, else of the last finished one."""
    return _runtime(transformer).current_trace()


def reset(transformer: torch.nn.Module) -> ReuseTrace | None:
    """Close the generation being recorded (pipelines do this themselves at the end of a call)."""
    return _runtime(transformer).finish_generation()


def set_num_steps(transformer: torch.nn.Module, num_steps: int | None) -> None:
    """Tell Kaleido the number of denoising steps when the pipeline does not pass it to ``cache_context``
    (needed only by configs with a step ``schedule``)."""
    if num_steps is not None and (isinstance(num_steps, bool) or not isinstance(num_steps, int) or num_steps < 1):
        raise ValueError(f"num_steps must be a positive int or None, got {num_steps!r}")
    _runtime(transformer).num_steps_override = num_steps


def add_observer(transformer: torch.nn.Module, observer: Callable[..., None]) -> None:
    """Hand every reused operand of the Kaleido-patched ``transformer`` to ``observer`` until :func:`remove`
    (called as :meth:`KaleidoRuntime.observe <kaleido.techniques.kaleido_reuse.runtime.KaleidoRuntime.observe>` calls its
    observers: the call in progress, then ``layer, op, role, module, operand, grid, groups``); the
    characterisation's operand capture attaches this way."""
    if not callable(observer):
        raise ValueError(f"add_observer needs a callable, got {type(observer).__name__}")
    _runtime(transformer).observers.append(observer)


def is_applied(transformer: torch.nn.Module) -> bool:
    return hasattr(transformer, _RUNTIME_ATTR)
