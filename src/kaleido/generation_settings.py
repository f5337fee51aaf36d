"""``GenerationSettings``: the keyword arguments a video pipeline is called with, defined once.

Every generation Kaleido runs - ``kaleido generate`` / ``sweep`` / ``characterize`` / ``calibrate``
(:mod:`kaleido.evaluation.generate`), the comparison of baselines (:mod:`kaleido.evaluation.harness`,
whose sweep rows store them as ``call`` dicts) and the tiny pipeline's own call defaults
(:data:`kaleido.tiny.pipeline.TINY_DEMO`) - takes its size, length, steps and guidance from this
dataclass. The field names are diffusers' (``WanPipeline.__call__``), so
``pipe(prompt, **settings.pipeline_kwargs())`` is the call; ``None`` leaves the pipeline's own default. One
field is not a call keyword: ``sampler`` (:mod:`kaleido.sampling`), which the generation puts on the pipeline's
scheduler for the call (``None``: the pipeline's own); :meth:`GenerationSettings.call_kwargs` keeps it (a sweep
row's ``call`` records and is keyed by it), :meth:`GenerationSettings.pipeline_kwargs` leaves it out.

Prompts and seeds are not settings of a call but what a run iterates over; device and dtype belong
to the loaded pipeline (:func:`kaleido.tiny.pipeline.load_pipeline`); torch's thread count is the
process's (the command line sets it).

Whether a size suits a pipeline depends on the loaded pipeline (:func:`size_rule`); :meth:`GenerationSettings.check_for`
refuses one that does not in one line, before anything is generated.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Mapping

_POSITIVE_INTS = ("height", "width", "num_frames", "num_inference_steps", "max_sequence_length")

#: pipeline classes whose ``check_inputs`` refuses a height or width that is not a multiple of this (diffusers
#: 0.42: "`height` and `width` have to be divisible by 16"); a subclass inherits its base's rule
CHECK_INPUTS_MULTIPLE = {"WanPipeline": 16, "HunyuanVideoPipeline": 16, "CogVideoXPipeline": 8}


def size_rule(pipe) -> tuple[int, str] | None:
    """``(multiple, why)``: the number ``pipe``'s height and width must be multiples of, and why in words - the
    least common multiple of what its ``check_inputs`` asks (:data:`CHECK_INPUTS_MULTIPLE`) and of its VAE's
    spatial factor x its transformer's patch size (the latent must split into whole patches). For Wan 2.1 both
    are 16 (8 x 2); for the tiny Wan, 16 and 4 x 1. ``None`` when neither is known for this pipeline."""
    parts: list[tuple[int, str]] = []
    for cls in type(pipe).__mro__:
        if cls.__name__ in CHECK_INPUTS_MULTIPLE:
            parts.append((CHECK_INPUTS_MULTIPLE[cls.__name__],
                          f"{cls.__name__}.check_inputs asks {CHECK_INPUTS_MULTIPLE[cls.__name__]}"))
            break
    factor = getattr(pipe, "vae_scale_factor_spatial", None)
    transformer = getattr(pipe, "transformer", None)
    patch = getattr(getattr(transformer, "config", None), "patch_size", None)
    if isinstance(patch, (tuple, list)):
        patch = patch[-1]  # Wan's (t, h, w): square spatial patches
    if isinstance(factor, int) and isinstance(patch, int) and factor > 0 and patch > 0:
        parts.append((factor * patch, f"VAE factor {factor} x patch {patch} = {factor * patch}"))
    if not parts:
        return None
    return math.lcm(*(m for m, _ in parts)), "; ".join(why for _, why in parts)


#: the samplers of a flow-matching pipeline (``--sampler``; :mod:`kaleido.sampling` runs them); ``euler`` is every
#: flow-matching pipeline's own
SAMPLERS = ("euler", "consistency")
DEFAULT_SAMPLER = "euler"


def check_sampler(name: str | None) -> str | None:
    """``name`` itself, or a one-line ``ValueError`` when it is not a sampler (``None``: the pipeline's own)."""
    if name is not None and name not in SAMPLERS:
        raise ValueError(f"sampler {name!r} is not one of {list(SAMPLERS)}; pass --sampler euler or "
                         "--sampler consistency")
    return name


def _nearest(value: int, multiple: int) -> str:
    below = value // multiple * multiple
    return f"{below} or {below + multiple}" if below else str(multiple)


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
    #: the sampler (``"euler"`` / ``"consistency"``, :data:`kaleido.sampling.SAMPLERS`); ``None``: the pipeline's own
    sampler: str | None = None

    def __post_init__(self) -> None:
        check_sampler(self.sampler)
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

    def check_for(self, pipe) -> "GenerationSettings":
        """These settings, or a one-line ``ValueError`` naming a height / width ``pipe`` cannot generate
        (:func:`size_rule`), with the multiples nearest to it - instead of diffusers' traceback mid-run."""
        rule = size_rule(pipe)
        if rule is None:
            return self
        multiple, why = rule
        bad = [(n, v) for n, v in (("height", self.height), ("width", self.width)) if v is not None and v % multiple]
        if not bad:
            return self
        what = " and ".join(f"{n} {v}" for n, v in bad)
        fix = " and ".join(f"{n} {_nearest(v, multiple)}" for n, v in bad)
        verb = "is not a multiple" if len(bad) == 1 else "are not multiples"
        raise ValueError(f"{what} {verb} of {multiple}, which {type(pipe).__name__} needs for height and width "
                         f"({why}); use {fix}")

    def overridden(self, **values: Any) -> "GenerationSettings":
        """These settings with every value of ``values`` that is not ``None`` in its place."""
        return dataclasses.replace(self, **{k: v for k, v in values.items() if v is not None})

    def call_kwargs(self) -> dict[str, Any]:
        """Every field that is not ``None``: the call as a sweep row records it (the sampler included)."""
        return {k: v for k, v in self.to_dict().items() if v is not None}

    def pipeline_kwargs(self) -> dict[str, Any]:
        """The keyword arguments to pass the pipeline's ``__call__``: :meth:`call_kwargs` without the sampler (which
        :func:`kaleido.sampling.using` puts on the pipeline's scheduler)."""
        return {k: v for k, v in self.call_kwargs().items() if k != "sampler"}

    def to_dict(self) -> dict[str, Any]:
        """Every field, ``None`` included (as recorded in ``metrics.json`` and reports)."""
        return dataclasses.asdict(self)
