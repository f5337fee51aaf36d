"""Replacing one module's forward through diffusers' hook registry (removable, stackable)."""

from __future__ import annotations

from typing import Callable

import torch

from kaleido.techniques.handle import MethodHandle


def replace_forward(handle: MethodHandle, module: torch.nn.Module, name: str,
                    fn: Callable[..., torch.Tensor]) -> None:
    """Route ``module``'s forward through ``fn(original_forward, *args, **kwargs)``; undone by ``handle.remove()``."""
    from diffusers.hooks import HookRegistry, ModelHook

    class _Hook(ModelHook):
        def new_forward(self, mod, *args, **kwargs):
            return fn(self.fn_ref.original_forward, *args, **kwargs)

    registry = HookRegistry.check_if_exists_or_initialize(module)
    registry.register_hook(_Hook(), name)
    handle.add_undo(lambda: registry.remove_hook(name, recurse=False))
