"""Calibration, in one place: what ``kaleido calibrate`` runs.

* :mod:`kaleido.calibration.axes` - the reuse axis of every chunk-group switch per layer;
* :mod:`kaleido.calibration.target` - the search for a whole config that meets a PSNR or savings target;
* :mod:`kaleido.calibration.runs` - both run on a pipeline's prompts, the target's candidates measured in this
  process (:class:`kaleido.evaluation.runs.InProcessEvaluator`) or as comparison rows
  (:class:`kaleido.compare.config_evaluator.SweepEvaluator`), the result judged on held-out prompts.
"""

from kaleido.calibration.runs import (AxesCalibration, TargetRun, calibrate_axes_on_prompts,
                                      calibrate_to_target_on_prompts, split_prompts)

__all__ = ["AxesCalibration", "TargetRun", "calibrate_axes_on_prompts", "calibrate_to_target_on_prompts",
           "split_prompts"]
