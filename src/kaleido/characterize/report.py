"""What ``kaleido characterize`` writes for a :class:`Characterization`: ``characterization.json``,
``summary.md`` (:func:`summary_markdown`: best axes per operand and group, the paper's claim) and the
heatmaps (:func:`kaleido.characterize.plots.plot_all`)."""

from __future__ import annotations

from pathlib import Path

from kaleido.atomic import write_atomic

from .neighbours import AXES
from .plots import plot_all
from .result import Characterization


def summary_markdown(ch: Characterization) -> str:
    """Best axes per operand and group, and the claim statements, as Markdown."""
    lines = ["| operand | group | best axis | median Delta t / h / w | p90 Delta t / h / w | cos t / h / w |",
             "|---|---|---|---|---|---|"]

    def f(x, nd=0):
        return "n/a" if x is None else (f"{x:.{nd}f}")

    for name, t in ch.operands.items():
        summ, best = t.summary(), t.best_axes()
        for g in t.group_names:
            s = summ[g]
            lines.append(f"| {name} | {g} | {best[g]} | " + " / ".join(f(s[a]['delta_median']) for a in AXES) + " | "
                         + " / ".join(f(s[a]['delta_p90']) for a in AXES) + " | "
                         + " / ".join(f(s[a]['cos_mean'], 3) for a in AXES) + " |")
    claims = ch.statements() or ["no RoPE q/k groups on this model: the paper's claim does not apply"]
    verdicts = [f"- {v.statement()}" for v in ch.verdicts] or ["- no per-run statistics: no verdict"]
    return "\n".join(["## Best reuse axis per group (all layers, steps, heads pooled)", "", *lines, "",
                      "## The paper's claim, pooled over every run", "", *[f"- {c}" for c in claims], "",
                      "## The paper's claim per group, with its noise over prompts (95% bootstrap interval)", "",
                      "Holds: the paper's axes have a lower median Delta than the others on every resample of the "
                      "prompts; does not hold: higher; undecided: the interval contains 0 (or one prompt only).", "",
                      *verdicts, ""])


def write_report(ch: Characterization, out_dir: str | Path) -> list[Path]:
    """``characterization.json``, ``summary.md`` and every figure into ``out_dir``; returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [ch.save(out / "characterization.json"), out / "summary.md"]
    write_atomic(paths[1], summary_markdown(ch))
    return [*paths, *plot_all(ch, out)]
