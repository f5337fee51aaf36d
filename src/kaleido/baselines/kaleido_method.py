"""Kaleido itself behind the baselines' :class:`~kaleido.baselines.base.Method` interface.

``KaleidoMethod(theta1=2, theta2=8, ...)`` applies :func:`kaleido.apply` with a
:class:`~kaleido.integrations.KaleidoConfig` built from the settings, and its report
takes each op kind's MAC counts from Kaleido's own ``ReuseTrace`` (the mode counts
the reuse decisions produced), so Kaleido and the baselines are charged in the same
8-bit-equivalent units per op kind.  Op kinds the trace does not cover inside the
blocks (e.g. cross-attention k/v projections of the text, counted by Kaleido as plain
dense GEMMs) keep the handle's own execution-based count.  The trace's per-kind dense
MACs are checked against the handle's shape model, so a mismatch in accounting fails
loudly instead of skewing the comparison.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import OP_KINDS, Method, MethodHandle, MethodReport, check_range


@dataclass(frozen=True)
class KaleidoSettings:
    theta1: float = 2.0  # FULL reuse below this (int8 units, L-inf)
    theta2: float = 8.0  # PARTIAL reuse below this
    low_bits: int = 4
    metric: str = "linf"  # "linf" (max |d|) or "mean_abs" (mean |d|) over a group's channels
    dense_steps: int = 1
    self_qk: bool = True
    cross_qk: bool = True
    proj: bool = True
    ffn: bool = True
    pv: bool = False

    def __post_init__(self) -> None:
        check_range("kaleido", "theta1", self.theta1, 0.0, 255.0)
        check_range("kaleido", "theta2", self.theta2, self.theta1, 255.0, "theta2 must be >= theta1")
        check_range("kaleido", "low_bits", self.low_bits, 1, 8)
        check_range("kaleido", "dense_steps", self.dense_steps, 0, 10_000)

    def to_config(self):
        from kaleido.integrations import KaleidoConfig

        d = KaleidoConfig().to_dict()
        d["reuse"].update(theta1=float(self.theta1), theta2=float(self.theta2), low_bits=int(self.low_bits),
                          metric=str(self.metric), dense_steps=int(self.dense_steps))
        for sw in ("self_qk", "cross_qk", "proj", "ffn", "pv"):
            d["ops"][sw]["enabled"] = bool(getattr(self, sw))
            for k in ("theta1", "theta2", "low_bits", "metric", "dense_steps"):  # per-op defaults would win
                d["ops"][sw][k] = d["reuse"][k]
        return KaleidoConfig.from_dict(d)


def _kind_of(record) -> str | None:
    """Map a trace record inside the blocks to a baseline op kind (None: outside the blocks)."""
    if record.layer < 0:
        return None
    if record.op in OP_KINDS:
        return record.op
    mod = record.module or ""
    for suffix, kind in ((".attn2.to_k", "cross_proj_kv"), (".attn2.to_v", "cross_proj_kv"),
                         (".attn2.to_q", "cross_proj_q"), (".attn2.to_out.0", "cross_proj_out"),
                         (".attn1.to_q", "proj_q"), (".attn1.to_k", "proj_k"), (".attn1.to_v", "proj_v"),
                         (".attn1.to_out.0", "proj_out"), (".net.0.proj", "ffn_in"), (".net.2", "ffn_out")):
        if mod.endswith(suffix):
            return kind
    return None


class _KaleidoHandle(MethodHandle):
    def __init__(self, method: "KaleidoMethod", transformer) -> None:
        super().__init__(method, transformer)
        self.trace = None

    def report(self) -> MethodReport:
        import kaleido.integrations as ki

        base = super().report()
        trace = ki.get_trace(self.transformer) if self.trace is None else self.trace
        if trace is None:
            return base
        from kaleido.reuse import OpCounts

        trace_calls = {(r.step, r.context) for r in trace.records if r.op == "self_qk" and r.layer == 0}
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
            if oc.low_bits != self.method.settings.low_bits and oc.total_mac_low:
                raise ValueError(f"trace op {r.op} ran with low_bits={oc.low_bits}, not the configured "
                                 f"{self.method.settings.low_bits}: the config did not take effect")
            oc = OpCounts(("total",), oc.mac8, oc.mac_low, oc.skipped, self.method.settings.low_bits)
            by_kind[kind] = by_kind[kind] + oc if kind in by_kind else oc
        counts = dict(base.op_counts)
        for kind, oc in by_kind.items():
            mine = counts.get(kind)
            if mine is not None and mine.dense_macs != oc.dense_macs:
                raise ValueError(
                    f"kaleido trace counts {oc.dense_macs} dense MACs for {kind} but the Wan shape model "
                    f"counts {mine.dense_macs}: the two accountings disagree"
                )
            counts[kind] = oc
        extra = dict(base.extra)
        extra["trace_summary_ops"] = sorted(by_kind)
        try:  # the measured mode statistics, in the accelerator simulator's profile format
            profile, notes = trace.to_profile()
            extra["hw_profile"] = profile.to_dict()
        except (ValueError, ImportError) as e:
            extra["hw_profile_error"] = str(e)
        return MethodReport(base.method, base.settings, counts, base.calls, extra)

    def remove(self) -> None:
        import kaleido.integrations as ki

        if not self._removed and ki.is_applied(self.transformer):
            self.trace = ki.remove(self.transformer)
        super().remove()


class KaleidoMethod(Method):
    name = "kaleido"
    Settings = KaleidoSettings

    @property
    def low_bits(self) -> int:  # type: ignore[override]
        return self.settings.low_bits

    def apply(self, transformer) -> MethodHandle:
        import kaleido.integrations as ki

        handle = _KaleidoHandle(self, transformer)
        try:
            ki.apply(transformer, self.settings.to_config())
        except Exception:
            handle.remove()
            raise
        return handle

    def _install(self, handle: MethodHandle) -> None:  # apply() does the work
        raise NotImplementedError
