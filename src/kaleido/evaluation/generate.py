"""The one generation every run makes (:func:`generate`), its call settings and prompts, and the dense references.

A generation is one pipeline call with a seeded generator and a
:class:`~kaleido.generation_settings.GenerationSettings` (:func:`settings_for`: the tiny model's demo
settings or the pipeline's own defaults); its wall time is measured for the whole pipeline call and for
the transformer alone (forward hooks around ``pipe.transformer``). Every comparison
(:mod:`kaleido.evaluation.harness`), ``kaleido generate`` / ``sweep`` / ``characterize`` / ``calibrate``
(:mod:`kaleido.evaluation.runs`) and ``benchmarks/bench_generate.py`` generate through it;
:func:`dense_runs` makes the dense references they compare against.
"""

from __future__ import annotations

import dataclasses
import sys
import time
import warnings
from typing import Any, Sequence

import numpy as np
import torch

from kaleido.generation_settings import GenerationSettings
from kaleido.sampling import using
from kaleido.heap import return_free_heap
from kaleido.tiny.pipeline import PromptWarning, TinyWanPipeline, demo_settings, native_sampler, unknown_words_message
from kaleido.tiny.pipeline import truncation_message as _tokens_message

#: 8 prompts of the miniature pipeline's world (6 procedural scenes, 2 real clips)
EVAL_PROMPTS: tuple[str, ...] = (
    "a red circle moving right on a striped background",
    "a blue square moving up on a plain background",
    "a green triangle moving left on a checkered background",
    "a yellow circle rotating on a gradient background",
    "a purple square growing on a cloudy background",
    "a cyan triangle moving down on a striped background",
    "a real video of a cartoon forest",
    "a real video of people riding bikes on a street",
)
#: prompts for calibration (none of them is an evaluation prompt)
CALIBRATION_PROMPTS: tuple[str, ...] = (
    "a green circle moving down on a plain background",
    "a red triangle rotating on a checkered background",
    "a blue circle moving left on a cloudy background",
)


def settings_for(model: str, **overrides: Any) -> GenerationSettings:
    """Call settings for ``model``: a miniature variant's demo (:func:`~kaleido.tiny.pipeline.demo_settings`:
    ``"tiny"``, ``"tiny-96"``), else the pipeline's own defaults; every override (a :class:`GenerationSettings`
    field) that is not ``None`` replaces its field. A ``sampler`` that is the model's own is dropped (the call
    then records no sampler, as every call before samplers were a setting)."""
    if overrides.get("sampler") is not None and overrides["sampler"] == native_sampler(model):
        overrides = dict(overrides, sampler=None)
    return demo_settings(model).overridden(**overrides)


class TransformerTimer:
    """Accumulates the wall time of ``module``'s forward calls."""

    def __init__(self, module: torch.nn.Module):
        self.seconds = 0.0
        self.calls = 0
        self._t0 = 0.0
        self._handles = [
            module.register_forward_pre_hook(self._pre),
            module.register_forward_hook(self._post),
        ]

    def _pre(self, *args) -> None:
        self._t0 = time.perf_counter()

    def _post(self, *args) -> None:
        self.seconds += time.perf_counter() - self._t0
        self.calls += 1

    def close(self) -> None:
        for h in self._handles:
            h.remove()


def truncation_message(pipe, prompt: str, max_sequence_length: int | None) -> str | None:
    """One line when ``prompt`` has more tokens than the pipeline will keep (Wan truncates silently), else ``None``."""
    return _tokens_message(getattr(pipe, "tokenizer", None), prompt, max_sequence_length)


def prompt_problems(pipe, prompt: str, max_sequence_length: int | None) -> list[str]:
    """Each way the pipeline will not read ``prompt`` as written, one line each: words outside its
    tokenizer's vocabulary (read as ``<unk>``), more tokens than ``max_sequence_length``."""
    tokenizer = getattr(pipe, "tokenizer", None)
    msgs = [unknown_words_message(tokenizer, prompt) if tokenizer is not None else None,
            truncation_message(pipe, prompt, max_sequence_length)]
    return [m for m in msgs if m]


def warn_if_truncated(pipe, prompt: str, max_sequence_length: int | None) -> None:
    """Warn (:class:`kaleido.tiny.pipeline.PromptWarning`) when ``prompt`` has more tokens than the pipeline
    will keep. (A ``TinyWanPipeline`` warns about this, and about words outside its vocabulary, itself.)"""
    msg = truncation_message(pipe, prompt, max_sequence_length)
    if msg:
        warnings.warn(msg, PromptWarning, stacklevel=3)


def show_progress(progress: bool | None) -> bool:
    """``progress``, or for ``None`` whether stderr is a terminal (a log file gets no progress bars)."""
    return sys.stderr.isatty() if progress is None else bool(progress)


def label_progress(pipe, desc: str, progress: bool | None) -> None:
    """One progress bar per pipeline call, labelled ``desc`` and kept when done, or none (``progress`` False,
    or ``None`` with stderr not a terminal): sets the pipeline's own bar (``pipe.set_progress_bar_config``)."""
    if hasattr(pipe, "set_progress_bar_config"):
        pipe.set_progress_bar_config(desc=desc, disable=not show_progress(progress), leave=True)


def generate(pipe, prompt: str, seed: int, settings: GenerationSettings) -> tuple[np.ndarray, float, float]:
    """``(frames (F, H, W, 3) in [0, 1], pipeline seconds, transformer seconds)`` of one pipeline call with
    ``settings`` and a generator seeded with ``seed`` on the pipeline's device."""
    if not isinstance(pipe, TinyWanPipeline):  # that pipeline's own call warns, at its caller's line
        warn_if_truncated(pipe, prompt, settings.max_sequence_length)
    device = getattr(pipe, "_execution_device", None) or pipe.device
    gen = torch.Generator(device=device).manual_seed(int(seed))
    timer = TransformerTimer(pipe.transformer)
    try:
        t0 = time.perf_counter()
        with torch.no_grad(), using(pipe, settings.sampler, int(seed)):
            out = pipe(prompt=prompt, generator=gen, output_type="np", **settings.pipeline_kwargs())
        wall = time.perf_counter() - t0
    finally:
        timer.close()
    frames = out.frames[0] if hasattr(out, "frames") else out[0][0]
    frames = np.clip(np.asarray(frames, dtype=np.float32), 0.0, 1.0)
    del out
    return_free_heap()  # the generation's freed tensors back to the OS, outside the timed call (kaleido.heap)
    return frames, wall, timer.seconds


def warm_up(pipe, prompt: str, settings: GenerationSettings, steps: int, progress: bool | None = None) -> None:
    """One untimed ``steps``-step generation, so that one-time costs (allocator growth, lazy
    initialisation, Kaleido's first-call setup) do not land in the first timed run."""
    if steps > 0:
        label_progress(pipe, "warm-up", progress)
        generate(pipe, prompt, 0, dataclasses.replace(settings, num_inference_steps=steps))


def dense_runs(pipe, prompts: Sequence[str], seeds: Sequence[int], settings: GenerationSettings,
               progress: bool | None = None, warmup_steps: int = 0) -> dict[tuple[str, int], tuple[np.ndarray, float, float]]:
    """Dense generations keyed by (prompt, seed); ``warmup_steps`` > 0: an untimed warm-up first.

    ``progress``: one progress bar per generation ("dense i/n"), none with ``False``; ``None``: only when
    stderr is a terminal (:func:`label_progress`)."""
    out = {}
    pairs = [(p, s) for p in prompts for s in seeds]
    if pairs:
        warm_up(pipe, pairs[0][0], settings, warmup_steps, progress)
    for i, (p, s) in enumerate(pairs):
        label_progress(pipe, f"dense {i + 1}/{len(pairs)}", progress)
        out[(p, s)] = generate(pipe, p, s, settings)
    return out
