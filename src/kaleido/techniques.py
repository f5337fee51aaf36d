"""One front door for every technique: ``kaleido.apply(transformer, config, filter_fn=None)``.

In the shape of torchao's ``quantize_(model, config, filter_fn)``: the config's *type*
picks the handler, registered with :func:`register_technique`.  Configs:

* :class:`~kaleido.integrations.KaleidoConfig` - Kaleido itself (handler:
  :func:`kaleido.integrations.apply.apply`, returns its :class:`ApplyReport`);
* each baseline's settings dataclass (``kaleido.baselines.METHODS[name].Settings``: Sparse
  VideoGen, block top-k, ToMe, AdapTiV, EXION, Cambricon-D, PAB, FirstBlockCache,
  TaylorSeer, MagCache) - handler: the baseline's ``Method.apply``, returns its handle (``report()``);
* a list of configs - a stack, applied in order (e.g. TaylorSeer, then Kaleido), under the rules of
  :func:`kaleido.baselines.stack.check_composable` (one step cache, one technique per op kind); a list that
  fails part-way is undone back to what was applied before it.

Every config round-trips through a plain mapping (:func:`config_to_dict` /
:func:`config_from_dict`, JSON or YAML: ``{"technique": "tome", "ratio": 0.3}``; a
mapping without ``technique`` is a KaleidoConfig, as before).  :func:`remove` undoes
whatever :func:`apply` put on the transformer, last first, and returns Kaleido's trace
when Kaleido was among them (else the last technique's report).  What was applied lives
on the transformer (attribute ``_kaleido_techniques``), never in this module.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Callable, Mapping

import torch

_APPLIED_ATTR = "_kaleido_techniques"
#: config type -> handler(transformer, config, filter_fn) -> what apply returns
_HANDLERS: dict[type, Callable[..., Any]] = {}


def register_technique(config_cls: type) -> Callable:
    """Decorator: ``handler(transformer, config, filter_fn)`` applies configs of ``config_cls``."""

    def deco(fn: Callable) -> Callable:
        _HANDLERS[config_cls] = fn
        return fn

    return deco


def _methods() -> dict:
    from kaleido.baselines import METHODS

    return {n: m for n, m in METHODS.items() if n not in ("kaleido", "stack")}


def _name_of(config: Any) -> str:
    from kaleido.integrations.config import KaleidoConfig

    if isinstance(config, KaleidoConfig):
        return "kaleido"
    for name, m in _methods().items():
        if type(config) is m.Settings:
            return name
    raise ValueError(f"kaleido.apply: {type(config).__name__} is not a technique config; give a KaleidoConfig, a "
                     f"baseline's settings ({', '.join(sorted(_methods()))}), a mapping with 'technique', or a list")


def config_to_dict(config: Any) -> dict:
    """``{"technique": name, ...settings}`` (KaleidoConfig: its own dict plus ``technique``)."""
    name = _name_of(config)
    if name == "kaleido":
        return {"technique": "kaleido", **config.to_dict()}
    d = dataclasses.asdict(config)
    return {"technique": name, **{k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}}


def config_from_dict(d: Mapping[str, Any] | list) -> Any:
    """The config :func:`config_to_dict` wrote (a list: a list of configs, a stack)."""
    from kaleido.integrations.config import KaleidoConfig

    if isinstance(d, list):
        return [config_from_dict(x) for x in d]
    if not isinstance(d, Mapping):
        raise ValueError(f"a technique config is a mapping or a list of them, got {type(d).__name__}")
    name = d.get("technique", "kaleido")
    rest = {k: v for k, v in d.items() if k != "technique"}
    if name == "kaleido":
        return KaleidoConfig.from_dict(rest)
    m = _methods().get(name)
    if m is None:
        raise ValueError(f"unknown technique {name!r}; known: {['kaleido', *sorted(_methods())]}")
    fields = {f.name for f in dataclasses.fields(m.Settings)}
    bad = sorted(set(rest) - fields)
    if bad:
        raise ValueError(f"{name}: unknown setting(s) {bad}; allowed: {sorted(fields)}")
    return m.Settings(**rest)


def load_config(path: str | Path) -> Any:
    """A technique config (or a list: a stack) from a JSON or YAML file; a file without ``technique`` (or a
    packaged config's name) is read by :meth:`KaleidoConfig.load`, with its one-line errors."""
    import yaml

    from kaleido.integrations.config import KaleidoConfig

    p = Path(path)
    if not p.is_file():
        return KaleidoConfig.load(path)  # a packaged config by name, or the missing-file error
    text = p.read_text()
    try:
        d = json.loads(text) if p.suffix.lower() == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError):
        return KaleidoConfig.load(path)  # its one-line parse error
    if isinstance(d, Mapping) and "technique" not in d:
        return KaleidoConfig.load(path)
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
    from kaleido.integrations.config import KaleidoConfig

    if config is None:
        return KaleidoConfig()
    if isinstance(config, (str, Path)):
        return load_config(config)
    if isinstance(config, Mapping):
        return config_from_dict(config)
    if isinstance(config, (list, tuple)):
        return [_as_config(c) for c in config]
    return config


def apply(transformer: torch.nn.Module, config: Any = None, *,
          filter_fn: Callable[[str, torch.nn.Module], bool] | None = None) -> Any:
    """Apply ``config`` (see the module docstring) to ``transformer`` in place; returns what its handler
    returns (Kaleido: an ``ApplyReport``; a baseline: its handle; a list: a list of those)."""
    cfg = _as_config(config)
    if isinstance(cfg, list):
        if not cfg:
            raise ValueError("kaleido.apply: an empty list of techniques would patch nothing; give at least one")
        from kaleido.baselines import METHODS
        from kaleido.baselines.stack import check_composable

        names = [_name_of(c) for c in cfg]
        check_composable(names, {n: METHODS[n].claims for n in names})  # the stack's rules, before patching
        out = []
        try:
            for c in cfg:
                out.append(apply(transformer, c, filter_fn=filter_fn))
        except Exception:
            for _ in out:  # undo what this call applied, not what was there before it
                _remove_last(transformer)
            raise
        return out
    _forget_removed(transformer)
    handler = _HANDLERS.get(type(cfg))
    if handler is None:
        _name_of(cfg)  # raises the one-line error naming what a config may be
        handler = _method_handler
    result = handler(transformer, cfg, filter_fn)
    applied = getattr(transformer, _APPLIED_ATTR, None)
    if applied is None:
        applied = []
        setattr(transformer, _APPLIED_ATTR, applied)  # a plain list: stored in the module's __dict__
    applied.append((_name_of(cfg), result))
    return result


def _method_handler(transformer, config, filter_fn):
    if filter_fn is not None:
        raise ValueError(f"{_name_of(config)}: filter_fn is not supported by this baseline (it patches the "
                         "modules its settings name); pass filter_fn=None")
    m = _methods()[_name_of(config)]
    return m(**dataclasses.asdict(config)).apply(transformer)


def _kaleido_handler(transformer, config, filter_fn):
    from kaleido.integrations.apply import apply as apply_kaleido

    return apply_kaleido(transformer, config, filter_fn=filter_fn)


def _register_kaleido() -> None:
    from kaleido.integrations.config import KaleidoConfig

    register_technique(KaleidoConfig)(_kaleido_handler)


_register_kaleido()


def _forget_removed(transformer: torch.nn.Module) -> None:
    """Drop a Kaleido entry whose runtime was removed behind this module's back
    (``kaleido.integrations.remove`` called directly)."""
    from kaleido.integrations.apply import is_applied

    stack = getattr(transformer, _APPLIED_ATTR, None)
    if stack and not is_applied(transformer):
        stack[:] = [(n, h) for n, h in stack if n != "kaleido"]


def applied(transformer: torch.nn.Module) -> list[str]:
    """Names of the techniques :func:`apply` put on ``transformer``, in the order applied."""
    _forget_removed(transformer)
    return [n for n, _ in getattr(transformer, _APPLIED_ATTR, [])]


def remove(transformer: torch.nn.Module) -> Any:
    """Undo every technique :func:`apply` put on ``transformer`` (last first).

    Returns Kaleido's :class:`~kaleido.integrations.ReuseTrace` when Kaleido was applied
    (``None`` if nothing ran), else the last technique's report.  A transformer with
    Kaleido applied by :func:`kaleido.integrations.apply.apply` directly is undone too.
    """
    from kaleido.integrations.apply import is_applied
    from kaleido.integrations.apply import remove as remove_kaleido

    _forget_removed(transformer)
    stack = getattr(transformer, _APPLIED_ATTR, None)
    if not stack:
        if stack is not None:
            delattr(transformer, _APPLIED_ATTR)
        if is_applied(transformer):
            return remove_kaleido(transformer)
        raise ValueError(f"Kaleido is not applied to this {type(transformer).__name__}, nor any other technique; "
                         "call kaleido.apply first")
    result, trace, seen_kaleido = None, None, False
    while stack:
        name, out = _remove_last(transformer)
        if name == "kaleido":
            trace, seen_kaleido = out, True
        elif result is None:
            result = out
    delattr(transformer, _APPLIED_ATTR)
    return trace if seen_kaleido else result


def _remove_last(transformer: torch.nn.Module) -> tuple[str, Any]:
    """Undo the technique applied last: ``(name, Kaleido's trace or the baseline's report)``."""
    from kaleido.integrations.apply import remove as remove_kaleido

    name, handle = getattr(transformer, _APPLIED_ATTR).pop()
    if name == "kaleido":
        return name, remove_kaleido(transformer)
    report = handle.report()
    handle.remove()
    return name, report
