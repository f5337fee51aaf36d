"""Techniques stacked on one transformer: a step cache, and one method that decides ops.

``make_method("stack", techniques=[{"technique": "taylorseer", "cache_interval": 3},
{"technique": "kaleido", "theta1": 32, "theta2": 64, "low_bits": 7}])`` applies each
technique in order to the same transformer and removes them in reverse.  What composes,
and why the accounting does:

* a step cache (a technique of the registry's ``"step cache"`` family: PAB, FirstBlockCache,
  TaylorSeer, MagCache, cache-dit's DBCache) decides which block *units* (self-attention,
  cross-attention, FFN) run on a call; a unit it serves from the cache never runs, so nothing
  inside it is computed or decided by the other technique;
* the other technique (Kaleido, or any op-level baseline) decides how the units that
  run are computed.  Every handle counts, per op kind, the units that really ran
  (:mod:`kaleido.techniques.base`), so a skipped unit is charged nothing by every handle,
  and the op-level technique charges the units that ran by its own decisions (Kaleido:
  its trace's mode maps).

The stacked report takes each op kind from the technique that decides it (``claims``;
Kaleido: the op kinds its trace covers) and every other op kind from the execution-based
count, which every handle keeps alike; ``extra["op_source"]`` says which technique each
op kind's counts come from, ``extra["stack"]`` lists the techniques with their own
reports.  Refused, in one line (:func:`check_composable`, the one place these rules live, which
``kaleido.apply`` with a list of configs follows too): two step caches (each decides which units
run: a model takes one), two techniques deciding the same op kind, Kaleido with another op-level
technique, a stack inside a stack, fewer than two techniques.  :func:`apply_in_order` is the one
way techniques are applied in order and undone when one fails.

The comparison's stacked points are the ones the step caches register (``stacks=`` in their
:func:`~kaleido.techniques.registry.register_technique`), gathered by this technique's grid.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from kaleido.techniques.base import Method
from kaleido.techniques.method_report import MethodReport
from kaleido.techniques.registry import STACK, TECHNIQUES, register_technique
from kaleido.techniques.shapes import ESTIMATE


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


def _is_step_cache(name: str) -> bool:
    t = TECHNIQUES.get(name)
    return t is not None and t.is_step_cache


def check_composable(names: list[str], claims: Mapping[str, Iterable[str]] | None = None) -> None:
    """Refuse, in one line, techniques that do not compose on one transformer (see the module docstring).

    ``names``: the techniques in order; ``claims``: the op kinds each one decides (default: the ones it is
    registered with; a built method's own, when its claims depend on its settings) - two techniques deciding
    one op kind are refused too.
    """
    if "stack" in names:
        raise ValueError("stack: a stack cannot hold another stack; list its techniques instead")
    caches = [n for n in names if _is_step_cache(n)]
    if len(caches) > 1:
        raise ValueError(f"stack: {' and '.join(caches)} are both step caches; each decides which block units run, "
                         "so a model takes one: stack one step cache with one op-level technique")
    op_level = [n for n in names if not _is_step_cache(n)]
    if len(op_level) > 1 and "kaleido" in op_level:
        raise ValueError(f"stack: {' and '.join(op_level)} both decide how ops are computed; Kaleido stacks "
                         "with a step cache, not with another op-level technique")
    if claims is None:
        claims = {n: TECHNIQUES[n].claims for n in names if n in TECHNIQUES}
    deciders: dict[str, str] = {}
    for n in names:
        for kind in sorted(set(claims.get(n, ()))):
            if kind in deciders:
                raise ValueError(f"stack: {deciders[kind]} and {n} both decide {kind}; stack a step cache "
                                 "with one technique that decides ops")
            deciders[kind] = n


def apply_in_order(appliers: Iterable[Callable[[], Any]], undo: Callable[[Any], None]) -> list:
    """Call each of ``appliers`` in order and return their results; when one raises, ``undo`` the results of
    those that ran (last first), then re-raise: a stack is applied whole or not at all."""
    done: list = []
    try:
        for apply in appliers:
            done.append(apply())
    except Exception:
        for result in reversed(done):
            undo(result)
        raise
    return done


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
        for r in reports:
            if "matched" in r.extra:
                extra["matched"] = r.extra["matched"]
        return MethodReport(self.method.name, self.method.settings_dict(), counts, reports[0].calls, extra)

    def simulator_traces(self) -> dict:
        """The stacked techniques' traces a simulator replays, by kind (see ``MethodHandle.simulator_traces``)."""
        out: dict = {}
        for h in self.handles:
            out.update(h.simulator_traces())
        return out

    def recorded_trace(self):
        """The trace of the stacked technique applied last that records one (``None``: none does)."""
        for h in reversed(self.handles):
            trace = h.recorded_trace()
            if trace is not None:
                return trace
        return None

    @property
    def records_trace(self) -> bool:
        return any(h.records_trace for h in self.handles)

    def summary(self) -> str:
        return "stack: " + "; then ".join(h.summary() for h in self.handles)

    @property
    def removed(self) -> bool:
        return self._removed

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


@register_technique(group=STACK, config=None)
class Stack(Method):
    """Several techniques on one transformer; see the module docstring."""

    name = "stack"
    Settings = StackSettings

    def __init__(self, *, resolve: Callable[..., Method], **settings: Any) -> None:
        super().__init__(**settings)
        self.methods = [resolve(t["technique"], **{k: v for k, v in t.items() if k != "technique"})
                        for t in self.settings.techniques]
        check_composable([m.name for m in self.methods], {m.name: {k for _, k in m.claims} for m in self.methods})

    def settings_dict(self) -> dict:
        return {"techniques": [dict(t) for t in self.settings.techniques]}

    @property
    def label(self) -> str:
        return "+".join(m.name for m in self.methods)

    def apply(self, transformer) -> StackHandle:  # type: ignore[override]
        handles = apply_in_order([functools.partial(m.apply, transformer) for m in self.methods], lambda h: h.remove())
        return StackHandle(self, handles)

    def _install(self, handle) -> None:  # apply() does the work
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"Stack({[dataclasses.asdict(m.settings) | {'technique': m.name} for m in self.methods]})"
