"""Techniques stacked on one transformer: a step cache, and one method that decides ops.

``make_method("stack", techniques=[{"technique": "taylorseer", "cache_interval": 3},
{"technique": "kaleido", "theta1": 32, "theta2": 64, "low_bits": 7}])`` applies each
technique in order to the same transformer and removes them in reverse.  What composes,
and why the accounting does:

* a step cache (PAB, FirstBlockCache, TaylorSeer, MagCache) decides which block *units*
  (self-attention, cross-attention, FFN) run on a call; a unit it serves from the cache
  never runs, so nothing inside it is computed or decided by the other technique;
* the other technique (Kaleido, or any op-level baseline) decides how the units that
  run are computed.  Every handle counts, per op kind, the units that really ran
  (:mod:`kaleido.baselines.base`), so a skipped unit is charged nothing by every handle,
  and the op-level technique charges the units that ran by its own decisions (Kaleido:
  its trace's mode maps).

The stacked report takes each op kind from the technique that decides it (``claims``;
Kaleido: the op kinds its trace covers) and every other op kind from the execution-based
count, which every handle keeps alike; ``extra["op_source"]`` says which technique each
op kind's counts come from, ``extra["stack"]`` lists the techniques with their own
reports.  Refused, in one line: two step caches (diffusers keeps one cache per model),
two techniques deciding the same op kind, a stack inside a stack, fewer than two
techniques.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from .base import ESTIMATE, Method, MethodReport

#: Methods that decide which block units run (diffusers' step caches).
STEP_CACHES = frozenset({"pab", "fbcache", "taylorseer", "magcache"})


@dataclass(frozen=True)
class StackSettings:
    #: ``{"technique": name, **settings}`` per technique, applied in this order
    techniques: tuple = ()

    def __post_init__(self) -> None:
        if isinstance(self.techniques, (str, bytes)) or not hasattr(self.techniques, "__iter__"):
            raise ValueError("stack: techniques must be a list of {technique: name, ...settings} mappings")
        items = []
        for i, t in enumerate(self.techniques):
            if not isinstance(t, dict) or not isinstance(t.get("technique"), str):
                raise ValueError(f"stack: technique {i} is {t!r}; each needs a 'technique' name and its settings, "
                                 "e.g. {technique: taylorseer, cache_interval: 3}")
            items.append(dict(t))
        if len(items) < 2:
            raise ValueError(f"stack: give at least two techniques, got {len(items)}; run a single one directly")
        check_composable([t["technique"] for t in items])
        object.__setattr__(self, "techniques", tuple(items))


def check_composable(names: list[str], claims: dict[str, frozenset] | None = None) -> None:
    """Refuse, in one line, techniques that do not compose on one transformer (see the module docstring).

    ``names``: the techniques in order; ``claims``: each one's ``Method.claims`` (``(unit, op kind)`` pairs
    it decides), when known - two techniques deciding one op kind are refused too.
    """
    if "stack" in names:
        raise ValueError("stack: a stack cannot hold another stack; list its techniques instead")
    caches = [n for n in names if n in STEP_CACHES]
    if len(caches) > 1:
        raise ValueError(f"stack: {' and '.join(caches)} are both step caches; diffusers keeps one cache per "
                         "model: stack one step cache with one op-level technique")
    op_level = [n for n in names if n not in STEP_CACHES]
    if len(op_level) > 1 and "kaleido" in op_level:
        raise ValueError(f"stack: {' and '.join(op_level)} both decide how ops are computed; Kaleido stacks "
                         "with a step cache, not with another op-level technique")
    deciders: dict[str, str] = {}
    for n in names:
        for kind in sorted({k for _, k in (claims or {}).get(n, ())}):
            if kind in deciders:
                raise ValueError(f"stack: {deciders[kind]} and {n} both decide {kind}; stack a step cache "
                                 "with one technique that decides ops")
            deciders[kind] = n


def _claimed(method: Method, report: MethodReport) -> set[str]:
    """The op kinds ``method`` decides itself (its counts win over the execution-based count)."""
    kinds = {k for _, k in method.claims}
    kinds |= set(report.extra.get("trace_summary_ops", ()))  # Kaleido: the op kinds its trace covers
    return kinds


class StackHandle:
    """The applied techniques of a :class:`Stack`; ``report()`` composes them, ``remove()`` undoes all."""

    def __init__(self, method: "Stack", handles: list) -> None:
        self.method = method
        self.handles = handles  # kept after remove(): e.g. the Kaleido handle's trace
        self._removed = False

    def report(self) -> MethodReport:
        reports = [h.report() for h in self.handles]
        counts = {k: v for k, v in reports[0].op_counts.items() if k != ESTIMATE}
        source = {k: self.method.methods[0].name for k in counts}
        for m, r in zip(self.method.methods, reports):
            for k in sorted(_claimed(m, r)):
                if k in r.op_counts and k != ESTIMATE:
                    counts[k] = r.op_counts[k]
                    source[k] = m.name
        estimates = [r.op_counts[ESTIMATE] for r in reports if ESTIMATE in r.op_counts]
        if estimates:
            total = estimates[0]
            for e in estimates[1:]:
                total = total + e
            counts[ESTIMATE] = total
            source[ESTIMATE] = "+".join(m.name for m, r in zip(self.method.methods, reports) if ESTIMATE in r.op_counts)
        calls = {r.calls for r in reports}
        if len(calls) != 1:
            raise ValueError(f"stack: the techniques saw different numbers of transformer calls {sorted(calls)}; "
                             "apply the stack once per generation")
        extra: dict[str, Any] = {"op_source": dict(sorted(source.items())),
                                 "stack": [{"technique": m.name, "settings": m.settings_dict(), "report": r.to_dict()}
                                           for m, r in zip(self.method.methods, reports)]}
        for r in reports:  # the accelerator replays' inputs, as the single techniques report them
            for key in ("hw_profile", "hw_profile_error", "accel_profile", "accel_profile_notes", "matched"):
                if key in r.extra:
                    extra[key] = r.extra[key]
        return MethodReport(self.method.name, self.method.settings_dict(), counts, reports[0].calls, extra)

    def remove(self) -> None:
        if self._removed:
            return
        for h in reversed(self.handles):
            h.remove()
        self._removed = True

    def __enter__(self) -> "StackHandle":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


class Stack(Method):
    """Several techniques on one transformer; see the module docstring."""

    name = "stack"
    Settings = StackSettings

    def __init__(self, *, resolve: Callable[..., Method], **settings: Any) -> None:
        super().__init__(**settings)
        self.methods = [resolve(t["technique"], **{k: v for k, v in t.items() if k != "technique"})
                        for t in self.settings.techniques]
        check_composable([m.name for m in self.methods], {m.name: m.claims for m in self.methods})

    def settings_dict(self) -> dict:
        return {"techniques": [dict(t) for t in self.settings.techniques]}

    @property
    def label(self) -> str:
        return "+".join(m.name for m in self.methods)

    def apply(self, transformer) -> StackHandle:  # type: ignore[override]
        handles: list = []
        try:
            for m in self.methods:
                handles.append(m.apply(transformer))
        except Exception:
            for h in reversed(handles):
                h.remove()
            raise
        return StackHandle(self, handles)

    def _install(self, handle) -> None:  # apply() does the work
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"Stack({[dataclasses.asdict(m.settings) | {'technique': m.name} for m in self.methods]})"
