"""The profile an accelerator baseline's trace turns into: per simulator op kind, per recorded step and layer, the
shares of the dense MACs its algorithm computed at 8 bits, at low bits and skipped, and its measured utilisation
inputs (:class:`BaselineProfile` of :class:`Cell` s; :func:`kaleido.hw.inputs.baseline_profile.baseline_profile_from_trace`
builds it, the replayed designs in :mod:`kaleido.hw.designs` consume it; which method a design replays is checked
there, :func:`kaleido.hw.designs.baseline_replay.replay_design`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from kaleido.ops import HW_KIND_OF, HW_OPS

from .profile import check_format, read_json_file
from .workloads import Workload


@dataclass(frozen=True)
class Cell:
    """One op kind at one recorded (step, layer), pooled over call slots: shares of dense MACs."""

    mac8: float
    mac_low: float
    skipped: float
    low_bits: int = 8
    estimate: float = 0.0  # decision work, 8-bit-equivalent MACs per dense MAC
    tile: float | None = None  # sum of per-tile kept-column unions / (tiles x columns); None: not measured
    outliers: float | None = None  # outlier share of A's entries on differential calls; None: not measured

    def __post_init__(self) -> None:
        for k in ("mac8", "mac_low", "skipped"):
            v = getattr(self, k)
            if not (isinstance(v, (int, float)) and -1e-9 <= v <= 1 + 1e-9):
                raise ValueError(f"Cell.{k}={v!r} must be a share in [0, 1]")
        if abs(self.mac8 + self.mac_low + self.skipped - 1.0) > 1e-6:
            raise ValueError(f"Cell shares {self.mac8}+{self.mac_low}+{self.skipped} must add up to 1")
        for k in ("tile", "outliers"):
            v = getattr(self, k)
            if v is not None and not 0.0 <= v <= 1.0:
                raise ValueError(f"Cell.{k}={v!r} must be in [0, 1] or null")
        if self.estimate < 0:
            raise ValueError(f"Cell.estimate={self.estimate!r} must be >= 0")

    @property
    def kept(self) -> float:
        return self.mac8 + self.mac_low

    @classmethod
    def dense(cls) -> "Cell":
        return cls(1.0, 0.0, 0.0)

    def to_dict(self) -> dict:
        return dict(self.__dict__)



FORMAT = "kaleido-baseline-profile"
VERSION = 1


@dataclass
class BaselineProfile:
    """A baseline trace in the replay's form; ``ops[kind][i][j]``: recorded step i, layer j."""

    method: str
    settings: dict
    model: str
    grid: tuple[int, int, int]
    tile_rows: int
    ops: dict[str, list[list[Cell]]]
    source: str = ""

    def __post_init__(self) -> None:
        for k, steps in self.ops.items():
            if k not in HW_OPS:
                raise ValueError(f"baseline profile op kind {k!r} is unknown; known: {sorted(HW_OPS)}")
            if not steps or any(not layers for layers in steps):
                raise ValueError(f"baseline profile op {k!r} needs at least one step with one layer")

    def cells(self, op: str, step: int, steps: int) -> list[Cell] | None:
        """The recorded layers' cells for workload step ``step`` of ``steps`` (None: op not recorded)."""
        entry = self.ops.get(op)
        if entry is None:
            return None
        P = len(entry)
        idx = 0 if steps <= 1 else int(math.floor(step * (P - 1) / (steps - 1) + 0.5))
        return entry[idx]

    def to_dict(self) -> dict:
        return {"format": FORMAT, "version": VERSION, "method": self.method, "settings": self.settings,
                "model": self.model, "grid": dict(zip("THW", self.grid)), "tile_rows": self.tile_rows,
                "source": self.source,
                "ops": {k: [[c.to_dict() for c in layers] for layers in steps] for k, steps in self.ops.items()}}

    @classmethod
    def from_dict(cls, d: dict, where: str = "baseline profile") -> "BaselineProfile":
        check_format(d, FORMAT, VERSION, where, "a baseline profile")
        try:
            ops = {k: [[Cell(**c) for c in layers] for layers in steps] for k, steps in d["ops"].items()}
            grid = tuple(int(d["grid"][a]) for a in "THW")
            return cls(str(d["method"]), dict(d["settings"]), str(d["model"]), grid, int(d["tile_rows"]), ops,
                       str(d.get("source", "")))
        except (KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"{where} is incomplete or corrupt ({type(e).__name__}: {e})") from None

    @classmethod
    def load(cls, path: str | Path) -> "BaselineProfile":
        return cls.from_dict(read_json_file(path, "baseline profile"), where=f"baseline profile {str(path)!r}")


def baseline_profile_from_trace(trace, workload: Workload | None = None) -> tuple[BaselineProfile, list[str]]:
    """``(profile, notes)`` from a baseline ``ReuseTrace`` (records with decisions)."""
    method = trace.method
    if method == "kaleido":
        raise ValueError("this is a Kaleido trace: use kaleido.hw.inputs.trace_adapter.profile_from_trace")
    acc: dict[str, dict[int, dict[int, list[float]]]] = {}
    lbits: dict[str, set[int]] = {}
    for r in trace:
        d = r.decision
        if d is None:
            raise ValueError(f"baseline trace record {r.op!r} layer {r.layer} step {r.step} has no decision")
        kind = HW_KIND_OF.get(r.op)
        if kind is None:
            continue
        a = acc.setdefault(kind, {}).setdefault(r.step, {}).setdefault(r.layer, [0.0] * 9)
        vals = [d.mac8, d.mac_low, d.skipped, d.estimate8, max(0, d.tile_cols), max(0, d.tile_dense_cols),
                max(0, d.outliers), max(0, d.a_elements), 1.0 if d.tile_cols >= 0 else 0.0]
        for i, v in enumerate(vals):
            a[i] += v
        if d.mac_low:
            lbits.setdefault(kind, set()).add(int(d.low_bits))
    if not acc:
        raise ValueError("the baseline trace holds no records of simulator op kinds")
    ops = {}
    for kind, steps in acc.items():
        if len(lbits.get(kind, ())) > 1:
            raise ValueError(f"op {kind!r} mixes low-bit widths {sorted(lbits[kind])}; the replay needs one")
        lb = next(iter(lbits.get(kind, {8})))
        rows = []
        for s in sorted(steps):
            cells = []
            for layer in sorted(steps[s]):
                m8, ml, sk, est, tc, td, ol, ae, has_tile = steps[s][layer]
                dense = m8 + ml + sk
                cells.append(Cell(m8 / dense, ml / dense, sk / dense, lb if ml else 8, est / dense,
                                  tc / td if has_tile and td > 0 else None, ol / ae if ae > 0 else None))
            rows.append(cells)
        ops[kind] = rows
    g = trace.meta.get("grid") or {"T": 1, "H": 1, "W": 1}
    notes = []
    if workload is not None:
        notes += [f"op kind {k!r} not in the trace: replayed dense" for k in workload.op_kinds() if k not in ops]
    prof = BaselineProfile(method, dict(trace.meta.get("method_settings", {})), trace.model_class,
                           (int(g["T"]), int(g["H"]), int(g["W"])), int(trace.meta.get("tile_rows", 128)), ops,
                           source=f"ReuseTrace of {method} ({trace.model_class}, {len(trace)} records)")
    return prof, notes
