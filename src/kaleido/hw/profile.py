"""Reuse profiles: measured mode statistics per op kind, and how they carry to a workload.

A profile is what the simulator needs from the algorithm: for every op kind of a
workload (``kaleido.hw.workloads.OP_KINDS``) the additive :class:`ModeStats` of the
mode maps measured on it (video-token rows only), or ``None`` for an op kept dense;
optionally one ``ModeStats`` per measured denoising step.

JSON format (``version`` 1)::

    {"format": "kaleido-profile", "version": 1,
     "model": "wan-1.3b",                 # workload model name it was measured on (or any label)
     "grid": {"T": 21, "H": 30, "W": 52}, # measured token grid (video tokens)
     "label": "...", "source": "...",     # what produced it - say if it is synthetic
     "ops": {"self_attn_qk": {"stats": <ModeStats.to_dict()>,
                              "per_step": [<ModeStats.to_dict()>, ...]},   # per_step optional
             "ffn_up": null, ...}}

Build one in code with ``Profile(model, grid, {op: ModeStats}, ...)`` or
:meth:`Profile.from_mode_maps`.

Carry-over rule (``docs/hardware.md`` states it as an assumption).  A profile applies
as-is only to the model and grid it was measured on.  With ``transfer=True`` it is
carried to another model or resolution by: (1) rows - per-group mode fractions and
row-pattern fractions are resolution-independent and apply to the target's video
rows (text rows always compute); (2) groups - when the measured group names equal the
target op's (RoPE ``t/h/w``), fractions and the pattern histogram are kept per name
with the target's group sizes; otherwise the target's groups are chunks of
``min(128, K)`` channels that all take the measured per-group fractions pooled over
groups (weighted by group size), with no pattern histogram (groups independent);
(3) steps - a per-step profile of P steps maps target step ``s`` of ``S`` to measured
step ``floor(s*(P-1)/(S-1) + 1/2)``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kaleido.reuse import ModeMap, ModeStats

from .workloads import OP_KINDS, Workload

FORMAT = "kaleido-profile"
VERSION = 1
LINEAR_CHUNK = 128


@dataclass
class OpProfile:
    """Measured statistics of one op kind: pooled ``stats`` and optional ``per_step``."""

    stats: ModeStats
    per_step: list[ModeStats] = field(default_factory=list)

    def at_step(self, step: int, steps: int) -> ModeStats:
        if not self.per_step:
            return self.stats
        P = len(self.per_step)
        idx = 0 if steps <= 1 else int(np.floor(step * (P - 1) / (steps - 1) + 0.5))
        return self.per_step[idx]

    def to_dict(self) -> dict:
        d = {"stats": self.stats.to_dict()}
        if self.per_step:
            d["per_step"] = [s.to_dict() for s in self.per_step]
        return d


@dataclass
class Profile:
    """Reuse statistics per op kind (``None``: the op runs dense).  See the module docstring."""

    model: str
    grid: tuple[int, int, int]
    ops: dict[str, OpProfile | ModeStats | None]
    label: str = ""
    source: str = ""

    def __post_init__(self) -> None:
        self.grid = tuple(int(x) for x in self.grid)
        if len(self.grid) != 3 or min(self.grid) < 1:
            raise ValueError(f"profile grid {self.grid} must be three positive ints (T, H, W)")
        ops = {}
        for k, v in self.ops.items():
            if k not in OP_KINDS:
                raise ValueError(f"profile op kind {k!r} is unknown; known: {sorted(OP_KINDS)}")
            if isinstance(v, ModeStats):
                v = OpProfile(v)
            if v is not None and not isinstance(v, OpProfile):
                raise ValueError(f"profile op {k!r}: expected ModeStats, OpProfile or None, got {type(v).__name__}")
            if v is not None:
                for s in [v.stats, *v.per_step]:
                    if s.group_sizes != v.stats.group_sizes or s.group_names != v.stats.group_names:
                        raise ValueError(f"profile op {k!r}: per-step stats have other groups than the pooled stats")
            ops[k] = v
        self.ops = ops

    # -- construction from the algorithm's outputs ---------------------------------------
    @classmethod
    def from_mode_maps(cls, model: str, maps: dict[str, list[ModeMap] | None], label: str = "", source: str = "") -> "Profile":
        """Pool mode maps per op kind (video rows only); each list entry is one step's map(s)."""
        ops: dict[str, OpProfile | None] = {}
        grid = None
        for k, lst in maps.items():
            if lst is None:
                ops[k] = None
                continue
            per = []
            for mm in lst:
                g = mm.grid
                grid = grid or (g.T, g.H, g.W)
                sub = ModeMap(mm.modes[..., g.grid_slice, :].contiguous(),
                              type(g)(g.T, g.H, g.W), mm.groups, mm.low_bits)
                per.append(sub.stats())
            pooled = per[0]
            for s in per[1:]:
                pooled = pooled + s
            ops[k] = OpProfile(pooled, per if len(per) > 1 else [])
        if grid is None:
            raise ValueError("from_mode_maps needs at least one op with mode maps")
        return cls(model, grid, ops, label, source)

    # -- JSON ---------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {"format": FORMAT, "version": VERSION, "model": self.model,
                "grid": dict(zip("THW", self.grid)), "label": self.label, "source": self.source,
                "ops": {k: (None if v is None else v.to_dict()) for k, v in self.ops.items()}}

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1))

    @classmethod
    def from_dict(cls, d: dict, where: str = "profile") -> "Profile":
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise ValueError(f"{where} is not a Kaleido profile (need \"format\": \"{FORMAT}\")")
        if d.get("version") != VERSION:
            raise ValueError(f"{where} has version {d.get('version')!r}; this simulator reads version {VERSION}")
        for key in ("model", "grid", "ops"):
            if key not in d:
                raise ValueError(f"{where} is missing the key {key!r}")
        try:
            grid = tuple(int(d["grid"][a]) for a in "THW")
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{where}: grid must be {{\"T\":..,\"H\":..,\"W\":..}}, got {d['grid']!r}") from None
        if not isinstance(d["ops"], dict):
            raise ValueError(f"{where}: ops must be an object of op kind -> stats")
        ops = {}
        for k, v in d["ops"].items():
            if v is None:
                ops[k] = None
                continue
            try:
                ops[k] = OpProfile(ModeStats.from_dict(v["stats"]), [ModeStats.from_dict(s) for s in v.get("per_step", [])])
            except (KeyError, TypeError, ValueError) as e:
                raise ValueError(f"{where}: op {k!r} has corrupt statistics ({e})") from None
        return cls(str(d["model"]), grid, ops, str(d.get("label", "")), str(d.get("source", "")))

    @classmethod
    def load(cls, path: str | Path) -> "Profile":
        p = Path(path)
        try:
            d = json.loads(p.read_text())
        except FileNotFoundError:
            raise ValueError(f"profile {str(p)!r} does not exist") from None
        except json.JSONDecodeError as e:
            raise ValueError(f"profile {str(p)!r} is not valid JSON ({e})") from None
        return cls.from_dict(d, where=f"profile {str(p)!r}")

    # -- applying it to a workload -------------------------------------------------------
    def check_applies(self, wl: Workload, transfer: bool) -> None:
        """Raise unless every op kind of ``wl`` is covered and the model/grid match (or ``transfer``)."""
        missing = [k for k in wl.op_kinds() if k not in self.ops and k != "cross_proj_kv"]
        if missing:
            raise ValueError(
                f"profile {self.label or self.model!r} has no entry for op kinds {missing} of workload {wl.name}; "
                "add them (null keeps an op dense)"
            )
        same = self.model == wl.model.name and self.grid == tuple(wl.grid_thw)
        if not same and not transfer:
            raise ValueError(
                f"profile measured on {self.model!r} at grid {self.grid} does not match workload {wl.name} "
                f"({wl.model.name!r}, grid {tuple(wl.grid_thw)}); pass transfer=True (CLI --transfer) to carry it "
                "with the documented rule (docs/hardware.md, 'carrying a profile')"
            )

    def stats_for(self, wl: Workload, op: str, K: int, step: int | None = None, transfer: bool = False) -> ModeStats | None:
        """Statistics for op kind ``op`` of ``wl`` whose A operand has ``K`` channels (None: dense)."""
        if op == "cross_proj_kv":  # text-only rows never reuse
            return None
        entry = self.ops.get(op)
        if entry is None:
            return None
        st = entry.stats if step is None else entry.at_step(step, wl.steps)
        if transfer and not self._same(wl):
            return carry_stats(st, _target_groups(wl, op, K))
        if sum(st.group_sizes) != K:
            raise ValueError(
                f"profile op {op!r} has groups {dict(zip(st.group_names, st.group_sizes))} summing to "
                f"{sum(st.group_sizes)} channels, but {wl.name}'s {op} has K={K}; pass transfer=True"
            )
        return st

    def _same(self, wl: Workload) -> bool:
        return self.model == wl.model.name and self.grid == tuple(wl.grid_thw)


def _target_groups(wl: Workload, op: str, K: int) -> tuple[tuple[int, ...], tuple[str, ...]]:
    m = wl.model
    if op == "self_attn_qk" and m.rope_thw is not None and sum(m.rope_thw) == K:
        return tuple(m.rope_thw), ("t", "h", "w")
    c = min(LINEAR_CHUNK, K)
    sizes = [c] * (K // c) + ([K % c] if K % c else [])
    return tuple(sizes), tuple(f"c{i}" for i in range(len(sizes)))


def carry_stats(st: ModeStats, target: tuple[tuple[int, ...], tuple[str, ...]]) -> ModeStats:
    """The carry-over rule (module docstring, points 1-2) on one op's statistics."""
    sizes, names = target
    n = st.n_rows
    if tuple(st.group_names) == tuple(names):
        return ModeStats(sizes, names, st.low_bits, st.mode_counts, st.pattern_counts)
    w = np.asarray(st.group_sizes, dtype=np.float64)
    pooled = (st.mode_counts * w[:, None]).sum(0) / w.sum()  # rows per mode, channel-weighted
    counts = apportion_row(pooled, n)
    return ModeStats(sizes, names, st.low_bits, np.tile(counts, (len(sizes), 1)), None)


def apportion_row(x: np.ndarray, total: int) -> np.ndarray:
    base = np.floor(x).astype(np.int64)
    short = int(total - base.sum())
    if short > 0:
        base[np.argsort(-(x - base), kind="stable")[:short]] += 1
    return base
