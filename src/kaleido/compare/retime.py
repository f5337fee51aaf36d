"""Wall time of the ranking's settings, each timed back to back with dense in one process.

A sweep's rows carry wall times, but rows of one folder may come from several sweep runs (a row that exists is
re-used by key), on a machine whose load differs from run to run; a method's time is only comparable with a dense
time measured under the same conditions. :func:`retime` re-runs, for each method the ranking at the quality level
picks (:func:`kaleido.compare.analysis.ranking_at_quality`), ``runs`` of its chosen setting's (prompt, seed)
points: a warm-up generation, then dense and the method back to back in this process (one torch thread, as the
sweep's workers run), and keeps ``method time / dense time`` per point in ``<results>/timing/wall-time.json``.
:func:`kaleido.compare.analysis.wall_ratios` prefers these figures to any in the rows. Each re-run's PSNR is kept
beside its row's: a row this code does not reproduce within :data:`REPRODUCED_DB` is named in the log and flagged
(``"reproduced": false``) - its timing still stands, its quality figure is the row's.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from kaleido.atomic import write_atomic

from .analysis import (RETIMED_FILE, aggregate, capped_psnr, device_label, load_retimed, load_rows,
                       ranking_at_quality, setting_key, setting_rows)
from .points import SweepPoint, settings_label


#: how far (dB) a re-run's PSNR may be from its row's and still count as reproduced
REPRODUCED_DB = 0.1


def retime(results_dir: str | Path, *, runs: int = 2, min_psnr: float = 30.0, methods: list[str] | None = None,
           log: Callable[[str], None] = print) -> dict:
    """Re-time the ranking's settings of ``results_dir`` (see the module docstring); returns the timing file's
    content. ``methods``: only these (default: every ranked method with a setting at ``min_psnr``)."""
    from kaleido.evaluation.harness import run_against_dense
    from kaleido.evaluation.generate import generate
    from kaleido.generation_settings import GenerationSettings
    from kaleido.techniques import make_method

    from .provenance import device_info
    from .worker import _pipeline

    results = Path(results_dir)
    rows = load_rows(results)
    if not 1 <= runs <= 100:
        raise ValueError(f"runs={runs} is outside 1..100")
    ranked = [r for r in ranking_at_quality(aggregate(rows), min_psnr) if r.best is not None]
    if methods is not None:
        ranked = [r for r in ranked if r.method in methods]
    kept = load_retimed(results)
    by_setting = setting_rows(rows)
    warm: set[str] = set()
    for rm in ranked:
        b = rm.best
        chosen = sorted(by_setting[setting_key(b.method, b.settings)], key=lambda r: (r["prompt"], r["seed"]))
        for row in chosen[:runs]:
            point = SweepPoint.from_dict(row["point"])
            pipe, base = _pipeline(point.pipeline)  # loaded with one torch thread, as the sweep's workers run
            call = dict(base, **point.call)
            if point.pipeline not in warm:  # first generation of a process pays one-off costs
                generate(pipe, point.prompt, point.seed, GenerationSettings.from_call(call))
                warm.add(point.pipeline)
            t0 = time.perf_counter()
            res, _, _ = run_against_dense(pipe, call, make_method(point.method, **point.settings), point.prompt,
                                          point.seed)
            psnr_now, psnr_row = capped_psnr(res.quality["psnr"]), capped_psnr(row["quality"]["psnr"])
            reproduced = abs(psnr_now - psnr_row) <= REPRODUCED_DB
            if not reproduced:
                log(f"note: {settings_label(point.method, point.settings)} on {point.prompt!r} seed {point.seed} gives "
                    f"{psnr_now:.3f} dB now against {psnr_row:.3f} dB in its row [{point.key}]: timed, and flagged")
            dev = {"device": device_info(pipe)}
            kept[point.key] = {"method_s": res.wall_s, "dense_s": res.dense_wall_s, "device_label": device_label(dev),
                               "method": point.method, "label": b.label, "prompt": point.prompt, "seed": point.seed,
                               "psnr_row": psnr_row, "psnr_now": psnr_now, "reproduced": reproduced}
            log(f"{b.label[:70]:70s}  {point.prompt[:24]:24s} seed {point.seed}: {res.wall_s:6.2f} s vs dense "
                f"{res.dense_wall_s:6.2f} s = {res.wall_s / res.dense_wall_s:.2f}x  ({time.perf_counter() - t0:.0f} s)")
    out = {"what": "method and dense wall time of the same point, back to back in one process (kaleido.compare."
                   "retime)", "when": datetime.now(timezone.utc).isoformat(timespec="seconds"), "points": kept}
    path = results / RETIMED_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(out, indent=1, sort_keys=True, allow_nan=False))
    return out
