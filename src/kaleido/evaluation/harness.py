"""Run one method against the dense model on the same pipeline, prompt and seed.

The comparison is fair: every method (Kaleido or a baseline) is applied to the same
transformer object, the pipeline is called with the same arguments and the same seeded
generator (the one generation harness, :func:`kaleido.evaluation.generate.generate`),
the decoded videos are compared frame by frame against the dense run (PSNR with peak 1.0
and SSIM on RGB in [0, 1], the evaluation protocol of Sparse VideoGen and the Kaleido
paper), and the compute is read from the method's own per-op-kind counts (8-bit-equivalent
MACs).

A method is anything with ``.name``, ``.settings_dict()`` and ``.apply(transformer)`` returning a
:class:`~kaleido.techniques.handle.TechniqueHandle` (``.report()``, ``.simulator_traces()``, ``.remove()``):
every baseline, a stack, and Kaleido through :class:`kaleido.techniques.kaleido_reuse.method.KaleidoMethod`.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kaleido.evaluation.simulator_profiles import simulator_profile_extras
from kaleido.metrics import json_float
from kaleido.generation_settings import GenerationSettings


def video_quality(video: np.ndarray, reference: np.ndarray) -> dict:
    """PSNR (peak 1.0) and SSIM of ``video`` against ``reference`` via :func:`kaleido.metrics.compare_videos`.

    ``psnr`` is the mean over frames that differ (``inf`` when all are identical);
    LPIPS is recorded with its status (skipped offline when its weights are missing).
    """
    from kaleido.metrics import compare_videos

    return quality_of(compare_videos(reference, video, lpips=True))


def quality_of(cmp) -> dict:
    """A :class:`~kaleido.metrics.VideoComparison` as a row's ``quality`` (see :func:`video_quality`)."""
    d = cmp.to_dict()
    return {"psnr": cmp.psnr_mean_db, "ssim": cmp.ssim_mean, "psnr_per_frame": [float(x) for x in cmp.psnr_db],
            "ssim_per_frame": d["ssim"], "identical_frames": cmp.identical_frames, "max_abs_diff": cmp.max_abs_diff,
            "lpips": d["lpips"]}


def thumbnail_strip(video: np.ndarray, n: int = 3) -> str:
    """Base64 PNG of ``n`` evenly spaced frames side by side (for reports)."""
    from PIL import Image

    idx = np.linspace(0, len(video) - 1, n).round().astype(int)
    strip = np.concatenate([video[i] for i in idx], axis=1)
    img = Image.fromarray((np.clip(strip, 0, 1) * 255).round().astype(np.uint8))
    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=True)
    return base64.b64encode(buf.getvalue()).decode("ascii")


@dataclass
class RunResult:
    """One method on one prompt and seed, against dense: the one result of a run, whoever runs it.

    A comparison row keeps :meth:`to_dict`; the rest is held in memory for what writes videos and traces
    (``kaleido generate``, :mod:`kaleido.evaluation.generate`): both videos, the
    :class:`~kaleido.metrics.VideoComparison` the quality came from, the trace the technique recorded
    (``handle.recorded_trace()``, when :func:`run_against_dense` was asked to keep it) and the transformer's own
    seconds (dense: when the caller timed it).
    """

    method: str
    settings: dict
    prompt: str
    seed: int
    quality: dict
    report: dict  # MethodReport.to_dict()
    wall_s: float
    dense_wall_s: float | None = None
    extra: dict = field(default_factory=dict)
    video: np.ndarray | None = field(default=None, repr=False, compare=False)
    dense_video: np.ndarray | None = field(default=None, repr=False, compare=False)
    comparison: Any = field(default=None, repr=False, compare=False)
    trace: Any = field(default=None, repr=False, compare=False)
    transformer_s: float | None = None
    dense_transformer_s: float | None = None

    def to_dict(self) -> dict:
        q = {k: (json_float(v) if not isinstance(v, list) else [json_float(x) for x in v]) for k, v in self.quality.items()}
        return {"method": self.method, "settings": dict(self.settings), "prompt": self.prompt, "seed": self.seed,
                "quality": q, "report": self.report, "wall_s": self.wall_s, "dense_wall_s": self.dense_wall_s,
                "extra": dict(self.extra)}


def run_against_dense(pipe, call: dict, method, prompt: str, seed: int, dense_video: np.ndarray | None = None, *,
                      lpips: bool = True, simulator_inputs: bool = True,
                      keep_trace: bool = False) -> tuple[RunResult, np.ndarray, np.ndarray]:
    """Apply ``method``, generate, remove it, and compare with the dense video (generated unless given).

    ``call``: the pipeline call's keyword arguments (a sweep row's ``call``,
    :meth:`GenerationSettings.call_kwargs`); every generation is
    :func:`kaleido.evaluation.generate.generate`. ``lpips``: also score LPIPS (when its weights are there);
    ``simulator_inputs``: keep the simulator's inputs of the method's traces in the report (a comparison row
    does); ``keep_trace``: keep the trace the method recorded on the result (``handle.recorded_trace()``, for a
    run that writes the trace itself; built only when asked, as an accelerator baseline's is built on demand).
    Returns ``(result, video, dense_video)``.
    """
    from kaleido.evaluation.generate import generate
    from kaleido.metrics import compare_videos

    settings = GenerationSettings.from_call(call).check_for(pipe)  # a size the pipeline refuses: one line, now
    dense_wall = dense_tr = None
    if dense_video is None:
        dense_video, dense_wall, dense_tr = generate(pipe, prompt, seed, settings)
    handle = method.apply(pipe.transformer)
    try:
        video, wall, tr = generate(pipe, prompt, seed, settings)
        report = handle.report()
        if simulator_inputs:
            report.extra.update(simulator_profile_extras(handle.simulator_traces()))
        trace = handle.recorded_trace() if keep_trace else None
    finally:
        handle.remove()
    cmp = compare_videos(dense_video, video, lpips=lpips)
    res = RunResult(method.name, method.settings_dict(), prompt, int(seed), quality_of(cmp), report.to_dict(), wall,
                    dense_wall, video=video, dense_video=dense_video, comparison=cmp, trace=trace,
                    transformer_s=tr, dense_transformer_s=dense_tr)
    return res, video, dense_video
