"""The profile an accelerator baseline's trace turns into: per simulator op kind, per recorded step and layer, the
shares of the dense MACs its algorithm computed at 8 bits, at low bits and skipped, and its measured utilisation
inputs (:class:`BaselineProfile` of :class:`Cell` s; :func:`kaleido.hw.designs.baseline_replay.baseline_profile_from_trace`
builds it, the replayed designs in :mod:`kaleido.hw.designs` consume it; which method a design replays is checked
there, :func:`kaleido.hw.designs.baseline_replay.replay_design`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from .profile import check_format, read_json_file
from .workloads import OP_KINDS


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
            if k not in OP_KINDS:
                raise ValueError(f"baseline profile op kind {k!r} is unknown; known: {sorted(OP_KINDS)}")
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
