"""What a comparison row keeps for the simulator: the profiles of a generation's traces, built by ``kaleido.hw``.

A technique records what it decided in a :class:`~kaleido.trace.ReuseTrace` and hands it over through its handle
(``handle.simulator_traces()``); it never builds a simulator profile. The comparison turns each trace into the
simulator's input through the simulator's one door (:func:`kaleido.hw.inputs.from_trace.stats_from_trace`) and keeps
it in the row's report:

* ``"kaleido"`` -> ``extra["hw_profile"]`` (:func:`kaleido.hw.inputs.trace_adapter.profile_from_trace`: the measured mode
  statistics per op, what ``kaleido simulate --profile`` and the accelerator table read);
* ``"accel"`` -> ``extra["accel_profile"]`` (:func:`kaleido.hw.inputs.baseline_profile.baseline_profile_from_trace`: an
  accelerator baseline's decisions, which its design in ``kaleido.hw.designs`` replays), with
  ``extra["accel_profile_notes"]`` when the conversion noted something.

A trace the simulator cannot take gives ``extra["hw_profile_error"]`` / ``extra["accel_profile_error"]`` (one line)
instead, so a row is never lost for it.
"""

from __future__ import annotations

from typing import Mapping

from kaleido.trace import ReuseTrace


def simulator_profile_extras(traces: Mapping[str, ReuseTrace]) -> dict:
    """``report.extra`` entries for ``traces`` (``handle.simulator_traces()``), as the module docstring says."""
    from kaleido.hw.inputs.from_trace import stats_from_trace

    extra: dict = {}
    for kind, key in (("kaleido", "hw_profile"), ("accel", "accel_profile")):
        if kind not in traces:
            continue
        try:
            stats, notes = stats_from_trace(traces[kind])
        except ValueError as e:
            extra[f"{key}_error"] = str(e)
            continue
        extra[key] = stats.to_dict()
        if notes and kind == "accel":
            extra["accel_profile_notes"] = notes
    return extra
