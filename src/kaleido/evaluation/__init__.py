"""Evaluation, in one place: generating on a pipeline and scoring against dense.

* :mod:`kaleido.evaluation.generate` - the one :func:`~kaleido.evaluation.generate.generate` every run calls, call
  settings, prompts and the dense references;
* :mod:`kaleido.evaluation.harness` - one technique against the dense model on the same pipeline, prompt and seed:
  the one :class:`~kaleido.evaluation.harness.RunResult` (what every comparison row is);
* :mod:`kaleido.evaluation.simulator_profiles` - a row's simulator inputs, typed;
* :mod:`kaleido.evaluation.runs` - Kaleido's runs through that harness and what ``kaleido generate`` writes of
  them (what ``kaleido generate``, ``kaleido sweep`` and the calibration run).
"""
