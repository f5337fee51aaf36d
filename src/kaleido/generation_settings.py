"""``GenerationSettings``: the keyword arguments a video pipeline is called with, defined once.

Every generation Kaleido runs - ``kaleido generate`` / ``sweep`` / ``characterize`` / ``calibrate``
(:mod:`kaleido.integrations.evaluation`), the comparison of baselines (:mod:`kaleido.harness`,
whose sweep rows store them as ``call`` dicts) and the tiny pipeline's own call defaults
(:data:`kaleido.tiny.pipeline.TINY_DEMO`) - takes its size, length, steps and guidance from this
dataclass. The field names are diffusers' (``WanPipeline.__call__``), so
``pipe(prompt, **settings.call_kwargs())`` is the call; ``None`` leaves the pipeline's own default.

Prompts and seeds are not settings of a call but what a run iterates over; device and dtype belong
to the loaded pipeline (:func:`kaleido.tiny.pipeline.load_pipeline`); torch's thread count is the
process's (the command line sets it).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

_POSITIVE_INTS = ("height", "width", "num_frames", "num_inference_steps", "max_sequence_length")


@dataclass(frozen=True, kw_only=True)
class GenerationSettings:
    """Keyword arguments of a diffusers video pipeline's ``__call__``; ``None`` leaves the pipeline's default."""

    height: int | None = None
    width: int | None = None
    num_frames: int | None = None
    num_inference_steps: int | None = None
    guidance_scale: float | None = None
    negative_prompt: str | None = None
    #: text tokens the prompt is padded / truncated to (``WanPipeline``'s own default is 512)
    max_sequence_length: int | None = None

    def __post_init__(self) -> None:
        for name in _POSITIVE_INTS:
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ValueError(f"GenerationSettings.{name}={v!r}: give a whole number >= 1, or None for the "
                                 "pipeline's default")

    @classmethod
    def from_call(cls, call: Mapping[str, Any]) -> "GenerationSettings":
        """The settings of a ``call`` dict (what :meth:`call_kwargs` gives, e.g. a sweep row's ``call``)."""
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(call) - set(names))
        if unknown:
            raise ValueError(f"pipeline call keys {unknown} are not generation settings; allowed: {names}")
        return cls(**call)

    def overridden(self, **values: Any) -> "GenerationSettings":
        """These settings with every value of ``values`` that is not ``None`` in its place."""
        return dataclasses.replace(self, **{k: v for k, v in values.items() if v is not None})

    def call_kwargs(self) -> dict[str, Any]:
        """The keyword arguments to pass the pipeline: every field that is not ``None``."""
        return {k: v for k, v in self.to_dict().items() if v is not None}

    def to_dict(self) -> dict[str, Any]:
        """Every field, ``None`` included (as recorded in ``metrics.json`` and reports)."""
        return dataclasses.asdict(self)
