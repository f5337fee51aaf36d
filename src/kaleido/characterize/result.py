"""The characterisation of a model's latent space: tables, best axes, and the paper's claim.

:class:`OperandTable` holds one operand's statistics over (layer, step, head, group,
axis); :class:`Characterization` holds all operands plus the run's metadata, and
writes ``characterization.json`` (:meth:`Characterization.to_dict`).

Best axis of a group: the axis with the lowest median Delta (int8 units); ties go to
the lower p90, then to the higher mean cosine similarity, then to the order t, h, w.
An axis of length 1 has no neighbours and is never best.

The paper's claim (SPEC §1-2), checked on the RoPE groups of ``self_q`` and ``self_k``:
the t-group is most similar along space (best axis h or w) and the h- and w-groups
along time (best axis t).  Also reported: its weaker form, that every group is least
alike along its own RoPE axis (SPEC §1: "similar along the axes orthogonal to the
group's encoding direction").
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .capture import OperandRecorder
from .neighbours import AXES, hist_quantile
from .verdict import PAPER_AXES, GroupVerdict, group_verdicts

CHARACTERIZATION_VERSION = 1


def _num(x: float, nd: int = 4) -> float | None:
    x = float(x)
    return None if math.isnan(x) else round(x, nd)


def best_axis(median: list[float | None], p90: list[float | None], cos: list[float | None]) -> str | None:
    """The best of :data:`AXES` given per-axis median Delta, p90 Delta and mean cosine (None: no data)."""
    cands = [j for j in range(len(AXES)) if median[j] is not None]
    if not cands:
        return None
    return AXES[min(cands, key=lambda j: (median[j], p90[j] if p90[j] is not None else math.inf,
                                          -(cos[j] if cos[j] is not None else -math.inf), j))]


@dataclass
class OperandTable:
    """One operand's statistics.

    ``delta_hist`` int64 ``(n_layers, n_steps, H, G, 3, bins)``; ``cos_sum`` float64 and
    ``count`` int64 ``(n_layers, n_steps, H, G, 3)``; ``layers``/``steps`` label dims 0/1.
    """

    name: str
    kind: str
    group_names: tuple[str, ...]
    group_sizes: tuple[int, ...]
    read_by: list[str]
    layers: list[int]
    steps: list[int]
    delta_hist: torch.Tensor
    cos_sum: torch.Tensor
    count: torch.Tensor

    @property
    def heads(self) -> int:
        return int(self.delta_hist.shape[2])

    def stats(self, dims: tuple[int, ...]) -> dict[str, torch.Tensor]:
        """Median/p90 Delta and mean cosine, pooled over ``dims`` (of layer, step, head)."""
        h = self.delta_hist.sum(dim=dims) if dims else self.delta_hist
        c = self.cos_sum.sum(dim=dims) if dims else self.cos_sum
        n = self.count.sum(dim=dims) if dims else self.count
        cos = torch.where(n > 0, c / n.clamp(min=1), torch.full_like(c, float("nan")))
        return {"delta_median": hist_quantile(h, 0.5), "delta_p90": hist_quantile(h, 0.9), "cos_mean": cos}

    def summary(self) -> dict[str, dict[str, dict[str, float | None]]]:
        """``{group: {axis: {delta_median, delta_p90, cos_mean}}}`` pooled over layers, steps and heads."""
        return self._by_group_axis(self.stats((0, 1, 2)))

    def _by_group_axis(self, st: dict[str, torch.Tensor]) -> dict:
        out = {}
        for g, gname in enumerate(self.group_names):
            out[gname] = {a: {k: _num(v[g, j]) for k, v in st.items()} for j, a in enumerate(AXES)}
        return out

    def best_axes(self, per_layer: bool = False) -> dict:
        """``{group: axis}`` pooled, or ``{layer: {group: axis}}`` with ``per_layer``."""
        if per_layer:
            st = self.stats((1, 2))
            return {str(layer): self._best(self._by_group_axis({k: v[i] for k, v in st.items()}))
                    for i, layer in enumerate(self.layers)}
        return self._best(self.summary())

    @staticmethod
    def _best(by_group: dict) -> dict[str, str | None]:
        return {g: best_axis([s[a]["delta_median"] for a in AXES], [s[a]["delta_p90"] for a in AXES],
                             [s[a]["cos_mean"] for a in AXES]) for g, s in by_group.items()}

    def layer_axis_hist(self) -> torch.Tensor:
        """``(n_layers, 3, bins)`` Delta histograms per layer and axis, all steps, heads and groups pooled."""
        return self.delta_hist.sum(dim=(1, 2, 3))

    def layer_step_map(self, group: int, axis: str, stat: str = "delta_median") -> torch.Tensor:
        """``(n_layers, n_steps)`` of ``stat`` for ``group`` along ``axis``, pooled over heads."""
        return self.stats((2,))[stat][:, :, group, AXES.index(axis)]

    def to_dict(self, full_table: bool = True) -> dict[str, Any]:
        d: dict[str, Any] = {
            "kind": self.kind,
            "groups": {"names": list(self.group_names), "sizes": list(self.group_sizes)},
            "read_by": list(self.read_by),
            "heads": self.heads,
            "layers": list(self.layers),
            "steps": list(self.steps),
            "pairs_per_axis": {a: int(self.count[..., j].sum()) for j, a in enumerate(AXES)},
            "summary": self.summary(),
            "best_axis": self.best_axes(),
            "best_axis_per_layer": self.best_axes(per_layer=True),
        }
        per_layer = self.stats((1, 2))
        d["per_layer"] = {str(layer): self._by_group_axis({k: v[i] for k, v in per_layer.items()})
                          for i, layer in enumerate(self.layers)}
        per_head = self.stats((0, 1))
        d["per_head"] = {str(h): self._by_group_axis({k: v[h] for k, v in per_head.items()})
                         for h in range(self.heads)}
        if full_table:
            st = self.stats(())
            d["table"] = {"dims": ["layer", "step", "head", "group", "axis"], "axes": list(AXES),
                          **{k: _nested(v) for k, v in st.items()}}
        return d


def _nested(t: torch.Tensor) -> list:
    if t.dim() == 0:
        return _num(t)  # type: ignore[return-value]
    return [_nested(x) for x in t]


@dataclass
class ClaimCheck:
    """Whether the paper's per-group axes hold for one RoPE operand, with the numbers."""

    operand: str
    holds: bool | None
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    statement: str = ""
    #: the weaker form: every group is least alike along its own RoPE axis (alike along both others)
    orthogonal_holds: bool | None = None

    def to_dict(self) -> dict:
        return {"operand": self.operand, "holds": self.holds, "orthogonal_holds": self.orthogonal_holds,
                "groups": self.groups, "statement": self.statement}


def check_claim(table: OperandTable) -> ClaimCheck:
    """The paper's claim on ``table`` (a RoPE operand); ``holds=None`` when it has no t/h/w groups."""
    if table.kind != "rope" or not set(table.group_names) & set(PAPER_AXES):
        return ClaimCheck(table.name, None,
                          statement=f"{table.name}: no RoPE t/h/w groups, the paper's claim does not apply")
    summ, best = table.summary(), table.best_axes()
    groups, parts, ok, orth = {}, [], True, True
    for g in table.group_names:
        expect = PAPER_AXES.get(g)
        if expect is None:
            continue
        b = best[g]
        good = b in expect
        ok &= good
        med = {a: summ[g][a]["delta_median"] for a in AXES}
        cos = {a: summ[g][a]["cos_mean"] for a in AXES}
        others = [med[a] for a in AXES if a != g and med[a] is not None]
        own_worst = med[g] is not None and bool(others) and med[g] > max(others)
        orth &= own_worst
        groups[g] = {"best_axis": b, "paper_axes": list(expect), "agrees": good, "own_axis_least_alike": own_worst,
                     "delta_median": med, "cos_mean": cos}
        nums = ", ".join(f"{a}: {_fmt(med[a])}" for a in AXES)
        parts.append(f"{g}-group best along {b} ({'as' if good else 'NOT as'} the paper: "
                     f"{'/'.join(expect)}; median Delta {nums}; cos along {b} {_fmt(cos.get(b) if b else None)})")
    verdict = "HOLDS" if ok else "DOES NOT HOLD"
    statement = f"{table.name}: the paper's claim {verdict} on this model - " + "; ".join(parts)
    statement += (f". Weaker form (each group least alike along its own RoPE axis, alike along the other two): "
                  f"{'holds' if orth else 'does not hold'}")
    return ClaimCheck(table.name, ok, groups, statement, orth)


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3g}"


@dataclass
class Characterization:
    """Neighbour statistics of every captured operand, with the run's metadata."""

    meta: dict[str, Any]
    operands: dict[str, OperandTable]
    #: the paper's claim per RoPE group with its noise over prompts (:mod:`.verdict`; empty when the
    #: recorder kept no per-run statistics)
    verdicts: list[GroupVerdict] = field(default_factory=list)

    @classmethod
    def from_recorder(cls, rec: OperandRecorder, meta: dict[str, Any]) -> "Characterization":
        tables = {}
        first = ("self_q", "self_k", "cross_q")
        order = [n for n in first if n in rec.operands] + [n for n in rec.operands if n not in first]
        for name in order:
            info = rec.operands[name]
            keys = [k for k in rec.stats if k[0] == name]
            layers = sorted({k[1] for k in keys})
            steps = sorted({k[2] for k in keys})
            first = rec.stats[keys[0]]
            H, G = first.count.shape[:2]
            hist = torch.zeros(len(layers), len(steps), *first.delta_hist.shape, dtype=torch.int64)
            cos = torch.zeros(len(layers), len(steps), H, G, 3, dtype=torch.float64)
            cnt = torch.zeros(len(layers), len(steps), H, G, 3, dtype=torch.int64)
            for _, layer, step in keys:
                st = rec.stats[(name, layer, step)]
                i, j = layers.index(layer), steps.index(step)
                hist[i, j], cos[i, j], cnt[i, j] = st.delta_hist, st.cos_sum, st.count
            tables[name] = OperandTable(name, info.kind, info.groups.names, info.groups.sizes, list(info.read_by),
                                        layers, steps, hist, cos, cnt)
        meta = dict(meta)
        meta.setdefault("metric", rec.metric)
        meta.setdefault("granularity", rec.granularity)
        meta["grids"] = sorted(list(g) for g in rec.grids)
        meta["rope_split"] = None if rec.rope_split is None else list(rec.rope_split)
        verdicts = group_verdicts(rec.run_hists, {n: t.group_names for n, t in tables.items()})
        return cls(meta, tables, verdicts)

    def claims(self) -> list[ClaimCheck]:
        return [check_claim(self.operands[n]) for n in ("self_q", "self_k") if n in self.operands]

    def statements(self) -> list[str]:
        return [c.statement for c in self.claims()]

    def to_dict(self, full_table: bool = True) -> dict[str, Any]:
        return {
            "version": CHARACTERIZATION_VERSION,
            "meta": self.meta,
            "units": ("Delta: metric of the difference between a token's int8 operand and its neighbour's along the "
                      "axis, in int8 units of kaleido.reuse.quantize (one scale per matrix, head and channel group "
                      "with granularity 'group'); cos: cosine similarity of the float operands"),
            "claim": {c.operand: c.to_dict() for c in self.claims()},
            "statements": self.statements(),
            "verdicts": [v.to_dict() for v in self.verdicts],
            "operands": {k: v.to_dict(full_table) for k, v in self.operands.items()},
        }

    def save(self, path: str | Path) -> Path:
        """Write ``characterization.json``: indented, except each full table on one line (a few 100 kB)."""
        path = Path(path)
        d = self.to_dict()
        tables = {}
        for name, op in d["operands"].items():
            if "table" in op:
                key = f"@@table:{name}@@"
                tables[key] = json.dumps(op["table"], separators=(",", ":"))
                op["table"] = key
        text = json.dumps(d, indent=1)
        for key, compact in tables.items():
            text = text.replace(json.dumps(key), compact)
        from kaleido.atomic import write_atomic

        return write_atomic(path, text)
