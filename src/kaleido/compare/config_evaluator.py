"""Kaleido configs measured through the comparison's sweep: every (config, prompt, seed) one comparison row.

:class:`SweepEvaluator` is the Dask path a calibration's candidates and a threshold sweep's points run on
(``--workers`` / ``--scheduler``); its :meth:`~SweepEvaluator.measure` answers like the in-process
:class:`kaleido.evaluation.runs.InProcessEvaluator`, so what iterates configs takes either. A row's figures are the
comparison's (:func:`kaleido.compare.analysis.aggregate`): PSNR capped where frames are identical, savings of the
method's op counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from kaleido.evaluation.runs import Measure
from kaleido.techniques.kaleido_reuse.config import KaleidoConfig


def measure_rows(rows: Sequence[dict]) -> Measure:
    """:class:`Measure` of ``kaleido compare`` rows of one setting (error rows refused: they measured nothing);
    the means are :func:`kaleido.compare.analysis.aggregate`'s."""
    from kaleido.compare.analysis import aggregate

    bad = [r for r in rows if r.get("error")]
    if bad:
        raise ValueError(f"a calibration candidate failed on prompt {bad[0].get('prompt')!r}: {bad[0]['error']}")
    if not rows:
        raise ValueError("no rows to measure")
    aggs = aggregate(list(rows))
    if len(aggs) != 1:
        raise ValueError(f"measure_rows takes the rows of one setting, got {len(aggs)} settings")
    (a,) = aggs
    saved = dict(a.saved_by_kind, whole_transformer=a.total_saved, reusable_ops=a.reusable_saved)
    wall = None if math.isnan(a.wall_ratio) else a.wall_ratio
    diffs = [r["quality"]["max_abs_diff"] for r in rows if r["quality"].get("max_abs_diff") is not None]
    return Measure(a.n, a.psnr, a.psnr_min, a.ssim, saved, float(min(r["quality"]["ssim"] for r in rows)),
                   float(max(diffs)) if diffs else None, wall, None)


@dataclass
class SweepEvaluator:
    """Evaluates configs on prompts x seeds through ``kaleido compare``'s Dask path.

    Each (config, prompt, seed) is one sweep point of method ``kaleido`` with the whole config as its
    setting, so its row lands in ``results_dir/<key>.json`` like a comparison's: a calibration that is
    stopped and run again computes only the candidates it has no rows for, the rows can be reported
    by ``kaleido compare --results-dir`` beside the baselines', and ``scheduler`` sends the work to a
    Dask cluster (``workers`` local processes without one).
    """

    pipeline: str  #: a ``kaleido compare`` pipeline: ``tiny``, ``tiny-96``, ``random-wan`` or a local folder
    results_dir: Path
    call: dict  #: the pipeline call's settings (:meth:`GenerationSettings.call_kwargs`)
    scheduler: str | None = None
    workers: int = 1
    computed: int = 0  #: points computed so far (the others were rows already on disk)
    wall_s: float = 0.0  #: seconds spent in the sweep
    _client: Any = field(default=None, repr=False)

    def __enter__(self) -> "SweepEvaluator":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Close the Dask client (and local cluster) that :meth:`measure` opened once for all candidates."""
        if self._client is not None:
            from kaleido.compare.sweep import close_client

            close_client(*self._client)
            self._client = None

    def measure(self, config: KaleidoConfig, prompts: Sequence[str], seeds: Sequence[int], desc: str = "",
                warmup_steps: int = 0) -> Measure:
        """``config`` on ``prompts`` x ``seeds``, one comparison row each (computed unless on disk). ``desc`` and
        ``warmup_steps`` are the in-process evaluator's (a worker labels nothing and times its own runs)."""
        import time

        from kaleido.compare.analysis import load_rows
        from kaleido.compare.pipelines import pipeline_fingerprint
        from kaleido.compare.points import DENSE, SweepPoint
        from kaleido.compare.sweep import open_client, run_sweep

        mid = pipeline_fingerprint(self.pipeline)
        settings = {"config": config.to_dict()}
        pts = [SweepPoint(self.pipeline, DENSE, p, int(s), {}, dict(self.call), mid) for p in prompts for s in seeds]
        mine = [SweepPoint(self.pipeline, "kaleido", p, int(s), settings, dict(self.call), mid)
                for p in prompts for s in seeds]
        t0 = time.perf_counter()
        if self._client is None:
            self._client = open_client(self.scheduler, self.workers)
        summary = run_sweep(pts + mine, self.results_dir, progress=False, client=self._client[0])
        self.wall_s += time.perf_counter() - t0
        self.computed += summary.computed
        if summary.failed:
            raise ValueError(f"{len(summary.failed)} calibration run(s) failed, e.g. {summary.failed[0]}; "
                             "run the same command again to compute only those")
        keys = {p.key for p in mine}
        rows = [r for r in load_rows(self.results_dir) if r.get("point", {}).get("key") in keys]
        return measure_rows(rows)


