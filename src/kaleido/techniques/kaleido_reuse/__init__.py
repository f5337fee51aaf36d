"""Kaleido as a technique: ``apply`` / ``remove`` on diffusers vDiT transformers, its config and its runtime.

>>> handle = kaleido.apply(pipe.transformer, kaleido.KaleidoConfig())  # handle.summary(): what it patched
>>> video = pipe(prompt, num_inference_steps=30).frames[0]
>>> trace = kaleido.get_trace(pipe.transformer)   # the generation's ReuseTrace
>>> kaleido.remove(pipe.transformer)               # back to the stock model

The package, one concept a module: :mod:`~kaleido.techniques.kaleido_reuse.config` (``KaleidoConfig``, what is
reused where), :mod:`~kaleido.techniques.kaleido_reuse.runtime` (the per-generation state: plans, grids, the
trace being recorded), :mod:`~kaleido.techniques.kaleido_reuse.hooks` (the transformer-level hook: step, grid and
cache context), :mod:`~kaleido.techniques.kaleido_reuse.linear` (the linear hooks),
:mod:`~kaleido.techniques.kaleido_reuse.attention` (Kaleido's attention core),
:mod:`~kaleido.techniques.kaleido_reuse.apply` (install and remove) and
:mod:`~kaleido.techniques.kaleido_reuse.method` (Kaleido behind every technique's ``Method`` interface and its handle,
:class:`~kaleido.techniques.kaleido_reuse.method.KaleidoHandle`, what ``kaleido.apply`` returns).
The models it runs on are :mod:`kaleido.models`' adapters.
"""

from kaleido.techniques.kaleido_reuse.apply import (ApplyReport, apply, get_trace, is_applied, remove, reset,
                                                    set_num_steps)
from kaleido.techniques.kaleido_reuse.config import OP_SWITCHES, KaleidoConfig, OpConfig

__all__ = ["apply", "remove", "get_trace", "reset", "set_num_steps", "is_applied", "ApplyReport", "KaleidoConfig",
           "OpConfig", "OP_SWITCHES"]
