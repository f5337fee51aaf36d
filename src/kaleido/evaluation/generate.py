"""The generation harness: dense-versus-Kaleido generation on a diffusers pipeline, what ``kaleido generate``,
``kaleido sweep``, ``characterize``, ``calibrate`` and ``benchmarks/bench_generate.py`` run, and the one
:func:`generate` every comparison (:mod:`kaleido.evaluation.harness` for the baselines too) calls.

A generation is one pipeline call with a seeded generator and a
:class:`~kaleido.generation_settings.GenerationSettings` (:func:`settings_for`: the tiny model's demo
settings or the pipeline's own defaults).

Each (prompt, seed) is generated twice with the same seed - stock transformer, then
with Kaleido applied - and compared on the decoded RGB frames
(:func:`kaleido.metrics.compare_videos`); the Kaleido run's :class:`ReuseTrace`
gives the reuse statistics.  Wall times are measured for the whole pipeline call and
for the transformer alone (forward hooks around ``pipe.transformer``).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import torch

from kaleido.generation_settings import GenerationSettings
from kaleido.metrics import VideoComparison, compare_videos
from kaleido.sampling import using
from kaleido.heap import return_free_heap
from kaleido.tiny.pipeline import PromptWarning, TinyWanPipeline, demo_settings, native_sampler, unknown_words_message
from kaleido.tiny.pipeline import truncation_message as _tokens_message

from kaleido.techniques.front_door import apply
from kaleido.techniques.kaleido_reuse.config import KaleidoConfig
from kaleido.trace import ReuseTrace, merge_summaries

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


@dataclass
class RunResult:
    """One (prompt, seed) generated dense and with Kaleido."""

    prompt: str
    seed: int
    dense: np.ndarray
    kaleido: np.ndarray
    comparison: VideoComparison
    trace: ReuseTrace
    wall_s: dict[str, float] = field(default_factory=dict)
    report: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "prompt": self.prompt,
            "seed": self.seed,
            **self.comparison.to_dict(),
            "wall_s": dict(self.wall_s),
            "reuse": self.trace.summary(),
        }


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


def kaleido_runs(pipe, config: KaleidoConfig, dense: dict, settings: GenerationSettings, progress: bool | None = None,
                 desc: str = "kaleido", lpips: bool = True, warmup_steps: int = 0) -> list[RunResult]:
    """Kaleido generations of every key of ``dense``, compared with them; ``warmup_steps`` > 0:
    an untimed Kaleido warm-up first (its trace is discarded: each pipeline call starts a new one).
    ``progress``: as :func:`dense_runs` (bars labelled "``desc`` i/n")."""
    results = []
    handle = apply(pipe.transformer, config)  # Kaleido's handle, as for every technique
    report = handle.patched
    patched = {"summary": handle.summary(), "active_ops": report.ops_by_kind(),
               "attention": len(report.attention), "linears": len(report.linears),
               "dense_counted": len(report.dense_counted)}
    try:
        if dense:
            warm_up(pipe, next(iter(dense))[0], settings, warmup_steps, progress)
        items = list(dense.items())
        for i, ((p, s), (ref, wall_d, tr_d)) in enumerate(items):
            label_progress(pipe, f"{desc} {i + 1}/{len(items)}", progress)
            frames, wall_k, tr_k = generate(pipe, p, s, settings)
            trace = handle.recorded_trace()
            if trace is None:
                raise RuntimeError("Kaleido recorded no trace: the pipeline never called the patched transformer")
            cmp = compare_videos(ref, frames, lpips=lpips)
            results.append(RunResult(p, s, ref, frames, cmp, trace, {
                "dense_pipeline": wall_d, "kaleido_pipeline": wall_k,
                "dense_transformer": tr_d, "kaleido_transformer": tr_k,
            }, patched))
    finally:
        handle.remove()
    return results


def aggregate(results: Iterable[RunResult]) -> dict[str, Any]:
    """Means over runs: PSNR, SSIM, reuse statistics, wall times and their ratios."""
    results = list(results)
    if not results:
        raise ValueError("no runs to aggregate")
    psnr = [r.comparison.psnr_mean_db for r in results]
    walls = {k: float(np.sum([r.wall_s[k] for r in results])) for k in results[0].wall_s}
    return {
        "runs": len(results),
        "psnr_mean_db": "inf" if all(np.isinf(psnr)) else float(np.mean([p for p in psnr if np.isfinite(p)])),
        "psnr_min_db": "inf" if all(np.isinf(psnr)) else float(np.min(psnr)),
        "ssim_mean": float(np.mean([r.comparison.ssim_mean for r in results])),
        "ssim_min": float(np.min([r.comparison.ssim_mean for r in results])),
        "max_abs_diff": float(np.max([r.comparison.max_abs_diff for r in results])),
        "wall_s_total": walls,
        "wall_ratio_pipeline": walls["kaleido_pipeline"] / max(walls["dense_pipeline"], 1e-12),
        "wall_ratio_transformer": walls["kaleido_transformer"] / max(walls["dense_transformer"], 1e-12),
        "reuse": merge_summaries(r.trace for r in results),
    }


#: what each number of ``metrics.json`` means (written with it)
METRIC_DEFINITIONS = {
    "psnr_db": "per frame on decoded RGB in [0,1], peak 1.0; psnr_mean_db averages finite frames",
    "ssim": "scikit-image SSIM per RGB frame, data_range 1",
    "saved_fraction": "1 - 8-bit-equivalent MACs / dense MACs (a low_bits x 8 MAC counts low_bits/8)",
    "whole_transformer": "every GEMM of the transformer, text-side and embedding layers included",
}


def save_run(run: RunResult, out: Path, fps: int, scale: int) -> dict:
    """``run``'s videos (dense, Kaleido, side by side ``dense | Kaleido | |difference| x4``, MP4 and GIF,
    upscaled ``scale`` times) and trace into ``out``; returns ``run.to_dict()`` with the files written."""
    from kaleido.video_io import side_by_side, write_video_set

    out.mkdir(parents=True, exist_ok=True)
    files = {
        "dense": write_video_set(run.dense, out / "dense", fps, scale),
        "kaleido": write_video_set(run.kaleido, out / "kaleido", fps, scale),
        # labelled in the image (dense | Kaleido | |difference| x4), so the panels are upscaled before labelling
        "side_by_side": write_video_set(side_by_side(run.dense, run.kaleido, scale=scale, labels=("dense", "Kaleido")),
                                        out / "side_by_side", fps),
        "trace": str(run.trace.save(out / "trace.safetensors")),
    }
    d = run.to_dict()
    d["files"] = files
    return d


def save_runs(results: Sequence[RunResult], out_dir: str | Path, config: KaleidoConfig, settings: GenerationSettings,
              info: dict[str, Any], fps: int = 8, scale: int = 1, warmup_steps: int = 0) -> dict[str, Any]:
    """What ``kaleido generate`` writes: each run's videos and trace (:func:`save_run`; one run into
    ``out_dir`` itself, several into ``run-<i>/``), ``config.yaml`` and ``metrics.json`` (``info`` - model,
    pipeline, device... - then settings, config, per-run and mean quality, reuse statistics and wall times).
    Returns the metrics."""
    from kaleido.atomic import write_atomic

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    config.save(out / "config.yaml")
    single = len(results) == 1
    runs = [save_run(r, out if single else out / f"run-{i}", fps, scale) for i, r in enumerate(results)]
    metrics = {
        **info,
        "settings": settings.to_dict(),
        "timing": {"warmup_steps": warmup_steps, "repeats": 1,
                   "note": "one timed run per video; benchmarks/bench_generate.py alternates repeats"},
        "kaleido_config": config.to_dict(),
        "metric_definitions": dict(METRIC_DEFINITIONS),
        "apply_report": results[0].report,
        "runs": runs,
        "aggregate": aggregate(results),
    }
    write_atomic(out / "metrics.json", json.dumps(metrics, indent=1))
    return metrics
