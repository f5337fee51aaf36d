"""What one Dask task does: compute one sweep point and write its JSON row.

Runs in a worker process.  Pipelines are loaded once per process and kept; the dense
reference video of each (pipeline, call, prompt, seed) is stored next to the rows as
``dense-<key>.npy`` (plain array, loaded with ``allow_pickle=False``) so method points
compare against it without regenerating it.  Rows are written atomically (temporary
file, then rename), so an interrupted sweep never leaves a half row behind.  Every row records
the machine its wall time was measured on (``device``: :func:`device_info`), outside the point,
so the row's key does not depend on it, and the sweep run that computed it (``run``), so that a method's wall time
is only ever compared with a dense time measured in the same run (:func:`kaleido.compare.analysis.wall_ratios`),
and what its figures depend on (``env``: code and torch versions, CPU capability and flags, threads, sampler;
:func:`kaleido.compare.provenance.environment`), so ``kaleido compare --verify`` can judge a drift.
"""

from __future__ import annotations

import json
import socket
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from kaleido.atomic import open_atomic, write_atomic

from kaleido.heap import return_free_heap
from .results_folder import row_done
from .points import DENSE, SweepPoint
from .provenance import device_info, environment

_PIPELINES: dict[str, tuple] = {}
_FINGERPRINTS: dict[str, str] = {}


def _pipeline(name: str):
    if name not in _PIPELINES:
        import torch

        torch.set_num_threads(1)
        from .pipelines import load_pipeline, pipeline_fingerprint

        _FINGERPRINTS[name] = pipeline_fingerprint(name)  # of the files about to be loaded
        pipe, call = load_pipeline(name)
        pipe.set_progress_bar_config(disable=True)
        _PIPELINES[name] = (pipe, call)
    return _PIPELINES[name]


def _environment(pipe, call: dict) -> dict:
    from kaleido.sampling import sampler_of

    return environment(call.get("sampler") or sampler_of(pipe.scheduler))


@contextmanager
def _writing(path: Path):
    """A failed write (a full disk, a read-only folder) as one line naming the file and the fix; the atomic writer
    has already removed its temporary file, so nothing half-written is left."""
    try:
        yield
    except OSError as e:
        raise OSError(e.errno, f"could not write {path} ({e.strerror or e}): free space there or give another "
                      "--results, then run the same command again (finished rows are kept)") from None


def write_json_atomic(path: Path, obj: dict) -> None:
    with _writing(path):
        write_atomic(path, json.dumps(obj, indent=1, sort_keys=True, allow_nan=False))


def _dense_video(point: SweepPoint, results: Path, pipe, call, run: str | None = None) -> np.ndarray:
    from kaleido.generation_settings import GenerationSettings
    from kaleido.evaluation.harness import thumbnail_strip
    from kaleido.evaluation.generate import generate

    dense = point.dense()
    path = results / f"dense-{dense.key}.npy"
    if path.exists():
        return np.load(path, allow_pickle=False)
    video, wall, _ = generate(pipe, dense.prompt, dense.seed, GenerationSettings.from_call(call))
    with _writing(path), open_atomic(path, "wb") as f:
        np.save(f, video, allow_pickle=False)
    row = {"point": dense.to_dict(), "wall_s": wall, "thumbs": thumbnail_strip(video), "frames": int(len(video)),
           "host": socket.gethostname(), "device": device_info(pipe), "env": _environment(pipe, call)}
    if run is not None:
        row["run"] = run
    write_json_atomic(results / f"{dense.key}.json", row)
    return video


def run_point(point_dict: dict, results_dir: str, run: str | None = None) -> dict:
    """Compute ``point_dict`` (a :meth:`SweepPoint.to_dict`) unless its row exists; return the row.  ``run``: the
    sweep run's id, recorded in the rows this call writes.  The heap's free pages go back to the OS after each
    point (:mod:`kaleido.compare.heap`), so a worker's memory stays flat over a long sweep."""
    try:
        return _run_point(point_dict, results_dir, run)
    finally:
        return_free_heap()


def _run_point(point_dict: dict, results_dir: str, run: str | None) -> dict:
    from kaleido.techniques import make_method
    from kaleido.evaluation.harness import run_against_dense, thumbnail_strip

    point = SweepPoint.from_dict(point_dict)
    results = Path(results_dir)
    out = results / f"{point.key}.json"
    if row_done(out):
        return json.loads(out.read_text())
    pipe, base_call = _pipeline(point.pipeline)
    if point.model_id:
        now = _FINGERPRINTS[point.pipeline]
        if now != point.model_id:
            raise ValueError(f"pipeline {point.pipeline!r} is now {now} but the sweep was planned for "
                             f"{point.model_id}: the weights changed mid-sweep; plan the sweep again")
    call = dict(base_call, **point.call)
    dense = _dense_video(point, results, pipe, call, run)
    if point.method == DENSE:
        return json.loads(out.read_text())
    t0 = time.perf_counter()
    try:
        method = make_method(point.method, **point.settings)
        res, video, _ = run_against_dense(pipe, call, method, point.prompt, point.seed, dense_video=dense)
        row = {"point": point.to_dict(), **res.to_dict(), "thumbs": thumbnail_strip(video)}
    except ValueError as e:  # a method that refuses this pipeline: recorded, not fatal
        row = {"point": point.to_dict(), "method": point.method, "settings": point.settings, "prompt": point.prompt,
               "seed": point.seed, "error": str(e)}
    row["compute_s"] = time.perf_counter() - t0
    row["host"] = socket.gethostname()
    row["device"] = device_info(pipe)
    row["env"] = _environment(pipe, call)
    if run is not None:
        row["run"] = run
    write_json_atomic(out, row)
    return row
