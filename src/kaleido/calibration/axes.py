"""Calibrated reuse axes for chunk groups (SPEC §2: "a calibration step may choose, per
layer and group, the axis along which the operand is most similar").

Tensors without RoPE (linear-layer inputs, cross-attention queries, CogVideoX-2B's q)
have no built-in notion of which neighbour is most alike.  :func:`calibrate_axes` runs
the caller's generation once per candidate axis with every chunk-group switch set to
that axis, reads the traces, and keeps per (switch, layer) the axis with the largest
8-bit-equivalent MAC saving.  The result is a :class:`KaleidoConfig` whose ``layers``
overrides carry the chosen axes - part of the saved configuration, as SPEC §2 asks.
Calibrate on prompts other than those you evaluate on.

Calibration of thresholds, warm-up steps and per-layer bands to a PSNR or savings target
lives in :mod:`kaleido.calibration.target` (:func:`calibrate_to_target`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import torch

from kaleido.techniques.kaleido_reuse.apply import apply, remove
from kaleido.calibration.target import Target, calibrate_to_target  # noqa: F401  (re-exported)
from kaleido.techniques.kaleido_reuse.config import OP_SWITCH_OF, KaleidoConfig

#: switches whose groups are channel chunks (self_qk too, on models without RoPE)
CHUNK_SWITCHES = ("cross_qk", "proj", "ffn")


def calibrate_axes(
    transformer: torch.nn.Module,
    run: Callable[[], Any],
    config: KaleidoConfig | None = None,
    switches: Sequence[str] = CHUNK_SWITCHES,
    axes: Sequence[str] = ("t", "h", "w"),
) -> tuple[KaleidoConfig, dict[str, dict[str, dict[str, float]]]]:
    """``(config with per-layer axes, {switch: {layer: {axis: saved_fraction}}})``.

    ``run()`` generates once with the pipeline that owns ``transformer`` (same prompts
    and seeds every time).  Switches that are off stay as they are.
    """
    base = config or KaleidoConfig()
    bad = [s for s in switches if s not in ("self_qk", *CHUNK_SWITCHES)]
    if bad:
        raise ValueError(f"calibrate_axes: unknown switches {bad}; use some of {('self_qk', *CHUNK_SWITCHES)}")
    if not axes:
        raise ValueError("calibrate_axes needs at least one candidate axis")
    table: dict[str, dict[str, dict[str, float]]] = {s: {} for s in switches}
    for axis in axes:
        ops = dict(base.ops)
        for s in switches:
            ops[s] = dataclasses.replace(ops[s], axes=(axis,))
        cfg = dataclasses.replace(base, ops=ops, layers=_without_axes(base.layers, switches))
        apply(transformer, cfg)
        try:
            run()
        finally:
            trace = remove(transformer)
        if trace is None:
            raise ValueError("calibrate_axes: run() did not call the transformer")
        acc: dict[tuple[str, int], list[float]] = {}
        for r in trace.records:
            sw = OP_SWITCH_OF.get(r.op)
            if sw not in switches or not r.enabled or r.layer < 0:
                continue
            if sw == "self_qk" and r.groups.names[0] != "c0":
                continue  # RoPE groups have their own axes
            oc = r.op_counts()
            a = acc.setdefault((sw, r.layer), [0.0, 0.0])
            a[0] += oc.dense_macs - oc.equiv8_macs
            a[1] += oc.dense_macs
        for (sw, layer), (saved, dense) in acc.items():
            table[sw].setdefault(str(layer), {})[axis] = saved / dense if dense else 0.0
    layers = {k: {s: dict(p) for s, p in v.items()} for k, v in base.layers.items()}
    for sw, per_layer in table.items():
        for layer, by_axis in sorted(per_layer.items(), key=lambda kv: int(kv[0])):
            best = max(by_axis, key=lambda a: (by_axis[a], -list(axes).index(a)))
            layers.setdefault(layer, {}).setdefault(sw, {})["axes"] = [best]
    return dataclasses.replace(base, layers=layers), table


def _without_axes(layers: dict, switches: Sequence[str]) -> dict:
    """Per-layer overrides with any ``axes`` of the calibrated switches removed."""
    out = {}
    for key, patch in layers.items():
        out[key] = {s: {k: v for k, v in p.items() if not (s in switches and k == "axes")} for s, p in patch.items()}
    return out
