"""What every technique knows of the transformer call in progress, defined once below the handle.

* :class:`StepCounter` - the step of a call from its cache context: the context's ``step_index`` when the
  pipeline passes one (Wan's pipeline does: ``cache_context("cond", step_index=i, num_inference_steps=n)``),
  otherwise the number of earlier transformer calls in the same context (``"cond"``, ``"uncond"``,
  ``"cond_uncond"``, or ``"default"`` outside any context); a call whose step index, or without one its
  timestep, goes back up starts a new generation. Kaleido's runtime and every baseline's handle count with it.
* :class:`ContextHook` - a stateful diffusers hook whose :class:`ContextTracker` receives the cache context the
  pipeline sets around each call; Kaleido's grid hook is one, and so is the one every handle registers.
  :func:`remove_hook` takes a hook off a module again, and the registry with the last one.
* :class:`CallInfo` - the call in progress, as a handle or Kaleido's runtime hands it to what runs inside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from diffusers.hooks import ModelHook
from diffusers.hooks.hooks import StateManager

from kaleido.reuse.grid import TokenGrid

DEFAULT_CONTEXT = "default"


class StepCounter:
    """The step of a transformer call from its cache context (the rule of "Steps and generations" above).

    Per call: :meth:`restarts` (does it start a new generation?), :meth:`step` (its step index),
    then :meth:`record` once it is counted; :meth:`clear` forgets the generation.
    """

    def __init__(self) -> None:
        self._calls: dict[str, int] = {}
        self._last_step: dict[str, int] = {}
        self._last_t: dict[str, float] = {}

    def restarts(self, context: str, step_index: int | None, timestep: float | None) -> bool:
        """The call starts over: its context's step index, or without one its timestep, goes back up."""
        if step_index is not None:
            return step_index < self._last_step.get(context, -1)
        last_t = self._last_t.get(context)
        return timestep is not None and last_t is not None and timestep > last_t + 1e-6

    def step(self, context: str, step_index: int | None) -> int:
        """The context's ``step_index``, else the number of earlier calls in the same context."""
        return int(step_index) if step_index is not None else self._calls.get(context, 0)

    def record(self, context: str, step: int, timestep: float | None) -> None:
        self._calls[context] = step + 1
        self._last_step[context] = step
        if timestep is not None:
            self._last_t[context] = timestep

    def clear(self) -> None:
        self._calls.clear()
        self._last_step.clear()
        self._last_t.clear()


@dataclass
class CallInfo:
    """The transformer call in progress.

    ``step``: the denoising step within the current generation (0-based); ``timestep``: the call's
    (``None`` where it has none); ``context``: the pipeline's cache context name (``None``: a call outside
    any context); ``num_steps``: the number of steps when the pipeline passes it to the context; ``batch``,
    ``text_len``: the call's batch and text tokens; ``slot``: 0 for the first call of a step (cond), 1 for the
    second (uncond), ...; ``generation``: counts generations (a new one starts when the step or timestep goes
    back up). Kaleido's runtime fills the first five; a handle fills all.
    """

    grid: TokenGrid
    step: int
    timestep: float | None
    context: str | None = None
    num_steps: int | None = None
    batch: int = 0
    text_len: int = 0
    slot: int = 0
    generation: int = 0


def as_float(x: Any) -> float | None:
    """A scalar timestep from a tensor/number (first element), or ``None``."""
    if x is None:
        return None
    if isinstance(x, torch.Tensor):
        if x.numel() == 0:
            return None
        return float(x.reshape(-1)[0].item())
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


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


#: the attribute a PyTorch hook function carries when it reads only its tensors' shapes (a handle's "gemm ran"
#: hook): such a hook cannot see an operand decided in place, so Kaleido's in-place decisions stay on beside it
SHAPES_ONLY = "_kaleido_reads_shapes_only"


def reads_shapes_only(fn: Any) -> Any:
    """Mark the hook function ``fn`` as reading only the shapes of what it is handed (see :data:`SHAPES_ONLY`)."""
    setattr(fn, SHAPES_ONLY, True)
    return fn


def sees_tensors(hook: Any) -> bool:
    """Whether the PyTorch hook ``hook`` may read or keep the tensors it is handed (not marked shapes-only)."""
    return not getattr(hook, SHAPES_ONLY, False)
