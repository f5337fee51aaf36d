"""Kaleido's runs against dense, and what ``kaleido generate`` writes of them.

:func:`kaleido_runs` runs every (prompt, seed) of :func:`~kaleido.evaluation.generate.dense_runs` with Kaleido
through the one harness every technique runs through (:func:`kaleido.evaluation.harness.run_against_dense`, one
:class:`~kaleido.evaluation.harness.RunResult` each); :func:`aggregate` takes the means ``kaleido generate``,
``kaleido sweep`` and the calibration read; :func:`save_runs` writes the videos, traces, ``config.yaml`` and
``metrics.json``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from kaleido.evaluation.generate import label_progress, warm_up
from kaleido.evaluation.harness import RunResult
from kaleido.generation_settings import GenerationSettings
from kaleido.metrics import json_float
from kaleido.techniques.kaleido_reuse.config import KaleidoConfig
from kaleido.trace import merge_summaries


def kaleido_runs(pipe, config: KaleidoConfig, dense: dict, settings: GenerationSettings, progress: bool | None = None,
                 desc: str = "kaleido", lpips: bool = True, warmup_steps: int = 0) -> list[RunResult]:
    """Kaleido generations of every key of ``dense`` (:func:`dense_runs`' output), each run against its dense video by
    the one harness every technique runs through (:func:`kaleido.evaluation.harness.run_against_dense`, Kaleido's
    handle applied per run), with the dense run's times; ``warmup_steps`` > 0: an untimed Kaleido warm-up first.
    Each result's ``extra["patched"]`` says what Kaleido patched. ``progress``: as :func:`dense_runs` (bars
    labelled "``desc`` i/n")."""
    from kaleido.evaluation.harness import run_against_dense
    from kaleido.techniques.kaleido_reuse.method import KaleidoMethod

    method = KaleidoMethod.from_config(config)
    with method.apply(pipe.transformer) as handle:  # what it patches, and the warm-up (its trace is dropped)
        report = handle.patched
        patched = {"summary": handle.summary(), "active_ops": report.ops_by_kind(),
                   "attention": len(report.attention), "linears": len(report.linears),
                   "dense_counted": len(report.dense_counted)}
        if dense:
            warm_up(pipe, next(iter(dense))[0], settings, warmup_steps, progress)
    results = []
    items = list(dense.items())
    for i, ((p, s), (ref, wall_d, tr_d)) in enumerate(items):
        label_progress(pipe, f"{desc} {i + 1}/{len(items)}", progress)
        res, _, _ = run_against_dense(pipe, settings.call_kwargs(), method, p, s, dense_video=ref, lpips=lpips,
                                      simulator_inputs=False, keep_trace=True)
        if res.trace is None:
            raise RuntimeError("Kaleido recorded no trace: the pipeline never called the patched transformer")
        res.dense_wall_s, res.dense_transformer_s = wall_d, tr_d
        res.extra["patched"] = patched
        results.append(res)
    return results


def timings(run: RunResult) -> dict[str, float]:
    """A Kaleido run's wall times against its dense run: pipeline and transformer, seconds."""
    return {"dense_pipeline": run.dense_wall_s, "kaleido_pipeline": run.wall_s,
            "dense_transformer": run.dense_transformer_s, "kaleido_transformer": run.transformer_s}


def run_record(run: RunResult) -> dict:
    """What ``metrics.json`` keeps of one run: prompt, seed, the frame-by-frame comparison, wall times, reuse."""
    return {"prompt": run.prompt, "seed": run.seed, **run.comparison.to_dict(), "wall_s": timings(run),
            "reuse": run.trace.summary()}


def aggregate(results: Iterable[RunResult]) -> dict[str, Any]:
    """Means over runs: PSNR, SSIM, reuse statistics, wall times and their ratios."""
    results = list(results)
    if not results:
        raise ValueError("no runs to aggregate")
    psnr = [r.comparison.psnr_mean_db for r in results]
    walls = {k: float(np.sum([timings(r)[k] for r in results])) for k in timings(results[0])}
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
    upscaled ``scale`` times) and trace into ``out``; returns :func:`run_record` with the files written."""
    from kaleido.video_io import side_by_side, write_video_set

    out.mkdir(parents=True, exist_ok=True)
    files = {
        "dense": write_video_set(run.dense_video, out / "dense", fps, scale),
        "kaleido": write_video_set(run.video, out / "kaleido", fps, scale),
        # labelled in the image (dense | Kaleido | |difference| x4), so the panels are upscaled before labelling
        "side_by_side": write_video_set(side_by_side(run.dense_video, run.video, scale=scale,
                                                     labels=("dense", "Kaleido")), out / "side_by_side", fps),
        "trace": str(run.trace.save(out / "trace.safetensors")),
    }
    d = run_record(run)
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
        "apply_report": results[0].extra["patched"],
        "runs": runs,
        "aggregate": aggregate(results),
    }
    write_atomic(out / "metrics.json", json.dumps(metrics, indent=1))
    return metrics


@dataclass
class Measure:
    """Quality and savings of one config over a set of (prompt, seed) runs: what a sweep point, a calibration
    candidate and a held-out check each measure (:class:`InProcessEvaluator`, or the comparison's rows through
    :class:`kaleido.compare.config_evaluator.SweepEvaluator`).

    ``ssim_min``, ``max_abs_diff`` and the wall-time ratios (Kaleido / dense: the pipeline call and, where it was
    timed, the transformer alone) are ``None`` where the runs did not give them."""

    runs: int
    psnr_mean_db: float
    psnr_min_db: float
    ssim_mean: float
    saved_fraction: dict[str, float]
    ssim_min: float | None = None
    max_abs_diff: float | None = None
    wall_ratio_pipeline: float | None = None
    wall_ratio_transformer: float | None = None

    def saved(self, of: str) -> float:
        return self.saved_fraction.get(of, 0.0)

    @classmethod
    def from_aggregate(cls, agg: dict) -> "Measure":
        """The measure of :func:`aggregate`'s means."""
        reuse = agg["reuse"]
        saved = {op: d["saved_fraction"] for op, d in reuse["per_op"].items()}
        saved["whole_transformer"] = reuse["whole_transformer"]["saved_fraction"]
        saved["reusable_ops"] = reuse["reusable_ops"]["saved_fraction"]
        return cls(agg["runs"], float(agg["psnr_mean_db"]), float(agg["psnr_min_db"]), agg["ssim_mean"], saved,
                   agg["ssim_min"], agg["max_abs_diff"], agg["wall_ratio_pipeline"], agg["wall_ratio_transformer"])

    def to_dict(self) -> dict:
        return {"runs": self.runs, "psnr_mean_db": json_float(self.psnr_mean_db),
                "psnr_min_db": json_float(self.psnr_min_db), "ssim_mean": self.ssim_mean,
                "saved_fraction": dict(sorted(self.saved_fraction.items()))}


def measure_runs(results: Sequence[RunResult]) -> Measure:
    """:class:`Measure` of :func:`kaleido_runs` results."""
    return Measure.from_aggregate(aggregate(results))


@dataclass
class InProcessEvaluator:
    """Measures configs on prompts x seeds in this process (any ``--device`` / ``--dtype``): each (prompt, seed)'s
    dense reference generated once and kept (``dense``: :func:`~kaleido.evaluation.generate.dense_runs`' form, may
    be given), Kaleido's runs through the harness (:func:`kaleido_runs`). The same ``measure`` as the comparison's
    :class:`~kaleido.compare.config_evaluator.SweepEvaluator`, so a threshold sweep or a calibration takes either."""

    pipe: Any
    settings: GenerationSettings
    dense: dict = field(default_factory=dict)
    progress: bool | None = False

    def __enter__(self) -> "InProcessEvaluator":
        return self

    def __exit__(self, *exc) -> None:
        return None

    def measure(self, config: KaleidoConfig, prompts: Sequence[str], seeds: Sequence[int], desc: str = "kaleido",
                warmup_steps: int = 0) -> Measure:
        from kaleido.evaluation.generate import dense_runs

        pairs = [(p, int(s)) for p in prompts for s in seeds]
        for p, s in pairs:
            if (p, s) not in self.dense:
                self.dense.update(dense_runs(self.pipe, [p], [s], self.settings, progress=self.progress,
                                             warmup_steps=warmup_steps if not self.dense else 0))
        mine = {k: self.dense[k] for k in pairs}
        return measure_runs(kaleido_runs(self.pipe, config, mine, self.settings, progress=self.progress, desc=desc,
                                         lpips=False, warmup_steps=warmup_steps))
