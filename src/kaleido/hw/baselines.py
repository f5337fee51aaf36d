"""Comparison systems, behind one small interface, registered by name.

Built in: ``dense-array`` (the same array, every op dense) and ``a100`` (the
roofline of :mod:`kaleido.hw.gpu`).  The accelerator baselines (AdapTiV, EXION,
Cambricon-D) need a recorded trace of their algorithm, so they are not registered
here: :func:`kaleido.hw.baseline_replay.replay` costs a workload from that trace -
this module holds no skip rate of its own.

A baseline is any callable ``(workload, cfg) -> BaselineResult``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable

from .config import ArrayConfig
from .gpu import A100Config, a100_gemm
from .simulate import simulate
from .workloads import Workload


@dataclass(frozen=True)
class BaselineResult:
    name: str
    time_s: float
    energy_j: float
    note: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


BaselineFn = Callable[[Workload, ArrayConfig], BaselineResult]
_REGISTRY: dict[str, BaselineFn] = {}


def register_baseline(name: str, fn: BaselineFn) -> None:
    """Add a comparison system; a name may be registered once."""
    if name in _REGISTRY:
        raise ValueError(f"baseline {name!r} is already registered")
    _REGISTRY[name] = fn


def baseline_names() -> list[str]:
    return sorted(_REGISTRY)


def run_baseline(name: str, wl: Workload, cfg: ArrayConfig | None = None) -> BaselineResult:
    try:
        fn = _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown baseline {name!r}; registered: {baseline_names()}") from None
    return fn(wl, cfg or ArrayConfig())


def _dense_array(wl: Workload, cfg: ArrayConfig) -> BaselineResult:
    s = simulate(wl, None, cfg).summary()
    return BaselineResult("dense-array", s["time_s"]["dense_array"], s["energy_j"]["dense_array"],
                          f"{cfg.rows}x{cfg.cols} {cfg.dataflow} @ {cfg.clock_ghz} GHz, every op dense")


def _a100(wl: Workload, cfg: ArrayConfig, a100: A100Config = A100Config()) -> BaselineResult:
    t = e = 0.0
    for g in wl.gemms:
        dt, de = a100_gemm(g, a100)
        t, e = t + dt, e + de
    return BaselineResult("a100", t, e, f"roofline, {a100.precision}, efficiency {a100.attention_efficiency}")


register_baseline("dense-array", _dense_array)
register_baseline("a100", _a100)
