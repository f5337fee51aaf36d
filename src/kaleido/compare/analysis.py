"""From JSON rows to the comparison: aggregates, the Pareto plot, the matched-savings table.

Everything here reads rows only (never recomputes), so a finished sweep re-plots for
free.  Savings are 8-bit-equivalent MAC fractions per op kind, as each method counted
them (:mod:`kaleido.techniques.base`); ``self_qk`` is self-attention q.k^T, ``total``
the whole transformer's blocks with each method's own estimation work included.
PSNR ``inf`` (identical video) is averaged as :data:`PSNR_CAP_DB`.

Beside the MACs, every setting carries the wall time it measured: the median over its runs
of method time / dense time for the same prompt and seed (:func:`wall_ratios`), on the machine
that ran them (the rows' ``device``, :func:`device_label`), and where its saving is real
(:func:`saving_realised`): on today's CPUs and GPUs, or only on the accelerator it was
designed for, whose simulated speedup :func:`accelerator_speedups` reads off the accelerator
tables.
"""

from __future__ import annotations

import io
import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kaleido.atomic import write_atomic
from kaleido.metrics import bootstrap_interval
from kaleido.ops import SWITCH_OF

from .points import DENSE, settings_label

PSNR_CAP_DB = 100.0
MATCH_TARGETS = (0.5, 0.7)

#: :func:`saving_realised`'s two answers
TODAY = "today's hardware"
NEEDS_ACCELERATOR = "needs the accelerator"

#: Where each technique's MAC saving turns into time.  ``TODAY``: it skips work on a CPU or GPU
#: today (step caches skip whole steps or blocks; sparse attention and token merging shrink the
#: attention a kernel computes).  ``NEEDS_ACCELERATOR``: the saving is realised only by the
#: hardware it was designed for, which this project simulates (``kaleido.hw``; the accelerator
#: table); on a CPU or GPU its float path emulates the reduced-precision or skipped work and costs
#: time.  Each technique declares it where it registers
#: (:attr:`kaleido.techniques.registry.Technique.needs_accelerator`); a stack is classified from its techniques.


def saving_realised(method: str, settings: dict | None = None) -> str:
    """Where ``method``'s saving is real (its registration's ``needs_accelerator``): :data:`TODAY`, :data:`NEEDS_ACCELERATOR`,
    for a stack the shared answer of its techniques or ``"mixed: ..."`` naming each side, or
    ``"unclassified"``."""
    if method == "stack":
        names = [t["technique"] for t in (settings or {}).get("techniques", ())]
        where = {n: saving_realised(n) for n in names}
        kinds = set(where.values())
        if len(kinds) <= 1:
            return kinds.pop() if kinds else "unclassified"
        return "mixed: " + "; ".join(f"{n} on {w}" if w == TODAY else f"{n} {w}" for n, w in where.items())
    from kaleido.techniques import TECHNIQUES

    t = TECHNIQUES.get(method)
    if t is None:
        return "unclassified"
    return NEEDS_ACCELERATOR if t.needs_accelerator else TODAY


#: the device label of a row that recorded none (rows written before rows recorded their device)
UNKNOWN_DEVICE = "unknown device"


def device_label(row: dict) -> str:
    """The machine a row's wall time was measured on, from its ``device`` field
    (:func:`kaleido.compare.provenance.device_info`): e.g. ``"cpu: AMD EPYC 7B13, 1 thread"``,
    ``"cuda: NVIDIA H200, 1 thread"``; :data:`UNKNOWN_DEVICE` when the row has none."""
    d = row.get("device")
    if not isinstance(d, dict) or not d.get("type"):
        return UNKNOWN_DEVICE
    threads = d.get("threads")
    name = d.get("name") or "unnamed"
    return f"{d['type']}: {name}" + ("" if threads is None else f", {threads} thread{'s' if threads != 1 else ''}")


def _dense_identity(point: dict) -> tuple:
    """What pairs a method row with its dense reference: pipeline, weights, call, prompt, seed."""
    return (point.get("pipeline"), point.get("model_id", ""), json.dumps(point.get("call") or {}, sort_keys=True),
            point.get("prompt"), int(point.get("seed", 0)))


#: where :func:`kaleido.compare.retime.retime` keeps its same-process timings, under a results folder
RETIMED_FILE = Path("timing") / "wall-time.json"


def wall_ratios(rows: list[dict], retimed: dict | None = None) -> dict[str, tuple[float, str]]:
    """Row key -> (method wall time / dense wall time, device label) for every method row whose dense time was
    measured under the same conditions: the same process or the same sweep run.

    In order of preference: ``retimed[key]`` (:func:`kaleido.compare.retime.retime`: the point's method and dense
    runs timed back to back in one process); the row's own ``dense_wall_s`` (dense generated in the same call);
    the dense row of its point (same pipeline, weights, call, prompt and seed) **from the same sweep run** (both
    rows record the same ``run``, and no two different devices).  A method row and a dense row from different
    runs - another day, another load on the machine - are never paired: their ratio would mix the two runs'
    conditions.  The label is the device the method ran on."""
    retimed = retimed or {}
    dense = {(_dense_identity(r["point"]), r.get("run")): r for r in rows
             if r.get("point", {}).get("method") == DENSE and r.get("wall_s") and r.get("run")}
    out = {}
    for r in rows:
        pt = r.get("point", {})
        key = pt.get("key")
        if pt.get("method") in (None, DENSE) or key is None or r.get("error"):
            continue
        if key in retimed:
            e = retimed[key]
            out[key] = (float(e["method_s"]) / float(e["dense_s"]), e.get("device_label") or UNKNOWN_DEVICE)
            continue
        if not r.get("wall_s"):
            continue
        t = r.get("dense_wall_s")
        if not t:
            d = dense.get((_dense_identity(pt), r.get("run")))
            if d is None:
                continue
            if device_label(r) != UNKNOWN_DEVICE and device_label(d) not in (UNKNOWN_DEVICE, device_label(r)):
                continue  # one run across machines (a Dask cluster): not a same-machine ratio
            t = d["wall_s"]
        out[key] = (float(r["wall_s"]) / float(t), device_label(r))
    return out


def load_retimed(results_dir: str | Path) -> dict:
    """The same-process timings :func:`kaleido.compare.retime.retime` kept for ``results_dir`` (none: ``{}``)."""
    f = Path(results_dir) / RETIMED_FILE
    if not f.is_file():
        return {}
    try:
        return json.loads(f.read_text())["points"]
    except (json.JSONDecodeError, KeyError) as e:
        raise ValueError(f"{f} is not a timing file ({e}); delete it and run the re-timing again") from None


def load_rows(results_dir: str | Path) -> list[dict]:
    """Every row (``*.json``) in ``results_dir``, sorted by key; unreadable files raise ``ValueError``."""
    rows = []
    d = Path(results_dir)
    if not d.is_dir():
        raise ValueError(f"results directory {str(d)!r} does not exist; run `kaleido compare --results {d}` first")
    for f in sorted(d.glob("*.json")):
        try:
            rows.append(json.loads(f.read_text()))
        except json.JSONDecodeError as e:
            raise ValueError(f"{f} is not a valid result row ({e}); delete it and resume the sweep") from None
    return rows


#: per-row payloads that only a method setting's first (prompt, seed) row needs: the report's frames and the
#: accelerator table read that row (``Aggregate.thumbs``, :func:`kaleido.report.accel.representative_row`)
BULKY_FIELDS = (("thumbs",), ("report", "extra", "hw_profile"), ("report", "extra", "accel_profile"))


def compact_rows(results_dir: str | Path) -> tuple[int, int, int]:
    """Drop :data:`BULKY_FIELDS` from every row but each method setting's first ``(prompt, seed)`` row
    (and the dense rows of the first prompt), so that a results folder can be committed.

    Quality, savings and op counts stay in every row; a compacted row lists what it lost under
    ``"compacted"``. Returns ``(rows compacted, bytes before, bytes after)``.
    """
    files = sorted(Path(results_dir).glob("*.json"))
    rows = dict(zip(files, load_rows(results_dir)))
    points = {f: r.get("point", {}) for f, r in rows.items()}
    groups: dict[tuple, list] = {}
    for f, pt in points.items():
        if "prompt" in pt and pt.get("method") != DENSE:
            groups.setdefault((pt["method"], json.dumps(pt.get("settings"), sort_keys=True)), []).append(f)
    first_prompt = min((pt["prompt"] for pt in points.values() if "prompt" in pt), default=None)
    keep = {min(fs, key=lambda f: (points[f]["prompt"], points[f]["seed"])) for fs in groups.values()}
    keep |= {f for f, pt in points.items() if pt.get("method") == DENSE and pt.get("prompt") == first_prompt}
    n, before, after = 0, 0, 0
    for f, r in rows.items():
        size = f.stat().st_size
        before += size
        dropped = []
        if f not in keep:
            for path in BULKY_FIELDS:
                parent = r
                for k in path[:-1]:
                    parent = parent.get(k, {}) if isinstance(parent, dict) else {}
                if isinstance(parent, dict) and parent.pop(path[-1], None) is not None:
                    dropped.append(".".join(path))
        if dropped:
            r["compacted"] = sorted(set(r.get("compacted", [])) | set(dropped))
            n += 1
        text = json.dumps(r, separators=(",", ":"))  # no indentation either: a third of a pretty-printed row
        if dropped or len(text) < size:
            write_atomic(f, text)
        after += f.stat().st_size
    return n, before, after


def capped_psnr(v) -> float:
    """A row's PSNR as a float ("inf" allowed), capped at :data:`PSNR_CAP_DB` so means stay finite."""
    v = float("inf") if v == "inf" else float(v)
    return min(v, PSNR_CAP_DB)


@dataclass
class SettingAggregate:
    """One method setting averaged over prompts and seeds."""

    method: str
    settings: dict
    n: int
    psnr: float
    ssim: float
    psnr_min: float
    self_qk_saved: float
    self_qk_saved_net: float  # estimation work charged against self_qk
    total_saved: float
    saved_by_kind: dict = field(default_factory=dict)
    thumbs: str | None = None
    prompt: str | None = None
    #: 95% bootstrap intervals over prompts (each prompt's seeds averaged first; :func:`kaleido.metrics.bootstrap_interval`)
    #: of the mean PSNR, SSIM and whole-transformer saving, and the number of prompts
    psnr_ci95: tuple[float, float] = (float("nan"), float("nan"))
    ssim_ci95: tuple[float, float] = (float("nan"), float("nan"))
    total_saved_ci95: tuple[float, float] = (float("nan"), float("nan"))
    prompts: int = 0
    #: mean saving over the op kinds Kaleido can reuse (``kaleido.ops.SWITCH_OF``): what calibration targets
    reusable_saved: float = 0.0
    #: median over the runs of method wall time / dense wall time, same prompt and seed (:func:`wall_ratios`;
    #: NaN: no run had a dense time to pair with), how many runs paired, and the device(s) they ran on
    wall_ratio: float = float("nan")
    wall_ratio_runs: int = 0
    wall_device: str = UNKNOWN_DEVICE

    @property
    def label(self) -> str:
        return settings_label(self.method, self.settings)

    @property
    def realised(self) -> str:
        """Where the saving is real (:func:`saving_realised`)."""
        return saving_realised(self.method, self.settings)

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d.pop("thumbs")
        d["label"] = self.label
        d["saving_realised"] = self.realised
        return d


def _prompt_interval(rows: list[dict], values: list[float]) -> tuple[float, float]:
    """95% bootstrap interval over prompts of the mean of ``values`` (one per row; a prompt's seeds averaged)."""
    by: dict[str, list[float]] = defaultdict(list)
    for r, v in zip(rows, values):
        by[r["prompt"]].append(float(v))
    return bootstrap_interval([float(np.mean(v)) for v in by.values()])


def setting_key(method: str, settings: dict) -> str:
    """What groups a method's rows into one setting: its name and settings."""
    return json.dumps([method, settings], sort_keys=True)


def setting_rows(rows: list[dict]) -> dict[str, list[dict]]:
    """:func:`setting_key` -> the method rows of that setting (dense references and refused points left out)."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        if r.get("point", {}).get("method") == DENSE or r.get("error"):
            continue
        groups[setting_key(r["method"], r["point"]["settings"])].append(r)
    return groups


def aggregate(rows: list[dict], retimed: dict | None = None) -> list[SettingAggregate]:
    """Mean quality and savings per (method, settings), over every prompt and seed (error rows skipped);
    ``retimed``: the folder's same-process timings (:func:`load_retimed`), for the wall-time ratios."""
    walls = wall_ratios(rows, retimed)
    out = []
    for rs in setting_rows(rows).values():
        psnr = [capped_psnr(r["quality"]["psnr"]) for r in rs]
        kinds = sorted({k for r in rs for k in r["report"]["saved_fraction"]})
        by_kind = {k: float(np.mean([r["report"]["saved_fraction"].get(k, 0.0) for r in rs])) for k in kinds}
        net, reusable = [], []
        for r in rs:
            oc = r["report"]["op_counts"]
            dense = oc["self_qk"]["dense_macs"]
            net.append(1.0 - (oc["self_qk"]["equiv8_macs"] + r["report"]["estimate_macs"]) / dense if dense else 0.0)
            ro = [v for k, v in oc.items() if k in SWITCH_OF]
            dense = sum(v["dense_macs"] for v in ro)
            reusable.append(1.0 - sum(v["equiv8_macs"] for v in ro) / dense if dense else 0.0)
        first = sorted(rs, key=lambda r: (r["prompt"], r["seed"]))[0]
        paired = [walls[r["point"]["key"]] for r in rs if r["point"].get("key") in walls]
        out.append(SettingAggregate(
            rs[0]["method"], rs[0]["point"]["settings"], len(rs), float(np.mean(psnr)),
            float(np.mean([r["quality"]["ssim"] for r in rs])), float(np.min(psnr)),
            by_kind.get("self_qk", 0.0), float(np.mean(net)),
            float(np.mean([r["report"]["total_saved_fraction"] for r in rs])), by_kind,
            first.get("thumbs"), first["prompt"],
            psnr_ci95=_prompt_interval(rs, psnr), ssim_ci95=_prompt_interval(rs, [r["quality"]["ssim"] for r in rs]),
            total_saved_ci95=_prompt_interval(rs, [r["report"]["total_saved_fraction"] for r in rs]),
            prompts=len({r["prompt"] for r in rs}), reusable_saved=float(np.mean(reusable)),
            wall_ratio=float(np.median([x for x, _ in paired])) if paired else float("nan"),
            wall_ratio_runs=len(paired),
            wall_device="; ".join(sorted({d for _, d in paired})) or UNKNOWN_DEVICE,
        ))
    return sorted(out, key=lambda a: (a.method, a.self_qk_saved, a.total_saved))


def errors(rows: list[dict]) -> list[dict]:
    """Rows of points a method refused (with the reason)."""
    return [r for r in rows if r.get("error")]


@dataclass
class MatchedCell:
    target: float
    psnr: float | None  # None: the method's settings do not bracket the target
    ssim: float | None
    how: str  # "interpolated between a and b" or why there is no value

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def matched_savings(aggs: list[SettingAggregate], targets=MATCH_TARGETS) -> dict[str, list[MatchedCell]]:
    """PSNR/SSIM of each method at each target self-attn q.k^T saving.

    Only a method's own Pareto-optimal settings count (a user would never pick a setting
    that another of its settings beats in both saving and PSNR; savings need not grow
    monotonically with a method's knob).  Between two of them that bracket the target the
    value is interpolated linearly; when none saves less than the target, the best
    setting saving more is used (a conservative value); it is never extrapolated.
    """
    by_method: dict[str, list[SettingAggregate]] = defaultdict(list)
    for a in aggs:
        by_method[a.method].append(a)
    out = {}
    for m, allpts in sorted(by_method.items()):
        front = pareto_front([(a.self_qk_saved, a.psnr) for a in allpts])
        pts = sorted((allpts[i] for i in front), key=lambda a: a.self_qk_saved)
        cells = []
        for t in targets:
            cell = MatchedCell(t, None, None, "")
            exact = [a for a in pts if abs(a.self_qk_saved - t) < 0.005]
            lo = [a for a in pts if a.self_qk_saved < t]
            hi = [a for a in pts if a.self_qk_saved > t]
            if exact:
                a = max(exact, key=lambda a: a.psnr)
                cell = MatchedCell(t, a.psnr, a.ssim, f"at {a.label} ({100 * a.self_qk_saved:.1f}%)")
            elif lo and hi:
                a, b = lo[-1], hi[0]
                w = (t - a.self_qk_saved) / (b.self_qk_saved - a.self_qk_saved)
                cell = MatchedCell(t, a.psnr + w * (b.psnr - a.psnr), a.ssim + w * (b.ssim - a.ssim),
                                   f"interpolated: {a.label} ({100 * a.self_qk_saved:.1f}%) .. "
                                   f"{b.label} ({100 * b.self_qk_saved:.1f}%)")
            elif hi:
                b = max(hi, key=lambda a: a.psnr)
                cell = MatchedCell(t, b.psnr, b.ssim, f"at {b.label}, which saves more ({100 * b.self_qk_saved:.1f}%): "
                                                      "no Pareto setting below the target")
            else:
                rng = f"{100 * pts[0].self_qk_saved:.1f}%..{100 * pts[-1].self_qk_saved:.1f}%"
                cell.how = f"not reached: its settings save {rng} of self-attn q.k^T"
            cells.append(cell)
        out[m] = cells
    return out


#: the quality level of :func:`ranking_at_quality` (the peers' 30 dB)
RANK_MIN_PSNR_DB = 30.0


@dataclass
class RankedMethod:
    """A method's setting that saves the most of the whole transformer at mean PSNR >= the level."""

    method: str
    best: SettingAggregate | None  #: None: no setting of the method reaches the level
    best_psnr: float  #: the method's highest mean PSNR (for "not reached" rows)
    realised: str = "unclassified"  #: where its saving is real (:func:`saving_realised`)
    #: the simulated accelerator's speedup of ``best`` per workload (:func:`accelerator_speedups`; empty: none)
    accel: list[dict] = field(default_factory=list)

    @property
    def where(self) -> str:
        """:attr:`realised` with the simulated speedups (:func:`where_text`)."""
        return where_text(self.realised, self.accel)

    def to_dict(self) -> dict:
        b = self.best
        return {"method": self.method, "label": None if b is None else b.label,
                "psnr": None if b is None else b.psnr, "psnr_ci95": None if b is None else list(b.psnr_ci95),
                "total_saved": None if b is None else b.total_saved,
                "total_saved_ci95": None if b is None else list(b.total_saved_ci95),
                "runs": None if b is None else b.n, "best_psnr": self.best_psnr,
                "wall_ratio": None if b is None or math.isnan(b.wall_ratio) else b.wall_ratio,
                "wall_ratio_runs": None if b is None else b.wall_ratio_runs,
                "wall_device": None if b is None else b.wall_device,
                "saving_realised": self.realised, "accelerator_speedups": list(self.accel)}


def ranking_at_quality(aggs: list[SettingAggregate], min_psnr: float = RANK_MIN_PSNR_DB,
                       accel: dict[str, list[dict]] | None = None) -> list[RankedMethod]:
    """Every method ranked by the whole-transformer saving of its best setting with mean PSNR >= ``min_psnr``
    (methods none of whose settings reach it last, by their best PSNR; equal savings: the higher PSNR, as
    :func:`kaleido.report.accel.representatives` picks).  A stack counts as its own method, one per step
    cache + technique pair (``taylorseer + kaleido``).

    ``accel``: :func:`accelerator_speedups` of accelerator tables built at the same PSNR level (each design at
    the same most-saving setting); a method's entry is attached to its row."""
    by: dict[str, list[SettingAggregate]] = defaultdict(list)
    for a in aggs:
        name = a.method
        if a.method == "stack":
            name = " + ".join(t["technique"] for t in a.settings.get("techniques", ()))
        by[name].append(a)
    out = []
    for name, pts in by.items():
        ok = [a for a in pts if a.psnr >= min_psnr]
        best = max(ok, key=lambda a: (a.total_saved, a.psnr)) if ok else None
        speedups = (accel or {}).get(name, []) if best is not None and best.method == name else []
        out.append(RankedMethod(name, best, max(a.psnr for a in pts), pts[0].realised, list(speedups)))
    return sorted(out, key=lambda r: (r.best is None, -(r.best.total_saved if r.best else r.best_psnr)))


def accelerator_speedups(tables: list[dict]) -> dict[str, list[dict]]:
    """Method -> ``[{"workload", "speedup_vs_dense", "figure"}]``: each design's simulated speedup over the dense
    array in accelerator tables (:func:`kaleido.report.accel.design_table`'s dicts), for the designs that stand
    for a method's own rows: ``figure`` is ``"trace-replayed"``, ``"upper bound"`` (a row without a trace) or
    ``"measured profile"`` (Kaleido's).  The dense array and a Kaleido design simulated from the synthetic
    example profile are left out."""
    out: dict[str, list[dict]] = defaultdict(list)
    for t in tables:
        for d in t.get("designs", ()):
            m = d.get("method")
            if m is None or str(d.get("source", "")).startswith("SYNTHETIC"):
                continue
            figure = ("measured profile" if "replayed" not in d else
                      "trace-replayed" if d["replayed"] else "upper bound")
            out[m].append({"workload": t["workload"], "speedup_vs_dense": float(d["speedup_vs_dense"]),
                           "figure": figure})
    return dict(out)


def where_text(realised: str, accel: list[dict] | None = None) -> str:
    """``realised`` with the simulated accelerator speedups, e.g. ``"needs the accelerator (simulated: 1.12x
    wan-1.3b-480p, 1.14x hunyuan-720p)"``; an upper-bound figure says so."""
    if not accel:
        return realised
    figs = ", ".join(f"{a['speedup_vs_dense']:.2f}x {a['workload']}" + (" (upper bound)" if a["figure"] == "upper bound"
                                                                          else "") for a in accel)
    return f"{realised} (simulated: {figs})"


def fmt_ratio(x: float | None) -> str:
    """A wall-time ratio as ``"0.50x"`` (``"-"``: none measured)."""
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2f}x"


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the points not dominated in (saving up, PSNR up)."""
    idx = []
    for i, (s, q) in enumerate(points):
        if not any((s2 >= s and q2 >= q) and (s2 > s or q2 > q) for j, (s2, q2) in enumerate(points) if j != i):
            idx.append(i)
    return idx


def plot_series(a: SettingAggregate) -> str:
    """The line a setting is drawn on: its method, with Kaleido's two setting families apart
    (every op reused vs self-attention q.k^T only; joined, they would zig-zag)."""
    if a.method == "kaleido" and a.settings.get("proj") is False and a.settings.get("ffn") is False:
        return "kaleido (self-attn q.k^T only)"
    if a.method == "stack":  # one line per combination of techniques, e.g. "taylorseer+kaleido"
        return "+".join(t["technique"] for t in a.settings.get("techniques", ()))
    return a.method


def pareto_figure(aggs: list[SettingAggregate], fmt: str = "png") -> bytes:
    """Quality (PSNR) vs savings: self-attn q.k^T (left) and the whole transformer (right)."""
    import matplotlib

    from kaleido.compare.presentation import colour_of  # how each technique is drawn

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6), sharey=True)
    for ax, attr, title in ((axes[0], "self_qk_saved", "self-attention q.k$^T$"),
                            (axes[1], "total_saved", "whole transformer (blocks, estimates included)")):
        allpts = [(getattr(a, attr), a.psnr) for a in aggs]
        front = set(pareto_front(allpts))
        by_m = defaultdict(list)
        for i, a in enumerate(aggs):
            by_m[(plot_series(a), a.method)].append((getattr(a, attr), a.psnr, i in front))
        for (series, method), pts in sorted(by_m.items()):
            pts.sort()
            xs, ys = [100 * p[0] for p in pts], [p[1] for p in pts]
            ax.plot(xs, ys, "--o" if series != method else "-o", color=colour_of(method), label=series,
                    lw=2.5 if method == "kaleido" else 1.2, ms=6 if method == "kaleido" else 4)
            for x, y, f in pts:
                if f:
                    ax.plot([100 * x], [y], "o", ms=11, mfc="none", mec="black", mew=1)
        for t in MATCH_TARGETS:
            if attr == "self_qk_saved":
                ax.axvline(100 * t, color="grey", ls=":", lw=1)
        ax.set_xlabel(f"8-bit-equivalent MACs saved, {title} (%)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("PSNR vs dense (dB, mean over prompts x seeds)")
    if axes[1].get_legend_handles_labels()[1]:  # no settings, no lines: no legend (matplotlib would warn)
        axes[1].legend(fontsize=8, loc="best")
    fig.suptitle("Quality vs savings (circled: Pareto-optimal among all methods)")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=110)
    plt.close(fig)
    return buf.getvalue()


def summary_table(aggs: list[SettingAggregate]) -> list[dict]:
    return [a.to_dict() for a in aggs]


def fmt_pct(x: float | None) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}%"
