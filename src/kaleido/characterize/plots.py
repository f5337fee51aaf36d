"""Heatmaps of a :class:`Characterization` (matplotlib, Agg): the figures come from the same
tables as ``characterization.json``, never from numbers typed twice.

* ``group_axis_delta.png`` / ``group_axis_cos.png``: per operand, groups x axes, median
  Delta (int8 units) / mean cosine similarity, pooled over layers, steps and heads;
* ``layer_step_<operand>.png``: per RoPE group of q and k, layers x denoising steps, median
  Delta along the group's best axis (pooled over heads);
* ``layer_step_linear.png``: per linear/chunk operand, layers x steps, median Delta of
  all chunks along their pooled best axis.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from kaleido.atomic import open_atomic

from .neighbours import AXES, hist_quantile
from .result import Characterization, OperandTable, best_axis


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _grid_axes(plt, n: int, w: float, h: float, ncols: int = 3):
    ncols = min(ncols, n)
    nrows = math.ceil(n / ncols)
    fig, axs = plt.subplots(nrows, ncols, figsize=(w * ncols, h * nrows), squeeze=False)
    for ax in axs.flat[n:]:
        ax.axis("off")
    return fig, list(axs.flat)[:n]


def text_colour(rgba) -> str:
    """``"black"`` or ``"white"``, whichever reads better on a cell of colour ``rgba`` (floats in [0, 1]):
    black where the cell's relative luminance (sRGB, WCAG 2) is above 0.179, the point where both
    colours give the same contrast ratio."""
    def lin(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (lin(float(c)) for c in rgba[:3])
    return "black" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.179 else "white"


def _annotate(ax, data: torch.Tensor, fmt: str, im) -> None:
    """Each cell's value, in black or white by the cell's colour in ``im`` (:func:`text_colour`)."""
    for i in range(data.shape[0]):
        for j in range(data.shape[1]):
            v = float(data[i, j])
            colour = "black" if math.isnan(v) else text_colour(im.cmap(im.norm(v)))
            ax.text(j, i, "n/a" if math.isnan(v) else format(v, fmt), ha="center", va="center", fontsize=7,
                    color=colour)


def plot_group_axis(ch: Characterization, out_dir: Path, stat: str) -> Path:
    plt = _plt()
    names = list(ch.operands)
    tallest = max(len(t.group_names) for t in ch.operands.values())
    fig, axs = _grid_axes(plt, len(names), 3.0, 0.9 + 0.28 * max(3, tallest))
    for ax, name in zip(axs, names):
        t = ch.operands[name]
        data = t.stats((0, 1, 2))[stat]  # (G, 3)
        im = ax.imshow(data.numpy(), aspect="auto", cmap="viridis_r" if stat != "cos_mean" else "viridis")
        ax.set_xticks(range(3), [f"along {a}" for a in AXES], fontsize=7)
        ax.set_yticks(range(len(t.group_names)), [f"{g}" for g in t.group_names], fontsize=7)
        best = t.best_axes()
        ax.set_title(f"{name} ({t.kind})\nbest: " + ", ".join(f"{g}->{a}" for g, a in list(best.items())[:6])
                     + (" ..." if len(best) > 6 else ""), fontsize=7)
        _annotate(ax, data, ".2f" if stat == "cos_mean" else ".0f", im)
        fig.colorbar(im, ax=ax, fraction=0.046)
    what = "median Delta (int8 units, lower = more alike)" if stat != "cos_mean" else "mean cosine similarity"
    fig.suptitle(f"{what}: groups x reuse axis, all layers, steps and heads", fontsize=9)
    fig.tight_layout()
    path = out_dir / ("group_axis_delta.png" if stat != "cos_mean" else "group_axis_cos.png")
    with open_atomic(path, "wb") as out:
        fig.savefig(out, format="png", dpi=110)
    plt.close(fig)
    return path


def _layer_step(ax, fig, data: torch.Tensor, t: OperandTable, title: str) -> None:
    im = ax.imshow(data.numpy(), aspect="auto", cmap="viridis_r", origin="lower")
    ax.set_yticks(range(len(t.layers)), [str(x) for x in t.layers], fontsize=7)
    ax.set_xlabel("denoising step", fontsize=7)
    ax.set_ylabel("layer", fontsize=7)
    ax.tick_params(labelsize=7)
    ax.set_title(title, fontsize=8)
    fig.colorbar(im, ax=ax, fraction=0.046)


def plot_layer_step_rope(ch: Characterization, name: str, out_dir: Path) -> Path:
    plt = _plt()
    t = ch.operands[name]
    best = t.best_axes()
    fig, axs = _grid_axes(plt, len(t.group_names), 3.6, 2.4)
    for g, (ax, gname) in enumerate(zip(axs, t.group_names)):
        axis = best[gname] or "t"
        _layer_step(ax, fig, t.layer_step_map(g, axis), t, f"{name} {gname}-group along {axis} (best)")
    fig.suptitle(f"{name}: median Delta (int8 units) per layer and step", fontsize=9)
    fig.tight_layout()
    path = out_dir / f"layer_step_{name}.png"
    with open_atomic(path, "wb") as out:
        fig.savefig(out, format="png", dpi=110)
    plt.close(fig)
    return path


def plot_layer_step_chunks(ch: Characterization, names: list[str], out_dir: Path) -> Path | None:
    if not names:
        return None
    plt = _plt()
    fig, axs = _grid_axes(plt, len(names), 3.6, 2.4)
    for ax, name in zip(axs, names):
        t = ch.operands[name]
        h = t.delta_hist.sum(dim=(2, 3))  # (L, S, 3, bins)
        pooled = h.sum(dim=(0, 1))
        med, p90 = hist_quantile(pooled, 0.5), hist_quantile(pooled, 0.9)
        axis = best_axis([None if math.isnan(float(m)) else float(m) for m in med],
                         [None if math.isnan(float(p)) else float(p) for p in p90], [None] * 3) or "t"
        _layer_step(ax, fig, hist_quantile(h[:, :, AXES.index(axis)], 0.5), t, f"{name}, all chunks along {axis}")
    fig.suptitle("linear/chunk operands: median Delta (int8 units) per layer and step", fontsize=9)
    fig.tight_layout()
    path = out_dir / "layer_step_linear.png"
    with open_atomic(path, "wb") as out:
        fig.savefig(out, format="png", dpi=110)
    plt.close(fig)
    return path


def plot_all(ch: Characterization, out_dir: str | Path) -> list[Path]:
    """Every figure of the module docstring into ``out_dir``; returns their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [plot_group_axis(ch, out_dir, "delta_median"), plot_group_axis(ch, out_dir, "cos_mean")]
    for name, t in ch.operands.items():
        if t.kind == "rope":
            paths.append(plot_layer_step_rope(ch, name, out_dir))
    p = plot_layer_step_chunks(ch, [n for n, t in ch.operands.items() if t.kind == "chunk"], out_dir)
    if p is not None:
        paths.append(p)
    return paths
