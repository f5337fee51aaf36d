"""Reuse profiles: measured mode statistics per op kind, and how they carry to a workload.

A profile is what the simulator needs from the algorithm: for every op kind of a
workload (``kaleido.ops.HW_OPS``) the additive :class:`ModeStats` of the
mode maps measured on it (video-token rows only), or ``None`` for an op kept dense;
optionally one ``ModeStats`` per measured denoising step.

JSON format (``version`` 1)::

    {"format": "kaleido-profile", "version": 1,
     "model": "wan-1.3b",                 # workload model name it was measured on (or any label)
     "grid": {"T": 21, "H": 30, "W": 52}, # measured token grid (video tokens)
     "label": "...", "source": "...",     # what produced it - say if it is synthetic
     "ops": {"self_attn_qk": {"stats": <ModeStats.to_dict()>,
                              "per_step": [<ModeStats.to_dict()>, ...],    # optional
                              "axes": ["w", "t", "t"],                     # optional: reuse axis per group
                              "decided": 0.96, "per_step_decided": [...]}, # optional: share of rows judged
             "ffn_up": null, ...}}

Build one in code with ``Profile(model, grid, {op: ModeStats}, ...)`` or
:meth:`Profile.from_mode_maps`.

Carry-over rule (``docs/hardware.md`` states it as an assumption).  A profile applies
as-is only to the model and grid it was measured on.  With ``transfer=True`` it is
carried to another model or resolution by: (1) rows - the rows with no reference (position
0 on a group's reuse axis: ``1/L_axis`` of the grid, always COMPUTE) are re-derived for
the target grid, and the mode fractions of the other rows are carried unchanged (needs
the groups' ``axes`` in the profile; without them all fractions carry as measured); text
rows always compute; (2) groups - when the measured group names equal the target op's
(RoPE ``t/h/w``), the per-group fractions are kept per name with the target's group
sizes and the row-pattern histogram is kept, reweighted by iterative proportional
fitting to the carried per-group fractions; otherwise the target's groups are chunks
of ``min(128, K)`` channels that all take the measured fractions pooled over groups
(weighted by group size), with no pattern histogram (groups independent); (3) steps - a
per-step profile of P steps maps target step ``s`` of ``S`` to measured step
``floor(s*(P-1)/(S-1) + 1/2)``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kaleido.atomic import write_atomic
from kaleido.ops import HW_OPS
from kaleido.reuse import ModeMap, ModeStats

from .workloads import Workload

FORMAT = "kaleido-profile"
VERSION = 1
LINEAR_CHUNK = 128



def check_format(d, fmt: str, version: int, where: str, what: str) -> None:
    """Refuse ``d`` unless it is a dict with ``"format": fmt`` and ``"version": version``."""
    if not isinstance(d, dict) or d.get("format") != fmt:
        raise ValueError(f"{where} is not {what} (need \"format\": \"{fmt}\")")
    if d.get("version") != version:
        raise ValueError(f"{where} has version {d.get('version')!r}; this simulator reads version {version}")


def read_json_file(path: str | Path, what: str) -> dict:
    """The JSON object in ``path``; a missing or unparsable file raises ``ValueError`` naming ``what`` it should be."""
    p = Path(path)
    try:
        return json.loads(p.read_text())
    except FileNotFoundError:
        raise ValueError(f"{what} {str(p)!r} does not exist") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{what} {str(p)!r} is not valid JSON ({e})") from None

@dataclass
class OpProfile:
    """Measured statistics of one op kind: pooled ``stats`` and optional ``per_step``."""

    stats: ModeStats
    per_step: list[ModeStats] = field(default_factory=list)
    axes: tuple[str, ...] | None = None  # reuse axis of each group ('t'/'h'/'w'), when known
    #: window size w -> per group, the fraction of aligned windows of w consecutive video
    #: rows (sequence order) in which every row is FULL; measured from mode maps
    window_full: dict[int, list[float]] | None = None
    #: share of the rows the decision unit judged (the rest ran with reuse switched off,
    #: e.g. layers or steps a schedule keeps dense); pooled, and optionally per step
    decided: float = 1.0
    per_step_decided: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.decided = float(self.decided)
        self.per_step_decided = [float(x) for x in self.per_step_decided]
        for x in [self.decided, *self.per_step_decided]:
            if not 0.0 <= x <= 1.0:
                raise ValueError(f"OpProfile.decided={x!r} must be a share of rows in [0, 1]")
        if self.per_step_decided and len(self.per_step_decided) != len(self.per_step):
            raise ValueError(f"OpProfile.per_step_decided has {len(self.per_step_decided)} entries for "
                             f"{len(self.per_step)} steps; give one per step or none")
        if self.window_full is not None:
            G = len(self.stats.group_sizes)
            wf = {}
            for w, v in self.window_full.items():
                v = [float(x) for x in v]
                if int(w) < 1 or len(v) != G or any(not 0.0 <= x <= 1.0 for x in v):
                    raise ValueError(f"OpProfile.window_full[{w}] must hold {G} fractions in [0, 1], got {v}")
                wf[int(w)] = v
            self.window_full = wf
        if self.axes is not None:
            self.axes = tuple(str(a) for a in self.axes)
            if len(self.axes) != len(self.stats.group_sizes) or any(a not in ("t", "h", "w") for a in self.axes):
                raise ValueError(f"OpProfile.axes {self.axes} must give one of 't', 'h', 'w' per group "
                                 f"({len(self.stats.group_sizes)} groups)")

    def _step_index(self, step: int, steps: int) -> int:
        P = len(self.per_step)
        return 0 if steps <= 1 else int(np.floor(step * (P - 1) / (steps - 1) + 0.5))

    def at_step(self, step: int, steps: int) -> ModeStats:
        if not self.per_step:
            return self.stats
        return self.per_step[self._step_index(step, steps)]

    def decided_at(self, step: int | None, steps: int) -> float:
        """Share of rows the decision unit judged at workload ``step`` (``None``: pooled)."""
        if step is None or not self.per_step_decided:
            return self.decided
        return self.per_step_decided[self._step_index(step, steps)]

    def to_dict(self) -> dict:
        d = {"stats": self.stats.to_dict()}
        if self.per_step:
            d["per_step"] = [s.to_dict() for s in self.per_step]
        if self.axes is not None:
            d["axes"] = list(self.axes)
        if self.window_full:
            d["window_full"] = {str(w): list(v) for w, v in sorted(self.window_full.items())}
        if self.decided != 1.0 or any(x != 1.0 for x in self.per_step_decided):
            d["decided"] = self.decided
            if self.per_step_decided:
                d["per_step_decided"] = list(self.per_step_decided)
        return d

    def fold_full(self, R: int) -> np.ndarray | None:
        """Per group, the fraction of R-row folds of consecutive rows that are all FULL.

        Interpolated log-linearly between measured window sizes; beyond the largest
        measured size ``w`` it follows ``p(w) ** (R / w)`` (independent blocks).
        """
        if not self.window_full:
            return None
        ws = np.array(sorted(self.window_full), dtype=np.float64)
        P = np.array([self.window_full[int(w)] for w in ws], dtype=np.float64)
        logp = np.log(np.clip(P, 1e-300, 1.0))
        out = np.empty(P.shape[1])
        for g in range(P.shape[1]):
            if R >= ws[-1]:
                out[g] = logp[-1, g] * R / ws[-1]
            elif R <= ws[0]:
                out[g] = logp[0, g] * R / ws[0]
            else:
                out[g] = np.interp(R, ws, logp[:, g])
        return np.exp(out)


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
            if k not in HW_OPS:
                raise ValueError(f"profile op kind {k!r} is unknown; known: {sorted(HW_OPS)}")
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
            wins: dict[int, list[np.ndarray]] = {}
            for mm in lst:
                g = mm.grid
                grid = grid or (g.T, g.H, g.W)
                sub = ModeMap(mm.modes[..., g.grid_slice, :].contiguous(),
                              type(g)(g.T, g.H, g.W), mm.groups, mm.low_bits)
                per.append(sub.stats())
                for w, full in window_full_counts(sub.modes.numpy()).items():
                    wins.setdefault(w, []).append(full)
            pooled = per[0]
            for s in per[1:]:
                pooled = pooled + s
            wf = {}
            for w, v in wins.items():
                tot = np.sum(v, axis=0)  # (2, G): all-FULL windows, windows
                wf[w] = (tot[0] / np.maximum(1.0, tot[1])).tolist()
            ops[k] = OpProfile(pooled, per if len(per) > 1 else [], tuple(a.value for a in lst[0].groups.axes), wf)
        if grid is None:
            raise ValueError("from_mode_maps needs at least one op with mode maps")
        return cls(model, grid, ops, label, source)

    # -- JSON ---------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {"format": FORMAT, "version": VERSION, "model": self.model,
                "grid": dict(zip("THW", self.grid)), "label": self.label, "source": self.source,
                "ops": {k: (None if v is None else v.to_dict()) for k, v in self.ops.items()}}

    def save(self, path: str | Path) -> None:
        write_atomic(path, json.dumps(self.to_dict(), indent=1))

    @classmethod
    def from_dict(cls, d: dict, where: str = "profile") -> "Profile":
        check_format(d, FORMAT, VERSION, where, "a Kaleido profile")
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
                ops[k] = OpProfile(ModeStats.from_dict(v["stats"]), [ModeStats.from_dict(s) for s in v.get("per_step", [])],
                                   v.get("axes"), v.get("window_full"), v.get("decided", 1.0),
                                   v.get("per_step_decided", []))
            except (KeyError, TypeError, ValueError) as e:
                raise ValueError(f"{where}: op {k!r} has corrupt statistics ({e})") from None
        return cls(str(d["model"]), grid, ops, str(d.get("label", "")), str(d.get("source", "")))

    @classmethod
    def load(cls, path: str | Path) -> "Profile":
        return cls.from_dict(read_json_file(path, "profile"), where=f"profile {str(path)!r}")

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
            key = (op, id(st), K, wl.model.name, tuple(wl.grid_thw))
            memo = self.__dict__.setdefault("_carried", {})
            if key not in memo:
                memo[key] = (st, carry_stats(st, _target_groups(wl, op, K), axes=entry.axes,
                                             src_grid=self.grid, dst_grid=tuple(wl.grid_thw)))
            return memo[key][1]
        if sum(st.group_sizes) != K:
            raise ValueError(
                f"profile op {op!r} has groups {dict(zip(st.group_names, st.group_sizes))} summing to "
                f"{sum(st.group_sizes)} channels, but {wl.name}'s {op} has K={K}; pass transfer=True"
            )
        return st

    def fold_full_for(self, wl: Workload, op: str, K: int, R: int, transfer: bool = False) -> np.ndarray | None:
        """Per target group, the measured fraction of all-FULL R-row folds (``None``: not measured).

        Carried like the fractions: per group name when the names match, else pooled
        (weighted by channels) onto every target chunk; measured at the profile's grid.
        """
        entry = self.ops.get(op)
        if entry is None or op == "cross_proj_kv":
            return None
        ff = entry.fold_full(R)
        if ff is None:
            return None
        st = entry.stats
        if not transfer or self._same(wl):
            return ff  # the statistics are used as measured, groups and all
        sizes, names = _target_groups(wl, op, K)
        if tuple(st.group_names) == tuple(names):
            return ff
        w = np.asarray(st.group_sizes, dtype=np.float64)
        return np.full(len(sizes), float((ff * w).sum() / w.sum()))

    def axis_mix_for(self, wl: Workload, op: str, K: int, transfer: bool = False) -> np.ndarray | None:
        """``(G, 3)`` share of each target group's reuse along t / h / w (``None``: axes not recorded).

        Carried like the fractions: per group name when the names match, else the
        measured groups' axes pooled by channel count onto every target chunk.
        """
        entry = self.ops.get(op)
        if entry is None or entry.axes is None or op == "cross_proj_kv":
            return None
        st = entry.stats
        one = np.array([[a == x for x in "thw"] for a in entry.axes], dtype=np.float64)
        if not transfer or self._same(wl):
            return one
        sizes, names = _target_groups(wl, op, K)
        if tuple(st.group_names) == tuple(names):
            return one
        w = np.asarray(st.group_sizes, dtype=np.float64)
        return np.tile((one * w[:, None]).sum(0) / w.sum(), (len(sizes), 1))

    def row_skip_for(self, wl: Workload, K: int, step: int | None = None, transfer: bool = False
                     ) -> tuple[float, str | None]:
        """P.V row skip (SPEC §4): ``(share of video rows, anchor axis)`` from self-attention q.k^T.

        A q.k^T row FULL in every group whose groups all reuse along one axis has the
        anchor's effective query, hence its scores, probabilities and P.V output: it
        skips P.V without a decision.  Rows FULL along different axes do not.  Needs the
        row-pattern histogram and the groups' axes; without them the share is 0.
        """
        entry = self.ops.get("self_attn_qk")
        if entry is None or entry.axes is None or len(set(entry.axes)) != 1:
            return 0.0, None
        st = self.stats_for(wl, "self_attn_qk", K, step=step, transfer=transfer)
        if st is None or st.pattern_counts is None or st.n_rows == 0:
            return 0.0, None
        G = len(st.group_sizes)
        all_full = sum(2 * 3**g for g in range(G))
        return float(st.pattern_counts[all_full]) / st.n_rows, entry.axes[0]

    def _same(self, wl: Workload) -> bool:
        return self.model == wl.model.name and self.grid == tuple(wl.grid_thw)


def _target_groups(wl: Workload, op: str, K: int) -> tuple[tuple[int, ...], tuple[str, ...]]:
    m = wl.model
    if op == "self_attn_qk" and m.rope_thw is not None and sum(m.rope_thw) == K:
        return tuple(m.rope_thw), ("t", "h", "w")
    c = min(LINEAR_CHUNK, K)
    sizes = [c] * (K // c) + ([K % c] if K % c else [])
    return tuple(sizes), tuple(f"c{i}" for i in range(len(sizes)))


_AXIS_DIM = {"t": 0, "h": 1, "w": 2}
WINDOW_SIZES = tuple(2**k for k in range(1, 11))


def window_full_counts(modes: np.ndarray) -> dict[int, np.ndarray]:
    """``w -> [(G,) all-FULL window counts, number of windows]`` over aligned windows of rows.

    ``modes``: ``(..., S, G)`` uint8 (video rows only, sequence order).
    """
    m = np.asarray(modes).reshape(-1, modes.shape[-2], modes.shape[-1])
    out = {}
    for w in WINDOW_SIZES:
        nw = m.shape[1] // w
        if nw == 0:
            break
        full = (m[:, : nw * w].reshape(m.shape[0], nw, w, m.shape[2]) == 2).all(axis=2)
        out[w] = np.array([full.sum(axis=(0, 1)), np.full(m.shape[2], m.shape[0] * nw)], dtype=np.float64)
    return out


def interior_fractions(st: ModeStats, grid: tuple[int, int, int], axes: tuple[str, ...]) -> np.ndarray | None:
    """Mode fractions of the rows that have a reference, per group (``None`` if not separable).

    A row at position 0 on its group's axis has no reference and always computes:
    ``n_grid / L_axis`` of every ``n_grid`` rows.  Removing them from the COMPUTE
    count leaves the fractions of the rows the decision actually judged.
    """
    n_grid = int(np.prod(grid))
    if st.n_rows == 0 or st.n_rows % n_grid:
        return None
    inst = st.n_rows // n_grid
    out = np.empty((len(st.group_sizes), 3))
    for g, a in enumerate(axes):
        L = grid[_AXIS_DIM[a]]
        b = inst * n_grid // L
        if L < 2 or st.mode_counts[g, 0] < b:
            return None
        c = st.mode_counts[g].astype(np.float64).copy()
        c[0] -= b
        out[g] = c / (st.n_rows - b)
    return out


def _boundary(grid: tuple[int, int, int], a: str) -> float:
    return 1.0 / grid[_AXIS_DIM[a]]


def fit_histogram(pattern_counts: np.ndarray, target_frac: np.ndarray, n: int, iters: int = 100) -> np.ndarray:
    """Reweight a row-pattern histogram so its per-group marginals match ``target_frac`` (IPF).

    Iterative proportional fitting: the histogram closest (in KL divergence) to the
    measured one with the target marginals.  Returns integer counts summing to ``n``.
    """
    G = target_frac.shape[0]
    modes = np.stack([(np.arange(3**G) // 3**g) % 3 for g in range(G)], axis=1)
    P = pattern_counts.astype(np.float64) / max(1, pattern_counts.sum())
    for _ in range(iters):
        for g in range(G):
            for m in range(3):
                mask = modes[:, g] == m
                cur = P[mask].sum()
                if cur > 0:
                    P[mask] *= target_frac[g, m] / cur
        P /= P.sum()
    return apportion_row(P * n, n)


def carry_stats(st: ModeStats, target: tuple[tuple[int, ...], tuple[str, ...]], *, axes: tuple[str, ...] | None = None,
                src_grid: tuple[int, int, int] | None = None, dst_grid: tuple[int, int, int] | None = None) -> ModeStats:
    """The carry-over rule (module docstring) on one op's statistics.

    With the groups' reuse ``axes`` and both grids known, the boundary rows (no
    reference, always COMPUTE) are re-derived for the target grid and only the
    interior rows' fractions are carried; otherwise the fractions carry as measured.
    """
    sizes, names = target
    n = st.n_rows
    inner = None
    if axes is not None and src_grid is not None and dst_grid is not None:
        inner = interior_fractions(st, tuple(src_grid), tuple(axes))
    if tuple(st.group_names) == tuple(names):
        if inner is None:
            return ModeStats(sizes, names, st.low_bits, st.mode_counts, st.pattern_counts)
        beta = np.array([_boundary(dst_grid, a) for a in axes])
        frac = (1 - beta)[:, None] * inner
        frac[:, 0] += beta
        if st.pattern_counts is not None:
            pc = fit_histogram(st.pattern_counts, frac, n)
            G = len(sizes)
            modes = np.stack([(np.arange(3**G) // 3**g) % 3 for g in range(G)], axis=1)
            mc = np.stack([np.bincount(modes[:, g], weights=pc, minlength=3) for g in range(G)]).astype(np.int64)
            return ModeStats(sizes, names, st.low_bits, mc, pc)
        mc = np.stack([apportion_row(f * n, n) for f in frac])
        return ModeStats(sizes, names, st.low_bits, mc, None)
    w = np.asarray(st.group_sizes, dtype=np.float64)
    w = w / w.sum()
    if inner is None:
        pooled = (st.fractions() * w[:, None]).sum(0)
    else:
        beta = float(sum(wg * _boundary(dst_grid, a) for wg, a in zip(w, axes)))
        pooled = (1 - beta) * (inner * w[:, None]).sum(0)
        pooled[0] += beta
    counts = apportion_row(pooled * n, n)
    return ModeStats(sizes, names, st.low_bits, np.tile(counts, (len(sizes), 1)), None)


def apportion_row(x: np.ndarray, total: int) -> np.ndarray:
    base = np.floor(x).astype(np.int64)
    short = int(total - base.sum())
    if short > 0:
        base[np.argsort(-(x - base), kind="stable")[:short]] += 1
    return base
