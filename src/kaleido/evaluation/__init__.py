"""Evaluation, in one place: generating on a pipeline and scoring against dense.

* :mod:`kaleido.evaluation.generate` - the one :func:`~kaleido.evaluation.generate.generate` every comparison
  calls, dense-versus-Kaleido runs and their files (what ``kaleido generate`` and ``kaleido sweep`` run);
* :mod:`kaleido.evaluation.harness` - one technique against the dense model on the same pipeline, prompt and seed
  (what every comparison row is).
"""
