"""The transformer-level hook: token grid, step and cache context of every call.

:class:`GridCaptureHook` is a stateful diffusers ``ModelHook`` registered on the
transformer under :data:`GRID_HOOK`.  Before each forward it reads the latent's shape
and the model's patch sizes (the token grid), the timestep, and the cache context the
pipeline set with ``transformer.cache_context(name, ...)``; it hands them to the
runtime (:meth:`KaleidoRuntime.begin_call`).  ``reset_state`` - which diffusers calls
at the end of every pipeline run - closes the generation's trace.

The cache context reaches it as it reaches every handle's hook: it is a
:class:`~kaleido.techniques.call_context.ContextHook`.
"""

from __future__ import annotations

from typing import Any

import torch

from kaleido.techniques.call_context import ContextHook, as_float
from kaleido.techniques.kaleido_reuse.runtime import KaleidoRuntime

#: name of Kaleido's hook in the transformer's diffusers HookRegistry
GRID_HOOK = "kaleido_grid"


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
