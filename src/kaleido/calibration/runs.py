"""Calibration runs on a pipeline: what ``kaleido calibrate`` does.

* :func:`calibrate_axes_on_prompts` - the reuse axis of every chunk-group switch per layer
  (:func:`kaleido.calibration.axes.calibrate_axes`), measured on calibration prompts.
* :func:`calibrate_to_target_on_prompts` - a whole config for a PSNR or savings target: the
  calibration prompts are characterised (which also gives their dense references), reuse axes,
  thresholds, dense warm-up steps and per-layer settings are searched
  (:func:`kaleido.calibration.target.calibrate_to_target`), then the chosen config, the
  base config and the base thresholds scaled to the target are measured on HELD-OUT prompts.  A
  missed target is reported with its shortfall, never hidden.

Calibrate on prompts other than those you evaluate on (:func:`split_prompts` keeps the two apart).
This module sits above :mod:`kaleido.characterize` and :mod:`kaleido.techniques.kaleido_reuse`; neither imports it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from kaleido.atomic import write_atomic
from kaleido.calibration.target import Target, TargetCalibration
from kaleido.compare.config_evaluator import SweepEvaluator
from kaleido.evaluation.runs import InProcessEvaluator, Measure
from kaleido.techniques.kaleido_reuse.config import KaleidoConfig


def split_prompts(prompts: Sequence[str], heldout: Sequence[str] | None = None) -> tuple[list[str], list[str]]:
    """``(calibration, held-out)`` prompts: ``prompts`` and ``heldout`` when given, else the first and
    second half of ``prompts`` (the first half one longer). The two sets must not share a prompt."""
    prompts = list(prompts)
    if heldout is not None:
        calib, held = prompts, list(heldout)
    else:
        if len(prompts) < 2:
            raise ValueError(f"{len(prompts)} prompt cannot be split into calibration and held-out prompts: give at "
                             "least 2 (the second half is held out), or the held-out prompts separately")
        k = (len(prompts) + 1) // 2
        calib, held = prompts[:k], prompts[k:]
    both = sorted(set(calib) & set(held))
    if both:
        raise ValueError(f"prompts {both} are both calibration and held-out prompts; keep the two sets disjoint")
    return calib, held


@dataclass
class AxesCalibration:
    """The calibrated config and ``{switch: {layer: {axis: saved_fraction}}}`` it was chosen from."""

    config: KaleidoConfig
    saved_fraction: dict[str, dict[str, dict[str, float]]]
    prompts: list[str]
    seed: int

    def chosen_axes(self) -> dict[str, dict[str, str]]:
        """``{switch: {layer: axis}}``: the axis with the largest saving, per switch and layer."""
        return {sw: {layer: max(v, key=v.get) for layer, v in per_layer.items()}
                for sw, per_layer in self.saved_fraction.items()}

    def save(self, config_path: str | Path) -> Path:
        """The config at ``config_path`` and ``calibration.json`` (prompts, seed, savings) beside it;
        returns the latter's path."""
        out = Path(config_path)
        out.parent.mkdir(parents=True, exist_ok=True)
        self.config.save(out)
        table = out.parent / "calibration.json"
        write_atomic(table, json.dumps({"prompts": self.prompts, "seed": self.seed,
                                        "saved_fraction": self.saved_fraction}, indent=1))
        return table


def calibrate_axes_on_prompts(pipe, prompts: Sequence[str], seed: int, settings,
                              base: KaleidoConfig | None = None) -> AxesCalibration:
    """Generate every prompt (seed ``seed``, ``settings``: a
    :class:`~kaleido.evaluation.generate.GenerationSettings`) once per candidate axis and keep,
    per chunk-group switch and layer, the axis that saves the most."""
    from kaleido.calibration.axes import calibrate_axes
    from kaleido.evaluation.generate import generate

    prompts = list(prompts)

    def run():
        for p in prompts:
            generate(pipe, p, seed, settings)

    cfg, table = calibrate_axes(pipe.transformer, run, base or KaleidoConfig())
    return AxesCalibration(cfg, table, prompts, int(seed))


@dataclass
class TargetRun:
    """A target calibration (on the calibration prompts) and its check on held-out prompts."""

    target: Target  #: as judged on the held-out prompts (the search aimed at ``target`` + ``margin``)
    margin: float
    search: TargetCalibration
    heldout: dict[str, Measure]  #: "calibrated", "default" and, when it differs, the scaled default
    calibration_prompts: list[str]
    heldout_prompts: list[str]
    seeds: list[int]
    characterization: Any  #: the :class:`~kaleido.characterize.Characterization` of the calibration prompts
    meta: dict = field(default_factory=dict)

    @property
    def met(self) -> bool:
        return self.target.feasible(self.heldout["calibrated"])

    @property
    def shortfall(self) -> float:
        return self.target.shortfall(self.heldout["calibrated"])

    def verdict(self) -> str:
        """``met`` or ``MISSED by ...`` (dB, or a percentage for a savings target)."""
        if self.met:
            return "met"
        return f"MISSED by {self.shortfall:.2f} dB" if self.target.kind == "psnr" else f"MISSED by {self.shortfall:.1%}"

    def to_dict(self, config_path: str | Path | None = None) -> dict:
        ch = self.characterization
        return {
            **self.meta, "seeds": self.seeds,
            "calibration_prompts": self.calibration_prompts, "heldout_prompts": self.heldout_prompts,
            "config_path": None if config_path is None else str(config_path),
            **self.search.to_dict(),
            "heldout_target": self.target.to_dict(), "margin": self.margin,
            "heldout": {label: m.to_dict() for label, m in self.heldout.items()},
            "heldout_target_met": self.met, "heldout_shortfall": self.shortfall,
            "heldout_shortfall_unit": "dB" if self.target.kind == "psnr" else "fraction",
            "characterization_best_axes": {n: t.best_axes() for n, t in ch.operands.items()},
            "claim": ch.statements(),
        }

    def save(self, config_path: str | Path, report_path: str | Path | None = None) -> Path:
        """The chosen config at ``config_path`` and the JSON report (default: ``calibration_target.json``
        beside it); returns the report's path."""
        out = Path(config_path)
        out.parent.mkdir(parents=True, exist_ok=True)
        self.search.chosen.config.save(out)
        report = Path(report_path) if report_path else out.parent / "calibration_target.json"
        write_atomic(report, json.dumps(self.to_dict(out), indent=1))
        return report


def calibrate_to_target_on_prompts(pipe, base: KaleidoConfig, target: Target, calibration_prompts: Sequence[str],
                                   heldout_prompts: Sequence[str], seeds: Sequence[int], settings, margin: float = 0.0,
                                   budget: int = 16, bisect_steps: int = 3, meta: dict | None = None,
                                   log: Callable[[str], None] = lambda s: None,
                                   evaluator: SweepEvaluator | InProcessEvaluator | None = None, op_min_saving: float = 0.01) -> TargetRun:
    """Calibrate ``base`` for ``target`` (searched for ``target`` raised by ``margin``) on
    ``calibration_prompts`` x ``seeds``, then measure it on ``heldout_prompts`` x ``seeds``.

    ``settings``: a :class:`~kaleido.evaluation.generate.GenerationSettings`; ``meta`` (e.g. the
    model's name) is recorded in the characterisation and the report; ``log`` receives one line per
    candidate; ``evaluator``: what measures the candidates and the held-out check (``kaleido compare``'s
    Dask path, resumable: :class:`~kaleido.compare.config_evaluator.SweepEvaluator`; default: this process); ``op_min_saving``: the search's last stage (see
    :func:`~kaleido.calibration.target.calibrate_to_target`). Raises ``ValueError`` for a target or margin out of range, or a pipeline that cannot run.
    """
    from kaleido.characterize import Characterization, characterize_runs
    from kaleido.characterize.suggest import layers_by_likeness, suggested_axes
    from kaleido.calibration.target import calibrate_to_target
    from kaleido.models.adapter import adapter_for

    search_target = target.raised_by(margin)
    calib, heldout, seeds = list(calibration_prompts), list(heldout_prompts), [int(s) for s in seeds]
    meta = dict(meta or {})
    rec, dense = characterize_runs(pipe, calib, seeds, settings, base, progress=False)
    ch = Characterization.from_recorder(rec, {**meta, "prompts": calib, "seeds": seeds})

    in_process = evaluator is None
    if in_process:  # the characterisation's dense runs are the calibration prompts' references
        evaluator = InProcessEvaluator(pipe, settings, dict(dense))

    def evaluate(cfg):
        return evaluator.measure(cfg, calib, seeds)

    layers = layers_by_likeness(ch, adapter_for(pipe.transformer).num_layers(pipe.transformer))
    res = calibrate_to_target(base, evaluate, search_target, suggested_axes(ch, base), layers, budget=budget,
                              bisect_steps=bisect_steps, op_min_saving=op_min_saving, log=log)

    log(f"held-out: {len(heldout)} prompts x {len(seeds)} seeds")
    rows = [("calibrated", res.chosen.config), ("default", res.default.config)]
    if res.scaled_default is not None and res.scaled_default.config != res.chosen.config:
        rows.append(("default thresholds scaled to the target", res.scaled_default.config))
    held = {label: evaluator.measure(cfg, heldout, seeds) for label, cfg in rows}
    if not in_process:
        meta["evaluation"] = {"path": "dask", "results_dir": str(evaluator.results_dir),
                              "scheduler": evaluator.scheduler, "workers": evaluator.workers,
                              "points_computed": evaluator.computed, "sweep_wall_s": round(evaluator.wall_s, 1)}
    return TargetRun(target, float(margin), res, held, calib, heldout, seeds, ch,
                     {**meta, "settings": settings.to_dict()})
