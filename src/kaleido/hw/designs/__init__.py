"""Every design the simulator models, behind one protocol, in one registry.

The contract is :class:`~.protocol.Design` (:mod:`.protocol`): a design turns a workload and the
statistics of its technique into action counts (``count``), and an energy table prices them
(``price``); :func:`~.protocol.evaluate` does both.  One module per design:

* :mod:`.dense` - the dense systolic array (no statistics);
* :mod:`.a100` - the NVIDIA A100 roofline (no statistics; priced at its board power);
* :mod:`.kaleido` - Kaleido's reconfigurable PEs and dispatcher (a reuse :class:`~kaleido.hw.inputs.profile.Profile`);
* :mod:`.adaptiv`, :mod:`.exion`, :mod:`.cambricon_d` - the AdapTiV-, EXION- and Cambricon-D-class
  designs (their technique's recorded trace, replayed; :mod:`.common` holds what they share).

:data:`DESIGNS` is built here, once, in table order; the accelerator table
(:mod:`kaleido.report.accel`), ``kaleido simulate`` (:mod:`kaleido.hw.run`) and the trace replay
(:mod:`kaleido.hw.designs.baseline_replay`) read it.  A new design is one module here and its entry in
:data:`_BUILT_IN` (or a :func:`register_design` call).  The algorithms that produce the baselines'
statistics are in :mod:`kaleido.techniques.catalog`; this package never imports them (the simulator is the
lower layer).
"""

from __future__ import annotations

from . import a100, adaptiv, cambricon_d, dense, exion, kaleido
from .protocol import Design, DesignCounts, DesignResult, evaluate

#: name -> design, in the order the accelerator table lists them
DESIGNS: dict[str, Design] = {}

_REQUIRED = ("name", "label", "method", "on_array", "assumptions", "inputs", "count", "price")


def register_design(design: Design) -> Design:
    """Add ``design`` to :data:`DESIGNS`; it must keep the :class:`~.protocol.Design` protocol and a name
    may be registered once.  Returns the design."""
    missing = [a for a in _REQUIRED if not hasattr(design, a)]
    if missing or not isinstance(design, Design):
        raise TypeError(f"{design!r} does not keep the Design protocol (kaleido.hw.designs.protocol): missing {missing}")
    if design.name in DESIGNS:
        raise ValueError(f"design {design.name!r} is already registered")
    DESIGNS[design.name] = design
    return design


def get_design(name: str) -> Design:
    """The registered design ``name``; ``ValueError`` naming the registered ones otherwise."""
    try:
        return DESIGNS[name]
    except KeyError:
        raise ValueError(f"unknown design {name!r}; registered: {', '.join(DESIGNS)}") from None


def design_names() -> list[str]:
    return list(DESIGNS)


def replayed_designs() -> list[Design]:
    """The designs that replay another technique's recorded trace (the accelerator baselines), in table order."""
    return [d for d in DESIGNS.values() if hasattr(d, "replay_cost")]


_BUILT_IN = (dense.DenseArray(), a100.A100(), kaleido.Kaleido(),
             adaptiv.AdapTiVClass(), exion.EXIONClass(), cambricon_d.CambriconDClass())
for _d in _BUILT_IN:
    register_design(_d)
del _d

__all__ = ["DESIGNS", "Design", "DesignCounts", "DesignResult", "design_names", "evaluate", "get_design",
           "register_design", "replayed_designs"]
