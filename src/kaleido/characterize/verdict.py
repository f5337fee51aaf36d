"""The paper's axis claim with its noise: a verdict per RoPE group that survives a new prompt.

The pooled claim check (:func:`kaleido.characterize.result.check_claim`) compares the groups' median
Delta pooled over every run, and on the miniature model two axes often differ by 1-2 int8 units: a new
prompt can flip it. Here every (prompt, seed) run keeps its own Delta histograms
(:attr:`OperandRecorder.run_hists`), and for each group of ``self_q`` and ``self_k``:

* per run, the median Delta along each axis (the SPEC's best-axis statistic);
* per prompt, the mean over its seeds; the **best axis** is the one with the lowest mean over prompts,
  its **margin** the second best's mean minus the best's, with a 95% bootstrap interval over prompts;
* the paper's test: ``d`` = (lowest median Delta among the axes the paper does *not* name for the group)
  - (lowest among the axes it names), per prompt. Its 95% interval above 0: the claim **holds**; below 0:
  it **does not hold**; containing 0: **undecided** (within the prompt-to-prompt noise). Fewer than two
  prompts give no interval: undecided.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch

from kaleido.metrics import bootstrap_interval

from .neighbours import AXES, hist_quantile

#: the axes along which the paper expects each RoPE group to be most alike (SPEC §1-2)
PAPER_AXES: dict[str, tuple[str, ...]] = {"t": ("h", "w"), "h": ("t",), "w": ("t",)}


@dataclass
class GroupVerdict:
    operand: str
    group: str
    best_axis: str
    second_axis: str | None
    margin: float | None  # second best's mean median Delta minus the best's (int8 units)
    margin_ci95: tuple[float, float] | None
    median_delta: dict[str, float]  # axis -> mean over prompts of the per-run median Delta
    paper_axes: tuple[str, ...]
    paper_gap: float  # best non-paper axis minus best paper axis (> 0: the paper's axes are better)
    paper_gap_ci95: tuple[float, float]
    verdict: str  # "holds" | "does not hold" | "undecided"
    prompts: int
    runs: int

    def statement(self) -> str:
        m = "n/a" if self.margin is None else (f"{self.margin:.2f} [{self.margin_ci95[0]:.2f}, "
                                                f"{self.margin_ci95[1]:.2f}]")
        return (f"{self.operand} {self.group}-group: best axis {self.best_axis} (margin over {self.second_axis}: {m} "
                f"int8 units); paper axes {'/'.join(self.paper_axes)} lead the others by {self.paper_gap:.2f} "
                f"[{self.paper_gap_ci95[0]:.2f}, {self.paper_gap_ci95[1]:.2f}] -> {self.verdict.upper()} "
                f"({self.prompts} prompts, {self.runs} runs)")

    def to_dict(self) -> dict:
        return asdict(self)


def _per_prompt(values: dict[tuple[str, int], float]) -> dict[str, float]:
    by: dict[str, list[float]] = {}
    for (prompt, _seed), v in values.items():
        if np.isfinite(v):
            by.setdefault(prompt, []).append(v)
    return {p: float(np.mean(v)) for p, v in by.items()}


def group_verdicts(run_hists: dict[tuple[tuple[str, int], str], torch.Tensor], group_names: dict[str, tuple[str, ...]],
                   operands: tuple[str, ...] = ("self_q", "self_k")) -> list[GroupVerdict]:
    """Verdicts for every RoPE group of ``operands``; ``run_hists[(run, operand)]`` is the ``(G, 3, bins)``
    Delta histogram of one (prompt, seed) run, ``group_names[operand]`` its groups' names."""
    out = []
    for op in operands:
        runs = sorted(r for r, o in run_hists if o == op)
        if not runs:
            continue
        med = {r: hist_quantile(run_hists[(r, op)], 0.5) for r in runs}  # (G, 3) per run
        for g, gname in enumerate(group_names[op]):
            expect = PAPER_AXES.get(gname)
            if expect is None:
                continue
            per_axis = {a: _per_prompt({r: float(med[r][g, j]) for r in runs}) for j, a in enumerate(AXES)}
            per_axis = {a: v for a, v in per_axis.items() if v}  # an axis of length 1 has no neighbours
            means = {a: float(np.mean(list(v.values()))) for a, v in per_axis.items()}
            ranked = sorted(means, key=lambda a: (means[a], AXES.index(a)))
            best, second = ranked[0], (ranked[1] if len(ranked) > 1 else None)
            prompts = sorted(per_axis[best])
            margin = ci = None
            if second is not None:
                diffs = [per_axis[second][p] - per_axis[best][p] for p in prompts]
                margin, ci = float(np.mean(diffs)), bootstrap_interval(diffs)
            paper = [a for a in expect if a in per_axis]
            other = [a for a in per_axis if a not in expect]
            gaps = [min(per_axis[a][p] for a in other) - min(per_axis[a][p] for a in paper) for p in prompts] \
                if paper and other else [0.0]
            gap_ci = bootstrap_interval(gaps)
            if len(prompts) < 2:  # one prompt has no prompt-to-prompt noise to measure
                verdict = "undecided"
            else:
                verdict = "holds" if gap_ci[0] > 0 else ("does not hold" if gap_ci[1] < 0 else "undecided")
            out.append(GroupVerdict(op, gname, best, second, margin, ci, means, tuple(expect), float(np.mean(gaps)),
                                    gap_ci, verdict, len(prompts), len(runs)))
    return out
