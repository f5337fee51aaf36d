"""What a comparison row keeps for the simulator: the typed inputs of a generation's traces, built by ``kaleido.hw``.

A technique records what it decided in a :class:`~kaleido.trace.ReuseTrace` and hands it over through its handle
(``handle.simulator_traces()``); it never builds a simulator profile. The comparison turns each trace into the
simulator's input through the simulator's one door (:func:`kaleido.hw.inputs.from_trace.stats_from_trace`), holds
them as :class:`SimulatorInputs` and keeps them in the row's report, serialised in one place
(:meth:`SimulatorInputs.to_extra`) and read back in one place (:meth:`SimulatorInputs.from_report`, what the
accelerator table reads):

* ``"kaleido"`` -> :attr:`SimulatorInputs.kaleido`, a :class:`~kaleido.hw.inputs.profile.Profile` (the measured
  mode statistics per op, what ``kaleido simulate --profile`` and the accelerator table read), kept as
  ``extra["hw_profile"]``;
* ``"accel"`` -> :attr:`SimulatorInputs.accel`, a :class:`~kaleido.hw.inputs.baseline_profile.BaselineProfile` (an
  accelerator baseline's decisions, which its design in ``kaleido.hw.designs`` replays), kept as
  ``extra["accel_profile"]``, with ``extra["accel_profile_notes"]`` when the conversion noted something.

A trace the simulator cannot take gives ``extra["hw_profile_error"]`` / ``extra["accel_profile_error"]`` (one line)
instead, so a row is never lost for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from kaleido.trace import ReuseTrace

if TYPE_CHECKING:
    from kaleido.hw.inputs.baseline_profile import BaselineProfile
    from kaleido.hw.inputs.profile import Profile

#: trace kind -> the report's ``extra`` key it is kept under
EXTRA_KEYS: dict[str, str] = {"kaleido": "hw_profile", "accel": "accel_profile"}


@dataclass
class SimulatorInputs:
    """The simulator's inputs of one generation: Kaleido's profile and/or an accelerator baseline's replay profile.

    ``errors``: trace kind -> why the simulator could not take that trace (one line); ``accel_notes``: what the
    baseline's conversion noted."""

    kaleido: "Profile | None" = None
    accel: "BaselineProfile | None" = None
    errors: dict[str, str] = field(default_factory=dict)
    accel_notes: list[str] = field(default_factory=list)

    @classmethod
    def from_traces(cls, traces: Mapping[str, ReuseTrace]) -> "SimulatorInputs":
        """The inputs of ``traces`` (``handle.simulator_traces()``: kind -> trace)."""
        from kaleido.hw.inputs.from_trace import stats_from_trace

        out = cls()
        for kind in EXTRA_KEYS:
            if kind not in traces:
                continue
            try:
                stats, notes = stats_from_trace(traces[kind])
            except ValueError as e:
                out.errors[kind] = str(e)
                continue
            setattr(out, kind, stats)
            if kind == "accel":
                out.accel_notes = list(notes or [])
        return out

    def to_extra(self) -> dict:
        """The report's ``extra`` entries (the module docstring's keys): the one serialisation."""
        extra: dict[str, Any] = {}
        for kind, key in EXTRA_KEYS.items():
            stats = getattr(self, kind)
            if kind in self.errors:
                extra[f"{key}_error"] = self.errors[kind]
            elif stats is not None:
                extra[key] = stats.to_dict()
                if kind == "accel" and self.accel_notes:
                    extra["accel_profile_notes"] = list(self.accel_notes)
        return extra

    @classmethod
    def from_report(cls, report: Mapping[str, Any], where: str = "row") -> "SimulatorInputs":
        """The inputs a row's report (``MethodReport.to_dict()``) keeps: the one reader of :meth:`to_extra`'s keys
        (a corrupt entry: ``ValueError`` naming ``where``)."""
        from kaleido.hw.inputs.baseline_profile import BaselineProfile
        from kaleido.hw.inputs.profile import Profile

        extra = report.get("extra", {}) or {}
        out = cls(errors={k: extra[f"{key}_error"] for k, key in EXTRA_KEYS.items() if f"{key}_error" in extra},
                  accel_notes=list(extra.get("accel_profile_notes", [])))
        if extra.get("hw_profile") is not None:
            out.kaleido = Profile.from_dict(extra["hw_profile"], where=f"{where}'s hw_profile")
        if extra.get("accel_profile") is not None:
            out.accel = BaselineProfile.from_dict(extra["accel_profile"], where=f"{where}'s accel_profile")
        return out


def simulator_profile_extras(traces: Mapping[str, ReuseTrace]) -> dict:
    """``report.extra`` entries for ``traces`` (``handle.simulator_traces()``): :class:`SimulatorInputs`, serialised."""
    return SimulatorInputs.from_traces(traces).to_extra()
