"""Configuration of one reuse GEMM: thresholds, low-bit width, metric, quantisation (SPEC §3).

Thresholds are in int8 units of the quantised operand ``A_q``: a row-group whose
difference ``d = A_q[i, g] - eff(ref(i), g)`` has ``metric(d) < theta1`` is fully
reused, ``theta1 <= metric(d) < theta2`` (and every ``|d|`` fits in ``low_bits``
signed bits) is partially reused, anything else is computed.

A per-step schedule is plain data, so a config round-trips through JSON:

* ``dense_steps``: the first ``dense_steps`` denoising steps run dense;
* ``schedule``: ``((start_fraction, theta1, theta2), ...)`` sorted by
  ``start_fraction`` in ``[0, 1]``; from step ``s`` of ``n`` on, where
  ``s / n >= start_fraction``, that entry's thresholds replace the base ones.

:meth:`ReuseConfig.at_step` resolves a schedule into the plain config of one step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

#: Distance between a row's operand and its reference's effective operand, per group.
METRICS = ("linf", "mean_abs")
#: Quantisation scale of the operand: per (matrix, group), per matrix ("head"), or one.
GRANULARITIES = ("group", "head", "tensor")


def _check_thresholds(theta1: float, theta2: float, low_bits: int, metric: str, where: str) -> tuple[float, float]:
    try:
        t1, t2 = float(theta1), float(theta2)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: thresholds must be numbers, got theta1={theta1!r}, theta2={theta2!r}") from None
    if not (math.isfinite(t1) and math.isfinite(t2)):
        raise ValueError(f"{where}: thresholds must be finite, got theta1={t1}, theta2={t2}")
    if t1 < 0 or t2 < 0:
        raise ValueError(f"{where}: thresholds must be >= 0 (int8 units), got theta1={t1}, theta2={t2}")
    if t1 > t2:
        raise ValueError(
            f"{where}: theta1={t1} > theta2={t2}; the FULL band [0, theta1) must lie below the "
            "PARTIAL band [theta1, theta2): swap them or lower theta1"
        )
    limit = 2 ** (low_bits - 1)
    if metric == "linf" and t2 > limit:
        raise ValueError(
            f"{where}: theta2={t2} > 2**(low_bits-1)={limit}: with metric 'linf' the PARTIAL band "
            f"would hold differences up to {math.ceil(t2) - 1} that do not fit in {low_bits} signed bits "
            f"(inexact reuse); use theta2 <= {limit} or raise low_bits"
        )
    return t1, t2


@dataclass(frozen=True)
class ReuseConfig:
    """Thresholds and arithmetic of a reuse GEMM; validated on construction.

    ``theta1``/``theta2``: FULL and PARTIAL thresholds in int8 units.
    ``low_bits``: width of the signed difference a PARTIAL multiply takes (1..7).
    ``metric``: ``"linf"`` (``max|d|``, default) or ``"mean_abs"`` (``mean|d|``).
    ``granularity``: quantisation scale of the operand ``A``: ``"group"`` (one per
    matrix and channel group, default), ``"head"`` (one per matrix), ``"tensor"``.
    ``dense_steps``/``schedule``: per-step schedule, see the module docstring.
    """

    theta1: float
    theta2: float
    low_bits: int = 4
    metric: str = "linf"
    granularity: str = "group"
    dense_steps: int = 0
    schedule: tuple[tuple[float, float, float], ...] = field(default=())

    def __post_init__(self) -> None:
        lb = self.low_bits
        if isinstance(lb, bool) or not isinstance(lb, int) or not 1 <= lb <= 7:
            raise ValueError(
                f"low_bits={lb!r} is outside 1..7: a PARTIAL multiply takes a signed difference "
                "narrower than the 8-bit operand"
            )
        if self.metric not in METRICS:
            raise ValueError(f"unknown metric {self.metric!r}: use one of {METRICS}")
        if self.granularity not in GRANULARITIES:
            raise ValueError(f"unknown quantisation granularity {self.granularity!r}: use one of {GRANULARITIES}")
        t1, t2 = _check_thresholds(self.theta1, self.theta2, lb, self.metric, "ReuseConfig")
        object.__setattr__(self, "theta1", t1)
        object.__setattr__(self, "theta2", t2)
        ds = self.dense_steps
        if isinstance(ds, bool) or not isinstance(ds, int) or ds < 0:
            raise ValueError(f"dense_steps must be an int >= 0, got {ds!r}")
        entries = []
        for k, entry in enumerate(self.schedule):
            try:
                frac, s1, s2 = entry
                frac = float(frac)
            except (TypeError, ValueError):
                raise ValueError(
                    f"schedule[{k}]={entry!r}: each entry must be (start_fraction, theta1, theta2)"
                ) from None
            if not (math.isfinite(frac) and 0.0 <= frac <= 1.0):
                raise ValueError(f"schedule[{k}]: start_fraction={frac} must lie in [0, 1]")
            s1, s2 = _check_thresholds(s1, s2, lb, self.metric, f"schedule[{k}]")
            entries.append((frac, s1, s2))
        fracs = [e[0] for e in entries]
        if fracs != sorted(fracs):
            raise ValueError(f"schedule start fractions must be sorted ascending, got {fracs}")
        object.__setattr__(self, "schedule", tuple(entries))

    # -- constructors ---------------------------------------------------------------
    @classmethod
    def dense(cls, low_bits: int = 4, metric: str = "linf", granularity: str = "group") -> "ReuseConfig":
        """Thresholds 0: every row computes, the result is the dense GEMM's."""
        return cls(0.0, 0.0, low_bits, metric, granularity)

    # -- schedule -------------------------------------------------------------------
    @property
    def has_schedule(self) -> bool:
        return self.dense_steps > 0 or bool(self.schedule)

    @property
    def is_dense(self) -> bool:
        """True when no row can be reused (``theta2 == 0``) and there is no schedule."""
        return self.theta2 == 0.0 and not self.has_schedule

    def at_step(self, step: int, num_steps: int) -> "ReuseConfig":
        """The plain (schedule-free) config of denoising step ``step`` (0-based) of ``num_steps``.

        Returns ``self`` when there is no schedule.
        """
        if not self.has_schedule:
            return self
        if num_steps < 1 or not 0 <= step < num_steps:
            raise ValueError(f"step {step} of {num_steps}: need num_steps >= 1 and 0 <= step < num_steps")
        base = replace(self, dense_steps=0, schedule=())
        if step < self.dense_steps:
            return replace(base, theta1=0.0, theta2=0.0)
        frac = step / num_steps
        t1, t2 = self.theta1, self.theta2
        for start, s1, s2 in self.schedule:
            if frac >= start:
                t1, t2 = s1, s2
        return replace(base, theta1=t1, theta2=t2)

    # -- serialisation --------------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "theta1": self.theta1,
            "theta2": self.theta2,
            "low_bits": self.low_bits,
            "metric": self.metric,
            "granularity": self.granularity,
            "dense_steps": self.dense_steps,
            "schedule": [list(e) for e in self.schedule],
        }

    @classmethod
    def from_dict(cls, d: dict) -> "ReuseConfig":
        known = {"theta1", "theta2", "low_bits", "metric", "granularity", "dense_steps", "schedule"}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"ReuseConfig dict has unknown keys {sorted(unknown)}; known: {sorted(known)}")
        try:
            return cls(
                d["theta1"],
                d["theta2"],
                int(d.get("low_bits", 4)),
                str(d.get("metric", "linf")),
                str(d.get("granularity", "group")),
                int(d.get("dense_steps", 0)),
                tuple(tuple(e) for e in d.get("schedule", ())),
            )
        except KeyError as e:
            raise ValueError(f"ReuseConfig dict is missing key {e.args[0]!r}: need theta1, theta2") from None
