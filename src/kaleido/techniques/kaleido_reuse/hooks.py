"""The transformer-level hook: token grid, step and cache context of every call.

:class:`GridCaptureHook` is a stateful diffusers ``ModelHook`` registered on the
transformer under :data:`GRID_HOOK`.  Before each forward it reads the latent's shape
and the model's patch sizes (the token grid), the timestep, and the cache context the
pipeline set with ``transformer.cache_context(name, ...)``; it hands them to the
runtime (:meth:`KaleidoRuntime.begin_call`).  ``reset_state`` - which diffusers calls
at the end of every pipeline run - closes the generation's trace.

diffusers delivers the cache context to every ``StateManager`` attribute of a
stateful hook; :class:`ContextTracker` is such an attribute that only remembers it, and
:class:`ContextHook` the stateful hook that holds one.  Kaleido's hook is a
:class:`ContextHook`; so is the one every baseline's handle registers
(:class:`kaleido.techniques.base.MethodHandle`), which takes each call's step and slot from it.
:func:`remove_hook` takes a hook off a module again, and the registry with the last one.
"""

from __future__ import annotations

from typing import Any

import torch
from diffusers.hooks import ModelHook
from diffusers.hooks.hooks import StateManager

from kaleido.techniques.kaleido_reuse.runtime import KaleidoRuntime, as_float

#: name of Kaleido's hook in the transformer's diffusers HookRegistry
GRID_HOOK = "kaleido_grid"
DEFAULT_CONTEXT = "default"


class _NoState:
    def reset(self, *args, **kwargs) -> None:
        pass


class ContextTracker(StateManager):
    """Receives the pipeline's cache context (a ``CacheContext`` or, in older diffusers, a name)."""

    def __init__(self) -> None:
        super().__init__(_NoState)
        self.current: Any = None

    def set_context(self, context: Any) -> None:  # called by diffusers' cache_context
        super().set_context(context)
        self.current = context

    def reset(self, *args, **kwargs) -> None:
        super().reset(*args, **kwargs)
        self.current = None

    def describe(self) -> tuple[str, int | None, int | None]:
        """``(name, step_index, num_inference_steps)`` of the current context."""
        c = self.current
        if c is None:
            return DEFAULT_CONTEXT, None, None
        if isinstance(c, str):
            return c, None, None
        step = getattr(c, "step_index", None)
        n = getattr(c, "num_inference_steps", None)
        return str(getattr(c, "name", DEFAULT_CONTEXT)), (None if step is None else int(step)), (None if n is None else int(n))


class ContextHook(ModelHook):
    """A stateful diffusers hook whose only state is a :class:`ContextTracker` (``contexts``): registered
    on a transformer, it knows the cache context the pipeline set for the call in progress."""

    _is_stateful = True

    def __init__(self) -> None:
        super().__init__()
        self.contexts = ContextTracker()

    def reset_state(self, module: torch.nn.Module) -> torch.nn.Module:
        return module  # the context is the pipeline's: its ``with transformer.cache_context(...)`` clears it

    def __repr__(self) -> str:
        return "ContextHook()"


def remove_hook(module: torch.nn.Module, name: str) -> None:
    """Remove the diffusers hook ``name`` from ``module``; the last hook out takes the registry with it, so
    the module runs its class's own forward again."""
    reg = getattr(module, "_diffusers_hook", None)
    if reg is None:
        return
    reg.remove_hook(name, recurse=False)
    if not reg.hooks:
        del module._diffusers_hook
        fwd = module.__dict__.get("forward")
        if fwd is not None and getattr(fwd, "__func__", None) is type(module).forward:
            del module.forward


class GridCaptureHook(ContextHook):
    """Captures grid, step and context before each transformer forward."""

    def __init__(self, runtime: KaleidoRuntime):
        super().__init__()
        self.runtime = runtime

    def pre_forward(self, module: torch.nn.Module, *args, **kwargs):
        rt = self.runtime
        inputs = rt.adapter.bound_inputs(module, args, kwargs)
        grid = rt.adapter.grid(module, inputs)
        name, step_index, num_steps = self.contexts.describe()
        rt.begin_call(grid, name, step_index, num_steps, as_float(rt.adapter.timestep(inputs)))
        return args, kwargs

    def post_forward(self, module: torch.nn.Module, output: Any) -> Any:
        self.runtime.end_call()
        return output

    def reset_state(self, module: torch.nn.Module) -> torch.nn.Module:
        self.runtime.finish_generation()
        return module

    def __repr__(self) -> str:
        return "GridCaptureHook()"
