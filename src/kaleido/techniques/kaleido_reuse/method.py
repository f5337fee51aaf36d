"""Kaleido itself behind the baselines' :class:`~kaleido.techniques.base.Method` interface.

``KaleidoMethod(theta1=16, theta2=32, ...)`` applies :func:`kaleido.apply` with a
:class:`~kaleido.techniques.kaleido_reuse.KaleidoConfig` built from the flat settings (one threshold
pair and one ``low_bits`` for every op; their defaults are ``KaleidoConfig()``'s base
reuse settings and op switches), and its report takes each op kind's MAC counts from
Kaleido's own ``ReuseTrace`` (the mode counts the reuse decisions produced), so Kaleido
and the baselines are charged in the same 8-bit-equivalent units per op kind.  A trace
record inside the blocks whose op is a block op kind (:data:`kaleido.ops.ALL_BLOCK_OPS`;
the Wan adapter names the text-side key/value projections ``cross_proj_kv``) counts for
that kind; op kinds the trace does not cover keep the handle's own execution-based
count.  The trace's per-kind dense MACs are checked against the handle's shape model,
so a mismatch in accounting fails loudly instead of skewing the comparison.

It registers as the technique ``"kaleido"``: ``make_method`` builds it from these flat settings,
``kaleido.apply`` dispatches a :class:`~kaleido.techniques.kaleido_reuse.KaleidoConfig` to
:func:`kaleido.techniques.kaleido_reuse.apply.apply` (with its ``filter_fn``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Mapping

from kaleido.techniques.kaleido_reuse.config import KaleidoConfig
from kaleido.ops import SWITCHES

from kaleido.techniques.base import Method, check_range
from kaleido.techniques.handle import MethodHandle
from kaleido.techniques.method_report import MethodReport
from kaleido.techniques.registry import KALEIDO, register_technique
from kaleido.ops import BLOCK_KINDS

#: the ReuseConfig keys the flat settings set for every op
_REUSE_KEYS = ("theta1", "theta2", "low_bits", "metric", "dense_steps")
_BLOCK_KINDS = frozenset(BLOCK_KINDS)


@functools.cache
def _config_defaults() -> Mapping[str, Any]:
    """``KaleidoConfig()``'s base reuse values and op switches, by flat setting name."""
    from types import MappingProxyType

    cfg = KaleidoConfig()
    d = {k: getattr(cfg.reuse, k) for k in _REUSE_KEYS}
    d.update({sw: cfg.ops[sw].enabled for sw in SWITCHES})
    return MappingProxyType(d)


def _default(name: str):
    return field(default_factory=lambda: _config_defaults()[name])


@dataclass(frozen=True)
class KaleidoSettings:
    """Kaleido's settings as one flat record: ``theta1`` / ``theta2`` / ``low_bits`` / ``metric`` /
    ``dense_steps`` apply to every op (the default config's per-op overrides, e.g. self-attention
    q.k^T's own thresholds, do not), the switches turn op kinds on; defaults: ``KaleidoConfig()``'s
    base reuse settings and switches."""

    theta1: float = _default("theta1")  # FULL reuse below this (int8 units, L-inf)
    theta2: float = _default("theta2")  # PARTIAL reuse below this
    low_bits: int = _default("low_bits")
    metric: str = _default("metric")  # "linf" (max |d|) or "mean_abs" (mean |d|) over a group's channels
    dense_steps: int = _default("dense_steps")
    self_qk: bool = _default("self_qk")
    cross_qk: bool = _default("cross_qk")
    proj: bool = _default("proj")
    ffn: bool = _default("ffn")
    pv: bool = _default("pv")
    #: a whole KaleidoConfig (its dict, as ``KaleidoConfig.to_dict`` writes it): per-op and per-layer
    #: thresholds, schedules and axes, e.g. a calibrated config; the flat fields above must then keep
    #: their defaults (they would be ignored)
    config: Mapping[str, Any] | None = None
    #: a short name for a ``config`` in tables and plots (``kaleido config=<label>``)
    label: str = ""

    def __post_init__(self) -> None:
        check_range("kaleido", "theta1", self.theta1, 0.0, 255.0)
        check_range("kaleido", "theta2", self.theta2, self.theta1, 255.0, "theta2 must be >= theta1")
        check_range("kaleido", "low_bits", self.low_bits, 1, 8)
        check_range("kaleido", "dense_steps", self.dense_steps, 0, 10_000)
        if self.config is not None:
            if not isinstance(self.config, Mapping):
                raise ValueError(f"kaleido: config must be a KaleidoConfig mapping, got {type(self.config).__name__}")
            moved = [k for k, v in _config_defaults().items() if getattr(self, k) != v]
            if moved:
                raise ValueError(f"kaleido: give either a whole config or the flat settings {moved}, not both; "
                                 "put those values into the config")
            KaleidoConfig.from_dict(dict(self.config))  # validated now, with the config's own messages

    @property
    def base_low_bits(self) -> int:
        """The low-bit width of the config's base reuse settings (the flat ``low_bits`` without a config)."""
        return int(self.to_config().reuse.low_bits) if self.config is not None else int(self.low_bits)

    def to_config(self):
        if self.config is not None:
            return KaleidoConfig.from_dict(dict(self.config))
        d = KaleidoConfig().to_dict()
        d["reuse"].update(theta1=float(self.theta1), theta2=float(self.theta2), low_bits=int(self.low_bits),
                          metric=str(self.metric), dense_steps=int(self.dense_steps))
        for sw in SWITCHES:
            d["ops"][sw]["enabled"] = bool(getattr(self, sw))
            for k in _REUSE_KEYS:  # per-op defaults would win
                d["ops"][sw][k] = d["reuse"][k]
        return KaleidoConfig.from_dict(d)


def _with_low_bits(oc, low_bits: int):
    """``oc`` as one total with ``low_bits`` (its low-bit MACs, if any, must already be of that width)."""
    from kaleido.reuse import OpCounts

    return OpCounts(("total",), oc.mac8, oc.mac_low, oc.skipped, low_bits)


def _kind_of(record) -> str | None:
    """The baseline op kind of a trace record: its op when that is a block op kind inside the blocks, else None."""
    return record.op if record.layer >= 0 and record.op in _BLOCK_KINDS else None


class KaleidoHandle(MethodHandle):
    """Kaleido applied to one transformer: what ``kaleido.apply`` returns for a :class:`KaleidoConfig` and what
    :meth:`KaleidoMethod.apply` returns - the same contract as every technique's handle (``report()``,
    ``simulator_traces()``, ``recorded_trace()``, ``summary()``, ``remove()``).

    ``patched``: the :class:`~kaleido.techniques.kaleido_reuse.apply.ApplyReport` of what was patched
    (:meth:`summary` is its line).  The handle follows Kaleido's runtime: removed through the handle, through
    ``kaleido.remove`` or through :func:`kaleido.techniques.kaleido_reuse.apply.remove`, it is undone whole and
    keeps the generation's trace (:meth:`recorded_trace`).
    """

    def __init__(self, method: "KaleidoMethod", transformer, config: KaleidoConfig | None = None,
                 filter_fn=None) -> None:
        from kaleido.techniques.kaleido_reuse.apply import apply as install

        super().__init__(method, transformer)
        self.trace = None
        try:
            self.patched = install(transformer, method.settings.to_config() if config is None else config,
                                   filter_fn=filter_fn, on_remove=self._runtime_removed)
        except Exception:
            MethodHandle.remove(self)
            raise

    def _runtime_removed(self, trace) -> None:
        self.trace = trace
        MethodHandle.remove(self)

    records_trace = True

    def recorded_trace(self):
        """The generation's :class:`~kaleido.trace.ReuseTrace` (in progress, else the last finished one;
        after removal: the one removal closed)."""
        import kaleido.techniques.kaleido_reuse as ki

        if self.trace is None and ki.is_applied(self.transformer):
            return ki.get_trace(self.transformer)
        return self.trace

    def summary(self) -> str:
        return self.patched.summary()

    def report(self) -> MethodReport:
        base = super().report()
        trace = self.recorded_trace()
        if trace is None:
            return base
        from kaleido.reuse import OpCounts

        # every transformer call leaves records outside the blocks (patch embedding...), even when a step
        # cache stacked with Kaleido serves every block unit of the call
        trace_calls = {(r.step, r.context) for r in trace.records}
        if len(trace_calls) != self.calls:
            raise ValueError(
                f"the Kaleido trace covers {len(trace_calls)} transformer calls but {self.calls} ran while applied: "
                "report() covers one generation per apply(); apply again for the next one"
            )
        by_kind: dict[str, OpCounts] = {}
        for r in trace.records:
            kind = _kind_of(r)
            if kind is None:
                continue
            oc = r.op_counts().total()
            if self.method.settings.config is None:
                if oc.low_bits != self.method.settings.low_bits and oc.total_mac_low:
                    raise ValueError(f"trace op {r.op} ran with low_bits={oc.low_bits}, not the configured "
                                     f"{self.method.settings.low_bits}: the config did not take effect")
                oc = _with_low_bits(oc, self.method.settings.low_bits)
            elif kind in by_kind:  # a whole config: each kind keeps its own ops' low_bits (those with low MACs)
                if not oc.total_mac_low:
                    oc = _with_low_bits(oc, by_kind[kind].low_bits)
                elif not by_kind[kind].total_mac_low:
                    by_kind[kind] = _with_low_bits(by_kind[kind], oc.low_bits)
            by_kind[kind] = by_kind[kind] + oc if kind in by_kind else oc
        counts = dict(base.op_counts)
        for kind, oc in by_kind.items():
            mine = counts.get(kind)  # execution-based: units that ran as computed, the others as skipped
            if mine is not None:
                if mine.total_mac8 != oc.dense_macs:
                    raise ValueError(
                        f"kaleido trace counts {oc.dense_macs} dense MACs for {kind} but the shape model "
                        f"counts {mine.total_mac8} in the units that ran: the two accountings disagree"
                    )
                # units a stacked step cache served never ran: skipped, on top of Kaleido's own reuse
                oc = oc + OpCounts(("total",), (0,), (0,), (mine.total_skipped,), oc.low_bits)
            counts[kind] = oc
        extra = dict(base.extra)
        extra["trace_summary_ops"] = sorted(by_kind)
        return MethodReport(base.method, base.settings, counts, base.calls, extra)

    def simulator_traces(self) -> dict:
        """``{"kaleido": the generation's ReuseTrace}`` (none before a generation)."""
        trace = self.recorded_trace()
        return {**super().simulator_traces(), **({} if trace is None else {"kaleido": trace})}

    def remove(self) -> None:
        import kaleido.techniques.kaleido_reuse as ki

        if not self._removed and ki.is_applied(self.transformer):
            ki.remove(self.transformer)  # tells this handle (_runtime_removed), which undoes the rest
        MethodHandle.remove(self)


def _apply_kaleido(transformer, config: KaleidoConfig, filter_fn) -> KaleidoHandle:
    """``kaleido.apply``'s handler for a :class:`KaleidoConfig`: its :class:`KaleidoHandle` (with ``filter_fn``)."""
    return KaleidoHandle(KaleidoMethod.from_config(config), transformer, config, filter_fn)


@register_technique(group=KALEIDO, needs_accelerator=True, config=KaleidoConfig, handler=_apply_kaleido)
class KaleidoMethod(Method):
    name = "kaleido"
    Settings = KaleidoSettings

    @property
    def low_bits(self) -> int:  # type: ignore[override]
        return self.settings.base_low_bits

    @classmethod
    def from_config(cls, config: KaleidoConfig) -> "KaleidoMethod":
        """The method of a whole :class:`KaleidoConfig` (its settings hold the config's dict)."""
        return cls(config=config.to_dict())

    def apply(self, transformer) -> KaleidoHandle:
        return KaleidoHandle(self, transformer)

    def _install(self, handle: MethodHandle) -> None:  # apply() does the work
        raise NotImplementedError
