"""One front door for every technique: ``kaleido.apply(transformer, config, filter_fn=None)``.

In the shape of torchao's ``quantize_(model, config, filter_fn)``: the config's *type*
picks the handler.  Both come from the one technique registry
(:mod:`kaleido.techniques.registry`: each technique's ``config`` type and ``handler``), so a
technique registered there is a config here with nothing added.  Configs:

* :class:`~kaleido.techniques.kaleido_reuse.KaleidoConfig` - Kaleido itself (handler: its
  :class:`~kaleido.techniques.kaleido_reuse.method.KaleidoHandle`, which honours ``filter_fn``);
* each baseline's settings dataclass (``kaleido.techniques.catalog.METHODS[name].Settings``: Sparse
  VideoGen, block top-k, ToMe, AdapTiV, EXION, Cambricon-D, PAB, FirstBlockCache,
  TaylorSeer, MagCache, ...) - handler: the baseline's ``Method.apply``;
* a list of configs - a stack, applied in order (e.g. TaylorSeer, then Kaleido), under the rules of
  :func:`kaleido.techniques.stack.check_composable` (one step cache, one technique per op kind) and undone
  back to what was applied before it when it fails part-way (:func:`kaleido.techniques.stack.apply_in_order`,
  as ``make_method("stack", ...)`` applies its techniques).

Every config round-trips through a plain mapping (:func:`config_to_dict` /
:func:`config_from_dict`, JSON or YAML: ``{"technique": "tome", "ratio": 0.3}``; a
mapping without ``technique`` is a KaleidoConfig).  Every technique answers with the same kind
of handle (:class:`~kaleido.techniques.handle.TechniqueHandle`: ``report()``, ``summary()``,
``simulator_traces()``, ``recorded_trace()``, ``remove()``), and nothing here knows a technique by
name.  :func:`remove` undoes whatever :func:`apply` put on the transformer, last first, and
returns the trace the removed techniques recorded (that of the last one applied that records one:
Kaleido's :class:`~kaleido.trace.ReuseTrace`, an accelerator baseline's decisions), else the last
technique's report.  What was applied lives on the transformer (attribute
``_kaleido_techniques``), never in this module.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path
from typing import Any, Callable, Mapping

import torch

_APPLIED_ATTR = "_kaleido_techniques"


def _default():
    """The technique a config without ``technique`` names (and ``kaleido.apply(t)`` without a config applies):
    :data:`kaleido.techniques.registry.DEFAULT_TECHNIQUE`."""
    from kaleido.techniques.catalog import technique
    from kaleido.techniques.registry import DEFAULT_TECHNIQUE

    return technique(DEFAULT_TECHNIQUE)


def _configurable() -> dict:
    """name -> technique, for every technique ``kaleido.apply`` takes a config of (the registry's)."""
    from kaleido.techniques.catalog import TECHNIQUES

    return {n: t for n, t in TECHNIQUES.items() if t.config is not None}


def _technique_of(config: Any):
    from kaleido.techniques.registry import technique_of_config

    t = technique_of_config(config)
    if t is None:
        d = _default()
        raise ValueError(f"kaleido.apply: {type(config).__name__} is not a technique config; give a {d.config.__name__}, "
                         f"a baseline's settings ({', '.join(sorted(set(_configurable()) - {d.name}))}), a mapping "
                         "with 'technique', or a list")
    return t


def _name_of(config: Any) -> str:
    return _technique_of(config).name


def config_to_dict(config: Any) -> dict:
    """``{"technique": name, ...settings}`` (KaleidoConfig: its own dict plus ``technique``)."""
    t = _technique_of(config)
    return {"technique": t.name, **t.config_to_dict(config)}


def config_from_dict(d: Mapping[str, Any] | list) -> Any:
    """The config :func:`config_to_dict` wrote (a list: a list of configs, a stack; a mapping without
    ``technique``: a KaleidoConfig)."""
    if isinstance(d, list):
        return [config_from_dict(x) for x in d]
    if not isinstance(d, Mapping):
        raise ValueError(f"a technique config is a mapping or a list of them, got {type(d).__name__}")
    default = _default().name
    name = d.get("technique", default)
    known = _configurable()
    if name not in known:
        raise ValueError(f"unknown technique {name!r}; known: {[default, *sorted(set(known) - {default})]}")
    return known[name].config_from_dict({k: v for k, v in d.items() if k != "technique"})


def load_config(path: str | Path) -> Any:
    """A technique config (or a list: a stack) from a JSON or YAML file; a file without ``technique`` (or a
    packaged config's name) is read by :meth:`KaleidoConfig.load`, with its one-line errors."""
    import yaml

    load = _default().config.load  # the default technique's own loader (KaleidoConfig.load)
    p = Path(path)
    if not p.is_file():
        return load(path)  # a packaged config by name, or the missing-file error
    text = p.read_text()
    try:
        d = json.loads(text) if p.suffix.lower() == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError):
        return load(path)  # its one-line parse error
    if isinstance(d, Mapping) and "technique" not in d:
        return load(path)
    return config_from_dict(d)


def save_config(config: Any, path: str | Path) -> Path:
    """Write ``config`` (or a list of configs) as JSON (``.json``) or YAML, atomically."""
    from kaleido.atomic import write_atomic

    path = Path(path)
    d = [config_to_dict(c) for c in config] if isinstance(config, (list, tuple)) else config_to_dict(config)
    if path.suffix.lower() == ".json":
        text = json.dumps(d, indent=2)
    else:
        import yaml

        text = yaml.safe_dump(d, sort_keys=False)
    write_atomic(path, text)
    return path


def _as_config(config: Any) -> Any:
    if config is None:
        return _default().config()
    if isinstance(config, (str, Path)):
        return load_config(config)
    if isinstance(config, Mapping):
        return config_from_dict(config)
    if isinstance(config, (list, tuple)):
        return [_as_config(c) for c in config]
    return config


def apply(transformer: torch.nn.Module, config: Any = None, *,
          filter_fn: Callable[[str, torch.nn.Module], bool] | None = None) -> Any:
    """Apply ``config`` (see the module docstring) to ``transformer`` in place; returns its technique's handle
    (a list of configs: a list of handles, in order)."""
    cfg = _as_config(config)
    if isinstance(cfg, list):
        if not cfg:
            raise ValueError("kaleido.apply: an empty list of techniques would patch nothing; give at least one")
        from kaleido.techniques.stack import apply_in_order, check_composable

        check_composable([_name_of(c) for c in cfg])  # the stack's rules, before patching
        # undo what this call applied, not what was there before it
        return apply_in_order([functools.partial(apply, transformer, c, filter_fn=filter_fn) for c in cfg],
                              lambda _: _remove_last(transformer))
    _forget_removed(transformer)
    t = _technique_of(cfg)
    handle = (t.handler or _method_handler)(transformer, cfg, filter_fn)
    applied = getattr(transformer, _APPLIED_ATTR, None)
    if applied is None:
        applied = []
        setattr(transformer, _APPLIED_ATTR, applied)  # a plain list: stored in the module's __dict__
    applied.append((t.name, handle))
    return handle


def _method_handler(transformer, config, filter_fn):
    """``kaleido.apply``'s handler for a baseline's settings: its ``Method.apply`` (its handle)."""
    t = _technique_of(config)
    if filter_fn is not None:
        raise ValueError(f"{t.name}: filter_fn is not supported by this baseline (it patches the "
                         "modules its settings name); pass filter_fn=None")
    return t.method(**dataclasses.asdict(config)).apply(transformer)


def _forget_removed(transformer: torch.nn.Module) -> None:
    """Drop the entries whose handle was removed behind this module's back (e.g. Kaleido's runtime removed
    with ``kaleido.techniques.kaleido_reuse.remove``: its handle follows it)."""
    stack = getattr(transformer, _APPLIED_ATTR, None)
    if stack:
        stack[:] = [(n, h) for n, h in stack if not h.removed]


def applied(transformer: torch.nn.Module) -> list[str]:
    """Names of the techniques :func:`apply` put on ``transformer``, in the order applied."""
    _forget_removed(transformer)
    return [n for n, _ in getattr(transformer, _APPLIED_ATTR, [])]


def remove(transformer: torch.nn.Module) -> Any:
    """Undo every technique :func:`apply` put on ``transformer`` (last first).

    Returns the :class:`~kaleido.trace.ReuseTrace` recorded by the last technique applied that records one
    (Kaleido: the generation's trace, ``None`` if nothing ran), else the last technique's report.
    """
    _forget_removed(transformer)
    stack = getattr(transformer, _APPLIED_ATTR, None)
    if not stack:
        if stack is not None:
            delattr(transformer, _APPLIED_ATTR)
        raise ValueError(f"Kaleido is not applied to this {type(transformer).__name__}, nor any other technique; "
                         "call kaleido.apply first")
    removed = []  # (handle, report), last applied first
    while stack:
        removed.append(_remove_last(transformer, with_report=not removed))
    delattr(transformer, _APPLIED_ATTR)
    recorder = next((h for h, _ in removed if h.records_trace), None)
    return recorder.recorded_trace() if recorder is not None else removed[0][1]


def _remove_last(transformer: torch.nn.Module, with_report: bool = False) -> tuple[Any, Any]:
    """Undo the technique applied last: ``(its handle, its report)``; the report only ``with_report`` and when the
    technique records no trace (read before removal, while the handle still sees the transformer)."""
    _, handle = getattr(transformer, _APPLIED_ATTR).pop()
    report = handle.report() if with_report and not handle.records_trace else None
    handle.remove()
    return handle, report
