"""The one door from what a technique recorded to what the simulator costs.

A :class:`~kaleido.trace.ReuseTrace` holds either Kaleido's mode decisions (``trace.method == "kaleido"``) or an
accelerator baseline's (AdapTiV, EXION, Cambricon-D: ``trace.method`` names it). :func:`stats_from_trace` turns
either into the simulator's input - a :class:`~kaleido.hw.inputs.profile.Profile` of mode statistics
(:func:`~kaleido.hw.inputs.trace_adapter.profile_from_trace`) or a
:class:`~kaleido.hw.inputs.baseline_profile.BaselineProfile` of recorded decisions, which its design replays
(:func:`~kaleido.hw.inputs.baseline_profile.baseline_profile_from_trace`) - and :func:`load_stats` reads either
back from its JSON file by the file's ``"format"``. ``kaleido simulate --trace / --profile``, the comparison's
rows (:mod:`kaleido.evaluation.simulator_profiles`) and the accelerator table all come through here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Union

from .baseline_profile import FORMAT as BASELINE_FORMAT
from .baseline_profile import BaselineProfile, baseline_profile_from_trace
from .profile import FORMAT as PROFILE_FORMAT
from .profile import Profile, read_json_file
from .trace_adapter import profile_from_trace
from .workloads import Workload

#: what the simulator costs: Kaleido's mode statistics, or a baseline's recorded decisions
Stats = Union[Profile, BaselineProfile]


def stats_from_trace(trace, workload: Workload | None = None) -> tuple[Stats, list[str]]:
    """``(statistics, notes)`` of a loaded ``ReuseTrace``: Kaleido's -> ``Profile``, a baseline's -> ``BaselineProfile``."""
    if getattr(trace, "method", "kaleido") == "kaleido":
        return profile_from_trace(trace, workload)
    return baseline_profile_from_trace(trace, workload)


def stats_from_dict(d: dict, where: str) -> Stats:
    """A ``Profile`` or a ``BaselineProfile`` from its JSON object, chosen by its ``"format"``."""
    fmt = d.get("format") if isinstance(d, dict) else None
    if fmt == BASELINE_FORMAT:
        return BaselineProfile.from_dict(d, where=where)
    if fmt == PROFILE_FORMAT:
        return Profile.from_dict(d, where=where)
    raise ValueError(f"{where} is neither a Kaleido profile nor a baseline profile (its \"format\" is {fmt!r}; "
                     f"need {PROFILE_FORMAT!r} or {BASELINE_FORMAT!r})")


def load_stats(path: str | Path) -> Stats:
    """A profile file of either kind (:func:`stats_from_dict`)."""
    return stats_from_dict(read_json_file(path, "profile"), where=f"profile {str(path)!r}")
