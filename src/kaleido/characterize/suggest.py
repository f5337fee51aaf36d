"""What a :class:`~kaleido.characterize.Characterization` suggests to a calibration: the reuse axes per
layer (:func:`suggested_axes`) and the order in which to try self-attention layers at their widest band
(:func:`layers_by_likeness`). The target search (:mod:`kaleido.calibration.target`) takes
both as plain values, so it needs no characterisation to run, and does not import this package.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from kaleido.techniques.kaleido_reuse.config import OP_SWITCH_OF, KaleidoConfig

from .neighbours import AXES, hist_quantile
from .result import Characterization, best_axis


def suggested_axes(ch: Characterization, base: KaleidoConfig) -> dict[str, dict[str, dict[str, Any]]]:
    """Per-layer axes overrides ``{layer: {switch: {"axes": [...]}}}`` (a :class:`KaleidoConfig` ``layers`` patch).

    ``self_qk`` with RoPE groups: one axis per group (``self_q``'s best per layer);
    ``cross_qk``: one axis per chunk (``cross_q``); ``proj``/``ffn`` (several linear
    layers of different widths share the switch): one axis per layer, the lowest median
    Delta of all their inputs' chunks pooled.
    """
    out: dict[str, dict[str, dict[str, Any]]] = {}
    q = ch.operands.get("self_q")
    grouped = [("cross_qk", ch.operands.get("cross_q"))]
    if q is not None and (q.kind == "rope" or base.ops["self_qk"].groups == "chunk"):
        grouped.insert(0, ("self_qk", q))
    for sw, table in grouped:  # one axis per group: the best of the query operand per layer
        if table is None:
            continue
        for layer, by_group in table.best_axes(per_layer=True).items():
            axes = [by_group[g] for g in table.group_names]
            if all(axes):
                out.setdefault(layer, {})[sw] = {"axes": axes}

    def numbers(t: torch.Tensor) -> list[float | None]:
        return [None if math.isnan(float(x)) else float(x) for x in t]

    for sw in ("proj", "ffn"):
        pooled: dict[int, torch.Tensor] = {}
        for name, t in ch.operands.items():
            if t.kind != "chunk" or OP_SWITCH_OF.get(name) != sw:
                continue
            hist = t.layer_axis_hist()
            for i, layer in enumerate(t.layers):
                pooled[layer] = pooled[layer] + hist[i] if layer in pooled else hist[i].clone()
        for layer, h in pooled.items():
            best = best_axis(numbers(hist_quantile(h, 0.5)), numbers(hist_quantile(h, 0.9)), [None] * len(AXES))
            if best:
                out.setdefault(str(layer), {})[sw] = {"axes": [best]}
    return out


def layer_median_delta(axis_hist: torch.Tensor) -> float:
    """Median Delta of one layer along its most alike axis, from its ``(3, bins)`` row of
    ``OperandTable.layer_axis_hist()`` (steps, heads and groups pooled)."""
    med = hist_quantile(axis_hist, 0.5)
    med = med[~torch.isnan(med)]
    return float(med.min()) if med.numel() else math.inf


def layers_by_likeness(ch: Characterization | None, num_layers: int) -> list[int]:
    """Layers ``0 .. num_layers - 1``, those whose self-attention queries are most alike (lowest median Delta)
    first; layers the characterisation did not see keep their order, last. Without ``self_q`` (or ``ch``):
    in order."""
    order = list(range(num_layers))
    q = ch.operands.get("self_q") if ch is not None else None
    if q is not None:
        hist = q.layer_axis_hist()
        med = {layer: layer_median_delta(hist[i]) for i, layer in enumerate(q.layers)}
        order.sort(key=lambda layer: med.get(layer, math.inf))
    return order
