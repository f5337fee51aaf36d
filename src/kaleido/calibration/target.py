"""Calibrate a KaleidoConfig to a quality or savings target (``kaleido calibrate --target-*``).

Search, on calibration prompts (dense references computed once per prompt and seed; each
candidate costs one Kaleido generation per calibration prompt and seed):

1. ``default``: the base config as given (the hand-written default unless ``--config``).
2. ``axes``: per layer, the reuse axes with the lowest median Delta in the
   characterisation (given as ``axes_layers``: :func:`kaleido.characterize.suggest.suggested_axes`);
   kept unless the base config beats it on both PSNR and savings.
3. ``scale/<family>``: one scale ``s`` on every enabled op's base thresholds
   (``theta = min(s * theta_base, 2**(low_bits-1))``; ``s = 1`` is the base config),
   bisected for the target, for the family ``all`` (every op of the base config) and
   ``qk_only`` (only self-attention q.k^T reuses); the better one is kept.
4. ``warmup``: one dense warm-up step more (tried at the next, more aggressive scale for a PSNR
   target) and one less.
5. ``schedule``: from 75% (then 50%) of the steps on, self-attention q.k^T at its widest FULL
   band - late, low-noise steps are the most alike (the characterisation's layer x step maps).
6. ``layers`` (PSNR targets): greedily, per layer (most alike layers first: ``layer_order``), self-attention
   q.k^T at its widest FULL band (``theta1 = theta2 = 2**(low_bits-1)``); kept when the
   target still holds and the saving grows.
7. ``ops``: each enabled op other than self-attention q.k^T, the least-saving first, switched off;
   kept off when the target still holds and the saving falls by less than ``op_min_saving`` (an op
   that saves less than that does not pay for its decision's time: on a CPU or GPU the float path's
   decision is pure overhead, and on the accelerator a little area and energy).

PSNR falls and savings grow with ``s`` (each op's FULL and PARTIAL bands only widen), so
the feasible scales are an interval and bisection finds its end.  The chosen config is
then measured on held-out prompts (:func:`kaleido.calibration.calibrate_to_target_on_prompts` runs the
whole of it on a pipeline).  Every candidate is in the search trace.  The search reads no
characterisation itself, so this module does not import :mod:`kaleido.characterize` (which builds on
the integration).
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

from kaleido.evaluation.runs import Measure

from kaleido.ops import SWITCH_OF

from kaleido.techniques.kaleido_reuse.config import OP_SWITCHES, KaleidoConfig

#: PSNR targets outside this range (dB) are refused: above ~100 dB the float32 frames of a
#: reuse run and of the dense run are indistinguishable from rounding noise.
PSNR_TARGET_RANGE_DB = (10.0, 100.0)
SAVINGS_OF = ("self_qk", "whole_transformer", "reusable_ops")


@dataclass(frozen=True)
class Target:
    """``kind`` ``"psnr"`` (mean PSNR vs dense >= ``value`` dB, then most savings) or ``"savings"``
    (8-bit-equivalent MAC savings of ``savings_of`` >= ``value``, then highest PSNR)."""

    kind: str
    value: float
    savings_of: str = "self_qk"

    def __post_init__(self) -> None:
        if self.kind not in ("psnr", "savings"):
            raise ValueError(f"target kind {self.kind!r}: use 'psnr' or 'savings'")
        v = float(self.value)
        if not math.isfinite(v):
            raise ValueError(f"target value {self.value!r} must be finite")
        lo, hi = PSNR_TARGET_RANGE_DB
        if self.kind == "psnr" and not lo <= v <= hi:
            raise ValueError(f"target PSNR {v:g} dB is impossible to calibrate for: use {lo:g}..{hi:g} dB "
                             "(a reuse run differs from dense by more than float rounding)")
        if self.kind == "savings" and not 0.0 < v < 1.0:
            raise ValueError(f"target savings {v:g} must lie in (0, 1) (a fraction of the dense MACs), e.g. 0.6")
        if self.savings_of not in SAVINGS_OF:
            raise ValueError(f"savings_of={self.savings_of!r}: use one of {SAVINGS_OF}")
        object.__setattr__(self, "value", v)

    def feasible(self, m: "Measure") -> bool:
        return m.psnr_mean_db >= self.value if self.kind == "psnr" else m.saved(self.savings_of) >= self.value

    def objective(self, m: "Measure") -> float:
        """Larger is better among feasible candidates."""
        return m.saved(self.savings_of) if self.kind == "psnr" else m.psnr_mean_db

    def shortfall(self, m: "Measure") -> float:
        """How far ``m`` is from the target (0 when met): dB for PSNR, fraction for savings."""
        got = m.psnr_mean_db if self.kind == "psnr" else m.saved(self.savings_of)
        return max(0.0, self.value - got)

    def raised_by(self, margin: float) -> "Target":
        """This target ``margin`` stricter (in its unit: dB, or a fraction): what a search with a guard band
        aims at, so that prompts it did not see still meet this one."""
        return Target(self.kind, self.value + margin, self.savings_of)

    def describe(self) -> str:
        return (f"mean PSNR >= {self.value:g} dB" if self.kind == "psnr"
                else f"{self.savings_of} savings >= {self.value:.1%}")

    def to_dict(self) -> dict:
        return {"kind": self.kind, "value": self.value, "savings_of": self.savings_of, "text": self.describe()}


@dataclass(frozen=True)
class SearchPoint:
    """One point of the search space (see the module docstring)."""

    scale: float = 1.0
    family: str = "all"
    dense_steps: int | None = None  # None: the base config's
    max_layers: tuple[int, ...] = ()
    axes: bool = True
    late_from: float | None = None  # from this fraction of the steps on, self-attn q.k^T at its widest band
    off: tuple[str, ...] = ()  # op switches of the family turned off (the ``ops`` stage)

    def to_dict(self) -> dict:
        return {"scale": round(self.scale, 6), "family": self.family, "dense_steps": self.dense_steps,
                "max_layers": list(self.max_layers), "axes": self.axes, "late_from": self.late_from,
                "off": list(self.off)}


@dataclass
class Candidate:
    stage: str
    point: SearchPoint
    config: KaleidoConfig
    measure: Measure
    feasible: bool

    def to_dict(self) -> dict:
        return {"stage": self.stage, "point": self.point.to_dict(), "feasible": self.feasible,
                **self.measure.to_dict(), "config": self.config.to_dict()}


def _cap(low_bits: int) -> float:
    return float(2 ** (low_bits - 1))


def scaled_thresholds(theta1: float, theta2: float, low_bits: int, scale: float) -> tuple[float, float]:
    """``(theta1, theta2)`` times ``scale``, both capped at ``2**(low_bits-1)``, ``theta1 <= theta2``."""
    cap = _cap(low_bits)
    t1 = min(scale * theta1, cap)
    t2 = min(max(scale * theta2, t1), cap)
    return round(t1, 4), round(max(t1, t2), 4)


def max_scale(base: KaleidoConfig, switches: Sequence[str]) -> float:
    """The scale at which every listed op's theta1 reaches its cap."""
    s = 1.0
    for sw in switches:
        rc = base.reuse_config(sw, 0)
        if rc.theta1 > 0:
            s = max(s, _cap(rc.low_bits) / rc.theta1)
        elif rc.theta2 > 0:
            s = max(s, _cap(rc.low_bits) / rc.theta2)
    return s


def family_switches(base: KaleidoConfig, family: str) -> tuple[str, ...]:
    on = tuple(sw for sw in OP_SWITCHES if base.ops[sw].enabled)
    if family == "all":
        return on
    if family == "qk_only":
        return tuple(sw for sw in on if sw == "self_qk")
    raise ValueError(f"unknown op family {family!r}: use 'all' or 'qk_only'")


def build_config(base: KaleidoConfig, axes_layers: dict, point: SearchPoint) -> KaleidoConfig:
    """The KaleidoConfig of ``point`` on ``base`` (``axes_layers``: per-layer axes overrides)."""
    on = tuple(sw for sw in family_switches(base, point.family) if sw not in point.off)
    ops = {}
    for sw, op in base.ops.items():
        if sw not in on:
            ops[sw] = dataclasses.replace(op, enabled=False) if op.enabled else op
            continue
        rc = base.reuse_config(sw, 0)
        t1, t2 = scaled_thresholds(rc.theta1, rc.theta2, rc.low_bits, point.scale)
        reuse = {**op.reuse, "theta1": t1, "theta2": t2}
        if "schedule" in reuse or rc.schedule:
            reuse["schedule"] = [[f, *scaled_thresholds(a, b, rc.low_bits, point.scale)] for f, a, b in rc.schedule]
        if sw == "self_qk" and point.late_from is not None:
            cap = _cap(rc.low_bits)
            kept = [e for e in reuse.get("schedule", []) if e[0] < point.late_from]
            reuse["schedule"] = [*kept, [point.late_from, cap, cap]]
        if point.dense_steps is not None:
            reuse["dense_steps"] = point.dense_steps
        ops[sw] = dataclasses.replace(op, reuse=reuse)
    reuse = base.reuse if point.dense_steps is None else dataclasses.replace(base.reuse, dense_steps=point.dense_steps)
    layers = {k: {sw: dict(p) for sw, p in v.items()} for k, v in base.layers.items()}
    if point.axes:
        for key, patch in axes_layers.items():
            for sw, p in patch.items():
                layers.setdefault(key, {}).setdefault(sw, {}).update(p)
    for layer in point.max_layers:
        cap = _cap(base.reuse_config("self_qk", layer).low_bits)
        layers.setdefault(str(layer), {}).setdefault("self_qk", {}).update({"theta1": cap, "theta2": cap})
    return KaleidoConfig(reuse=reuse, ops=ops, layers=layers, record_maps=base.record_maps)


@dataclass
class TargetCalibration:
    """The search's outcome: the chosen config and every candidate tried."""

    target: Target
    chosen: Candidate
    default: Candidate
    scaled_default: Candidate | None
    candidates: list[Candidate]
    axes_layers: dict
    notes: list[str] = field(default_factory=list)

    @property
    def met_on_calibration(self) -> bool:
        return self.chosen.feasible

    def to_dict(self) -> dict:
        return {
            "target": self.target.to_dict(),
            "met_on_calibration": self.met_on_calibration,
            "shortfall_on_calibration": self.target.shortfall(self.chosen.measure),
            "chosen": self.chosen.to_dict(),
            "default_on_calibration": self.default.to_dict(),
            "scaled_default_on_calibration": None if self.scaled_default is None else self.scaled_default.to_dict(),
            "axes_from_characterization": self.axes_layers,
            "notes": list(self.notes),
            "search_trace": [
                {k: v for k, v in c.to_dict().items() if k != "config"} for c in self.candidates
            ],
        }


class _Search:
    def __init__(self, base, axes_layers, evaluate, target, budget, bisect_steps, log):
        self.base, self.axes_layers, self.evaluate, self.target = base, axes_layers, evaluate, target
        self.budget, self.bisect_steps, self.log = budget, bisect_steps, log
        self.candidates: list[Candidate] = []
        self._cache: dict[str, Candidate] = {}
        self.notes: list[str] = []

    @property
    def left(self) -> int:
        return self.budget - len(self._cache)

    def run(self, stage: str, point: SearchPoint) -> Candidate | None:
        cfg = build_config(self.base, self.axes_layers, point)
        key = cfg.to_json()
        if key in self._cache:
            return self._cache[key]
        if self.left <= 0:
            return None
        m = self.evaluate(cfg)
        c = Candidate(stage, point, cfg, m, self.target.feasible(m))
        self._cache[key] = c
        self.candidates.append(c)
        self.log(f"[{len(self._cache):2d}] {stage:14s} s={point.scale:.3f} {point.family:7s} "
                 f"warmup={point.dense_steps} late@max={point.late_from} layers@max={list(point.max_layers)}"
                 f"{' off=' + ','.join(point.off) if point.off else ''}: "
                 f"PSNR {m.psnr_mean_db:.2f} dB, "
                 f"q.k^T saved {m.saved('self_qk'):.1%}, transformer saved {m.saved('whole_transformer'):.1%}"
                 f"{'' if c.feasible else '  (misses target)'}")
        return c

    def better(self, a: Candidate | None, b: Candidate | None) -> Candidate | None:
        """The better of two candidates: feasible first, then objective, then smaller shortfall."""
        if a is None or b is None:
            return a or b
        if a.feasible != b.feasible:
            return a if a.feasible else b
        if a.feasible:
            return a if self.target.objective(a.measure) >= self.target.objective(b.measure) else b
        return a if self.target.shortfall(a.measure) <= self.target.shortfall(b.measure) else b

    def fit(self, stage: str, make: Callable[[float], SearchPoint], lo: float, hi: float,
            steps: int) -> tuple[Candidate | None, float | None]:
        """Best candidate of ``make(s)`` for ``s`` in [lo, hi] (the favourable end first, then bisection),
        and the nearest scale known to miss the target on the favourable side (``None``: none missed)."""
        psnr = self.target.kind == "psnr"
        good, safe = (hi, lo) if psnr else (lo, hi)
        best, bad = None, None
        if psnr or good > 0:  # for a savings target, s = 0 (dense) never saves anything
            best = self.run(stage, make(good))
            if best is None or best.feasible:
                return best, None
            bad = good
        edge = good
        for _ in range(steps):
            mid = 0.5 * (edge + safe)
            c = self.run(stage, make(mid))
            if c is None:
                break
            best = self.better(best, c)
            if c.feasible:
                safe = mid
            else:
                edge = bad = mid
        if best is None or not best.feasible:
            best = self.better(best, self.run(stage, make(safe)))
        return best, bad


def calibrate_to_target(
    base: KaleidoConfig,
    evaluate: Callable[[KaleidoConfig], Measure],
    target: Target,
    axes_layers: dict | None = None,
    layer_order: Sequence[int] = (),
    budget: int = 16,
    bisect_steps: int = 3,
    late_fractions: Sequence[float] = (0.75, 0.5),
    op_min_saving: float = 0.01,
    log: Callable[[str], None] = lambda s: None,
) -> TargetCalibration:
    """Search reuse axes, thresholds, warm-up and per-layer settings for ``target``.

    ``evaluate(config) -> Measure`` generates the calibration prompts with ``config`` and
    compares them with their dense references.  ``axes_layers``: per-layer axes overrides to try
    (``{layer: {switch: {"axes": [...]}}}``, e.g. what a characterisation suggests,
    :func:`kaleido.characterize.suggest.suggested_axes`); ``layer_order``: the self-attention layers the
    per-layer stage tries at their widest band, in this order (most alike first,
    :func:`kaleido.characterize.suggest.layers_by_likeness`; empty: no per-layer stage).
    ``budget``: most candidate evaluations.  ``op_min_saving``: the ``ops`` stage turns an op off when that
    costs less than this much of the target's saving (a fraction, e.g. 0.01 = 1 point; 0: no ``ops`` stage).
    """
    if not 0.0 <= op_min_saving < 1.0:
        raise ValueError(f"op_min_saving={op_min_saving}: give a fraction of the saving in [0, 1), e.g. 0.01")
    if budget < 2:
        raise ValueError(f"budget={budget}: the search needs at least 2 candidate evaluations")
    if bisect_steps < 1:
        raise ValueError(f"bisect_steps={bisect_steps} must be >= 1")
    if not family_switches(base, "all"):
        raise ValueError("the base config enables no op: nothing to calibrate")
    axes_layers = dict(axes_layers or {})
    S = _Search(base, axes_layers, evaluate, target, budget, bisect_steps, log)
    psnr = target.kind == "psnr"

    default = S.run("default", SearchPoint(axes=False))
    cur = default
    use_axes = False
    if axes_layers:
        ax = S.run("axes", SearchPoint(axes=True))
        dominated = (default.measure.psnr_mean_db >= ax.measure.psnr_mean_db
                     and default.measure.saved(target.savings_of) >= ax.measure.saved(target.savings_of)
                     and (default.measure.psnr_mean_db, default.measure.saved(target.savings_of))
                     != (ax.measure.psnr_mean_db, ax.measure.saved(target.savings_of)))
        use_axes = not dominated
        if not use_axes:
            S.notes.append("the characterisation's axes did worse than the base axes on both PSNR and savings: kept the base axes")
        cur = ax if use_axes else default

    # -- scale, per op family --------------------------------------------------------------
    per_family: dict[str, tuple[Candidate, float | None]] = {}
    for family in ("all", "qk_only"):
        switches = family_switches(base, family)
        if not switches or (family == "qk_only" and switches == family_switches(base, "all")):
            continue
        smax = max_scale(base, switches)
        c, bad = S.fit(f"scale/{family}", lambda s, f=family: SearchPoint(s, f, None, (), use_axes), 0.0, smax,
                       bisect_steps)
        if c is not None:
            per_family[family] = (c, bad)
    scaled_default = per_family["all"][0] if "all" in per_family else None
    bad_scale = None
    for c, bad in per_family.values():
        if S.better(cur, c) is c:
            cur, bad_scale = c, bad

    # -- dense warm-up steps: one more buys quality and costs savings, one less the reverse ----------
    p = cur.point
    d0 = p.dense_steps if p.dense_steps is not None else base.reuse.dense_steps
    s_next = bad_scale if bad_scale is not None else p.scale  # the next scale that missed the target
    for d in (d0 + 1, d0 - 1):
        if d < 0 or S.left <= 0:
            continue
        # PSNR target: d0+1 may now hold at the next, more aggressive scale; d0-1 may still hold at this one.
        # Savings target: d0+1 may still save enough at this scale; d0-1 may now save enough at the next, lower one.
        s = s_next if (d > d0) == psnr else p.scale
        c = S.run("warmup", SearchPoint(s, p.family, d, p.max_layers, use_axes))
        cur = S.better(cur, c)

    # -- step schedule: late, low-noise steps (the most alike) at the widest q.k^T band ---------------
    if "self_qk" in family_switches(base, cur.point.family):
        for frac in late_fractions:
            if S.left <= 0:
                break
            p = cur.point
            s = p.scale if psnr else (s_next if s_next < p.scale else p.scale)
            try:
                c = S.run("schedule", dataclasses.replace(p, scale=s, late_from=frac))
            except ValueError as e:
                if "schedule" not in str(e):
                    raise
                S.notes.append(f"schedule stage skipped: {e}")
                break
            cur = S.better(cur, c)

    # -- per layer: self-attention q.k^T at its widest band ----------------------------------
    if psnr and cur.feasible and "self_qk" in family_switches(base, cur.point.family) and layer_order:
        for layer in layer_order:
            if S.left <= 0:
                break
            p = cur.point
            rc = base.reuse_config("self_qk", layer)
            if layer in p.max_layers or scaled_thresholds(rc.theta1, rc.theta2, rc.low_bits, p.scale)[0] >= _cap(rc.low_bits):
                continue  # already at its widest band
            c = S.run("layers", dataclasses.replace(p, max_layers=tuple(sorted((*p.max_layers, layer)))))
            cur = S.better(cur, c)
    elif not psnr:
        S.notes.append("per-layer stage skipped: it is run for PSNR targets only")

    # -- ops: switch off what saves too little for its decision's time --------------------------
    if op_min_saving > 0 and cur.feasible:
        def op_saving(sw: str) -> float:  # the mean saving of the op kinds a switch covers
            kinds = [k for k, v in SWITCH_OF.items() if v == sw]
            return sum(cur.measure.saved(k) for k in kinds) / max(1, len(kinds))

        for sw in sorted((sw for sw in family_switches(base, cur.point.family) if sw != "self_qk"), key=op_saving):
            if S.left <= 0:
                break
            c = S.run("ops", dataclasses.replace(cur.point, off=tuple(sorted((*cur.point.off, sw)))))
            if c is not None and c.feasible and (cur.measure.saved(target.savings_of)
                                                 - c.measure.saved(target.savings_of)) < op_min_saving:
                cur = c
    elif op_min_saving > 0:
        S.notes.append("ops stage skipped: no candidate met the target, so none can be made cheaper")
    if S.left <= 0:
        S.notes.append(f"the search used its whole budget of {budget} candidate evaluations")
    return TargetCalibration(target, cur, default, scaled_default, S.candidates, axes_layers if use_axes else {},
                             S.notes)


def save_json(path, data: dict) -> None:
    from kaleido.atomic import write_atomic

    write_atomic(path, json.dumps(data, indent=1))
