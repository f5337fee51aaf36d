"""What reuse the paper's figures would need under this cost model, and what the shipped profile measured.

:func:`uniform_profile` is a SYNTHETIC profile: in every group of every op in ``scope``,
each video row that has a reference (not at position 0 on its group's reuse axis) is
FULL with probability ``full`` and PARTIAL with probability ``partial``, independently
across groups; rows without a reference and text rows compute.  Scopes: ``"all"`` -
every op that may reuse except P.V; ``"attention"`` - the q.k^T ops only.  P.V stays
dense in both: under this model P.V reuse cannot save time (its decision reads as many
channels as the dense P.V streams, docs/hardware.md §9b item 3), and a P.V with reuse
statistics cannot be split by keys across a chip's arrays.  Groups are those of
``benchmarks/cost_audit.ceiling_profile``: q.k^T's RoPE groups t/h/w reusing along
``qk_axes`` (default w, t, t: the calibrated axes), other ops chunks of 128 channels
reusing along t.

:func:`first_reaching` finds, on a grid of FULL shares, the first at which a figure of
merit of :func:`kaleido.hw.designs.kaleido.simulate` reaches a target (interpolated);
:func:`measured_fractions` gives the MAC-weighted FULL / PARTIAL shares of a measured
profile carried to a workload, in the same two scopes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kaleido.reuse import Mode, ModeStats

from ..inputs.profile import LINEAR_CHUNK, OpProfile, Profile
from ..inputs.workloads import Workload

SCOPES = ("all", "attention")
_DIM = {"t": 0, "h": 1, "w": 2}


def _in_scope(op: str, scope: str) -> bool:
    if op in ("cross_proj_kv", "self_attn_pv", "cross_attn_pv"):
        return False
    return scope == "all" or op.endswith("_attn_qk")


def _groups(wl: Workload, op: str, K: int, qk_axes: tuple[str, str, str]):
    if op == "self_attn_qk" and wl.model.rope_thw is not None and sum(wl.model.rope_thw) == K:
        return tuple(wl.model.rope_thw), ("t", "h", "w"), tuple(qk_axes)
    c = min(LINEAR_CHUNK, K)
    sizes = tuple([c] * (K // c) + ([K % c] if K % c else []))
    return sizes, tuple(f"c{i}" for i in range(len(sizes))), ("t",) * len(sizes)


def uniform_profile(wl: Workload, full: float, partial: float = 0.0, scope: str = "all", low_bits: int = 4,
                    qk_axes: tuple[str, str, str] = ("w", "t", "t")) -> Profile:
    """A SYNTHETIC profile of ``wl`` with FULL / PARTIAL shares ``full`` / ``partial`` (see the module docstring)."""
    if scope not in SCOPES:
        raise ValueError(f"scope {scope!r} is not one of {SCOPES}")
    for name, v in (("full", full), ("partial", partial)):
        if not 0.0 <= v <= 1.0:
            raise ValueError(f"uniform_profile: {name}={v!r} must be a share in [0, 1]")
    if full + partial > 1.0 + 1e-12:
        raise ValueError(f"uniform_profile: full + partial = {full + partial:.4g} exceeds 1; lower one of them")
    n = wl.n_video
    ops: dict[str, OpProfile | None] = {}
    for g in wl.gemms:
        if g.op in ops:
            continue
        if not _in_scope(g.op, scope):
            ops[g.op] = None
            continue
        sizes, names, axes = _groups(wl, g.op, g.K, qk_axes)
        b = np.array([n // wl.grid_thw[_DIM[a]] for a in axes])  # rows without a reference
        f = np.round(full * (n - b)).astype(np.int64)
        p = np.minimum(np.round(partial * (n - b)).astype(np.int64), n - b - f)
        mc = np.stack([n - f - p, p, f], axis=1)
        ops[g.op] = OpProfile(ModeStats(sizes, names, low_bits, mc, None), axes=axes)
    return Profile(wl.model.name, wl.grid_thw, ops,
                   label=f"SYNTHETIC uniform: FULL {full:.3f}, PARTIAL {partial:.3f} on {scope} ops")


def measured_fractions(profile: Profile, wl: Workload, scope: str = "all") -> dict[str, float]:
    """MAC-weighted shares of FULL and PARTIAL over the ops in ``scope`` of ``wl`` (all their MACs, video and text rows)."""
    if scope not in SCOPES:
        raise ValueError(f"scope {scope!r} is not one of {SCOPES}")
    tot = full = part = 0.0
    for g in wl.gemms:
        if not _in_scope(g.op, scope):
            continue
        tot += g.macs
        st = profile.stats_for(wl, g.op, g.K, transfer=True)
        if st is None:
            continue
        fr = st.fractions() * (np.asarray(st.group_sizes, dtype=np.float64)[:, None] / g.K)
        video = g.grid_rows / g.M
        full += g.macs * video * float(fr[:, Mode.FULL].sum())
        part += g.macs * video * float(fr[:, Mode.PARTIAL].sum())
    return {"full": full / max(tot, 1.0), "partial": part / max(tot, 1.0)}


@dataclass(frozen=True)
class Required:
    """The FULL share at which a figure of merit first reaches ``target`` (``None``: unreachable)."""

    target: float
    share: float | None
    best: float
    at_zero: float

    def label(self) -> str:
        if self.share is None:
            return f"unreachable (at most {self.best:.2f}x)"
        return "0 (no reuse needed)" if self.share == 0.0 else f"{self.share:.2f}"

    def to_dict(self) -> dict:
        return {"target": self.target, "share": self.share, "best": self.best, "at_zero": self.at_zero}


def first_reaching(shares, values, target: float) -> Required:
    """The smallest share at which ``values`` (measured at increasing ``shares``) reaches ``target``.

    Linear interpolation between the last grid point below the target and the first at or
    above it; the curve need not be monotone (energy is not: a FULL item can cost more in
    reference traffic than it saves, docs/hardware.md §5), only its first crossing counts.
    """
    x = np.asarray(shares, dtype=np.float64)
    y = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape or x.size < 2 or (np.diff(x) <= 0).any():
        raise ValueError("first_reaching: shares must be increasing and match values one to one (at least 2)")
    hit = np.flatnonzero(y >= target)
    if hit.size == 0:
        return Required(target, None, float(y.max()), float(y[0]))
    i = int(hit[0])
    if i == 0:
        return Required(target, float(x[0]), float(y.max()), float(y[0]))
    t = (target - y[i - 1]) / (y[i] - y[i - 1])
    return Required(target, float(x[i - 1] + t * (x[i] - x[i - 1])), float(y.max()), float(y[0]))
