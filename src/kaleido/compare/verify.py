"""Do a results folder's rows reproduce with today's code on today's machine?

:func:`verify_rows` re-runs ``n`` rows of every setting of a results folder (a comparison's, or the
``calibration_runs/`` of a target calibration: the same rows) into a scratch folder, never touching the
stored rows, and reports per setting the largest PSNR and whole-transformer-saving drift against them.
The ``n`` rows are the same ``(prompt, seed)`` pairs for every setting (the first ``n`` in sorted order), so
only ``n`` dense references are generated again; each is compared with the stored reference too, which
separates a drift of the dense video (the model, torch's kernels) from one of a method's decisions.

A setting is flagged when a drift exceeds the tolerance (:data:`PSNR_TOLERANCE_DB`,
:data:`SAVED_TOLERANCE`), when a stored row and its re-run disagree on refusing the point, or when the
folder's rows name weights that are no longer the pipeline's (then nothing is re-run: one line says so).
"""

from __future__ import annotations

import json
import math
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from .analysis import capped_psnr, load_rows, setting_key, setting_rows
from .points import DENSE, SweepPoint, settings_label
from .provenance import environment_difference
from .results_folder import describe_plan, plan_of

#: largest |PSNR drift| (dB) of a re-run row that still counts as reproduced: a tenth of the smallest PSNR
#: difference the comparison's tables print
PSNR_TOLERANCE_DB = 0.1
#: largest |drift| of the whole-transformer saved fraction (0.005 = half a percentage point, the tables' last digit)
SAVED_TOLERANCE = 0.005


@dataclass
class SettingDrift:
    """One setting's re-run rows against its stored ones."""

    label: str
    method: str
    checked: int  # rows re-run
    psnr_drift_db: float  # largest |re-run PSNR - stored PSNR| (PSNR capped as the tables cap it)
    saved_drift: float  # largest |re-run - stored| whole-transformer saved fraction
    environment: str  # how the stored rows' environment differs from today's (provenance.environment_difference)
    flagged: bool = False
    why: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class DenseDrift:
    prompt: str
    seed: int
    max_abs_diff: float | None  # re-run dense video vs the stored reference (None: no stored reference)


@dataclass
class VerifyReport:
    results: str
    pipeline: str
    call: dict
    settings: list[SettingDrift]
    dense: list[DenseDrift]
    psnr_tolerance_db: float
    saved_tolerance: float

    @property
    def flagged(self) -> list[SettingDrift]:
        return [s for s in self.settings if s.flagged]

    def to_dict(self) -> dict:
        return {"results": self.results, "pipeline": self.pipeline, "call": self.call,
                "psnr_tolerance_db": self.psnr_tolerance_db, "saved_tolerance": self.saved_tolerance,
                "settings": [s.to_dict() for s in self.settings], "dense": [asdict(d) for d in self.dense],
                "flagged": len(self.flagged)}


def _one_plan(rows: list[dict], results: Path) -> tuple[str, str, dict]:
    """The folder's single ``(pipeline, model_id, call)``; a folder mixing several is refused in one line."""
    plans = {plan_of(r["point"]) for r in rows if "point" in r}
    if not plans:
        raise ValueError(f"{results} holds no result rows; run `kaleido compare --results {results}` first")
    if len(plans) > 1:
        shown = "; ".join(describe_plan(p) for p in sorted(plans)[:3])
        raise ValueError(f"{results} mixes rows of {len(plans)} models / step counts / samplers ({shown}): verify "
                         "one sweep's folder at a time (move the other rows to their own folder)")
    pipeline, model_id, call = plans.pop()
    return pipeline, model_id, json.loads(call)


def _check_weights(pipeline: str, model_id: str, results: Path) -> None:
    from .pipelines import pipeline_fingerprint

    now = pipeline_fingerprint(pipeline)
    if model_id and now != model_id:
        raise ValueError(f"the rows in {results} were computed with {model_id} but {pipeline!r} is now {now}: "
                         "they cannot be verified against other weights; re-run the sweep into a new folder")


def choose_pairs(groups: dict[str, list[dict]], n: int) -> list[tuple[str, int]]:
    """The first ``n`` ``(prompt, seed)`` pairs (sorted) that the most settings have rows for."""
    count: dict[tuple[str, int], int] = {}
    for rs in groups.values():
        for r in rs:
            pair = (r["point"]["prompt"], int(r["point"]["seed"]))
            count[pair] = count.get(pair, 0) + 1
    return sorted(count, key=lambda p: (-count[p], p))[:n]


def verify_rows(results_dir: str | Path, n: int, *, psnr_tolerance_db: float = PSNR_TOLERANCE_DB,
                saved_tolerance: float = SAVED_TOLERANCE, methods: list[str] | None = None,
                scratch: str | Path | None = None, scheduler: str | None = None, n_workers: int = 1,
                log: Callable[[str], None] = lambda line: None) -> VerifyReport:
    """Re-run ``n`` rows per setting of ``results_dir`` and compare (see the module docstring). ``scratch``: where
    the re-run rows go (default: a temporary folder, removed afterwards); ``methods``: only these methods' settings;
    ``n_workers=0`` (and no ``scheduler``): re-run in this process instead of on Dask workers."""
    from .sweep import run_sweep

    if n < 1:
        raise ValueError(f"--verify {n}: give the number of rows to re-run per setting (1 or more)")
    for tol, what in ((psnr_tolerance_db, "PSNR"), (saved_tolerance, "saving")):
        if not (math.isfinite(tol) and tol >= 0):
            raise ValueError(f"the {what} tolerance {tol} must be a finite number >= 0")
    results = Path(results_dir)
    rows = load_rows(results)
    pipeline, model_id, call = _one_plan(rows, results)
    _check_weights(pipeline, model_id, results)
    groups = {k: rs for k, rs in setting_rows(rows).items() if methods is None or rs[0]["method"] in methods}
    refused = [r for r in rows if r.get("error") and (methods is None or r["point"]["method"] in methods)]
    for r in refused:  # a refused point is a setting too: its re-run must refuse again
        groups.setdefault(setting_key(r["point"]["method"], r["point"]["settings"]), []).append(r)
    pairs = choose_pairs(groups, n)
    chosen = {k: [r for r in rs if (r["point"]["prompt"], int(r["point"]["seed"])) in pairs] for k, rs in groups.items()}
    points = [SweepPoint.from_dict(r["point"]) for rs in chosen.values() for r in rs]
    log(f"{results}: re-running {len(points)} rows of {len(chosen)} settings ({len(pairs)} prompt/seed pairs, "
        f"{pipeline}, {call or 'its own call'})")
    with tempfile.TemporaryDirectory(prefix="kaleido-verify-") as tmp:
        out = Path(scratch) if scratch is not None else Path(tmp)
        if out.resolve() == results.resolve():
            raise ValueError("the scratch folder must not be the results folder: verify never rewrites stored rows")
        if n_workers == 0 and scheduler is None:  # in this process (a test, or a run on a GPU)
            from .worker import run_point

            for p in points:
                run_point(p.to_dict(), str(out))
        else:
            summary = run_sweep(points, out, scheduler=scheduler, n_workers=n_workers, progress=False)
            if summary.failed:
                raise RuntimeError("verify lost points: " + "; ".join(summary.failed))
        settings = [_drift(rs, out, psnr_tolerance_db, saved_tolerance) for rs in chosen.values()]
        dense = [_dense_drift(results, out, pipeline, model_id, call, p, s) for p, s in pairs]
    settings.sort(key=lambda d: (-d.flagged, d.method, d.label))
    return VerifyReport(str(results), pipeline, call, settings, dense, psnr_tolerance_db, saved_tolerance)


def _drift(stored: list[dict], out: Path, psnr_tol: float, saved_tol: float) -> SettingDrift:
    first = stored[0]
    d = SettingDrift(settings_label(first["point"]["method"], first["point"]["settings"]), first["point"]["method"],
                     len(stored), 0.0, 0.0, "")
    envs = set()
    for r in stored:
        new = json.loads((out / f"{SweepPoint.from_dict(r['point']).key}.json").read_text())
        envs.add(environment_difference(r.get("env"), new.get("env") or {}))
        where = f"prompt {r['point']['prompt']!r} seed {r['point']['seed']}"
        if bool(r.get("error")) != bool(new.get("error")):
            d.flagged = True
            d.why.append(f"{where}: stored {'refused' if r.get('error') else 'ran'}, re-run "
                         f"{'refused: ' + new['error'] if new.get('error') else 'ran'}")
            continue
        if r.get("error"):
            continue
        d.psnr_drift_db = max(d.psnr_drift_db, abs(capped_psnr(new["quality"]["psnr"]) - capped_psnr(r["quality"]["psnr"])))
        d.saved_drift = max(d.saved_drift, abs(new["report"]["total_saved_fraction"] - r["report"]["total_saved_fraction"]))
    d.environment = "; ".join(sorted(envs))
    if d.psnr_drift_db > psnr_tol:
        d.flagged = True
        d.why.append(f"PSNR drift {d.psnr_drift_db:.3f} dB > {psnr_tol} dB")
    if d.saved_drift > saved_tol:
        d.flagged = True
        d.why.append(f"saving drift {100 * d.saved_drift:.2f} pp > {100 * saved_tol:.2f} pp")
    return d


def _dense_drift(results: Path, out: Path, pipeline: str, model_id: str, call: dict, prompt: str, seed: int) -> DenseDrift:
    key = SweepPoint(pipeline, DENSE, prompt, seed, {}, call, model_id).key
    old, new = results / f"dense-{key}.npy", out / f"dense-{key}.npy"
    if not (old.exists() and new.exists()):
        return DenseDrift(prompt, seed, None)
    a, b = np.load(old, allow_pickle=False), np.load(new, allow_pickle=False)
    diff = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if a.shape == b.shape else float("inf")
    return DenseDrift(prompt, seed, diff)
