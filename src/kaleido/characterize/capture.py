"""Capture reuse operands during a generation and accumulate their neighbour statistics.

The capture uses the integration itself: :func:`kaleido.apply` with a config that keeps
every step dense (:func:`capture_config`) patches the same sites the reuse would, and an
observer registered on its runtime receives every operand at the point where the
decision would see it - q and k after norms and RoPE ``(B, S, H, D)``, linear inputs
``(B, S, C)`` - with the token grid and the channel groups of its op.  The generation
computes exactly what the stock pipeline computes, so its frames serve as the dense
reference of the same (prompt, seed).

Operand names: ``self_q``, ``self_k`` (self-attention, RoPE groups), ``cross_q``
(cross-attention queries, chunk groups), and the linear ops' trace names for their
inputs (``proj_q``, ``proj_out``, ``cross_proj_q``, ``cross_proj_out``, ``ffn_in``,
``ffn_out``, ...).  Linear layers reading one tensor (``to_q``/``to_k``/``to_v``) are
counted once, under the first op; ``read_by`` lists all of them.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import torch

from kaleido.techniques.kaleido_reuse.config import KaleidoConfig
from kaleido.reuse import ChannelGroups, ReuseConfig, TokenGrid

from .neighbours import NeighbourStats, heads_first, neighbour_stats

#: dense warm-up long enough to cover any schedule: the capture never reuses
_ALWAYS_DENSE = 2**31 - 1


def capture_config(base: KaleidoConfig | None = None) -> KaleidoConfig:
    """``base`` (default ``KaleidoConfig()``) with q.k^T, cross q.k^T, projections and FFN enabled,
    every step dense; group kinds and chunk sizes are kept (they define the groups measured)."""
    base = base or KaleidoConfig()
    ops = {k: dataclasses.replace(v, enabled=k != "pv", reuse={}) for k, v in base.ops.items()}
    reuse = ReuseConfig(0.0, 0.0, low_bits=base.reuse.low_bits, metric=base.reuse.metric,
                        granularity=base.reuse.granularity, dense_steps=_ALWAYS_DENSE)
    layers = {key: {sw: {k: v for k, v in p.items() if k in ("groups", "chunk_size")} for sw, p in patch.items()}
              for key, patch in base.layers.items()}
    return dataclasses.replace(base, reuse=reuse, ops=ops, layers=layers)


def operand_name(op: str, role: str) -> str:
    """The name an operand is recorded under (see the module docstring)."""
    if op.endswith("_qk"):
        return f"{op[:-3]}_{role}"
    return op


@dataclasses.dataclass
class OperandInfo:
    """What is known about one captured operand."""

    name: str
    kind: str  # "rope" or "chunk"
    groups: ChannelGroups
    heads: int
    read_by: list[str]


class OperandRecorder:
    """Observer for :attr:`KaleidoRuntime.observers`: neighbour statistics per (operand, layer, step)."""

    def __init__(self, metric: str = "linf", granularity: str = "group", rope_split: tuple | None = None):
        self.metric = metric
        self.granularity = granularity
        self.rope_split = rope_split
        self.stats: dict[tuple[str, int, int], NeighbourStats] = {}
        self.operands: dict[str, OperandInfo] = {}
        self.grids: set[tuple[int, int, int]] = set()
        self.calls = 0
        #: the (prompt, seed) being generated (:func:`characterize_runs` sets it), and per run and operand the
        #: ``(G, 3, bins)`` Delta histograms, heads, layers and steps pooled (:mod:`.verdict`)
        self.run: tuple[str, int] | None = None
        self.run_hists: dict[tuple[tuple[str, int], str], torch.Tensor] = {}
        self._last: tuple[Any, int, str] | None = None  # (tensor, version, name) of the last linear input

    def __call__(self, call, layer: int, op: str, role: str, module: str, operand: torch.Tensor,
                 grid: TokenGrid, groups: ChannelGroups) -> None:
        if call is None or layer < 0:
            return
        name = operand_name(op, role)
        if role == "x":
            last = self._last
            if last is not None and last[0] is operand and last[1] == operand._version:
                info = self.operands[last[2]]
                if op not in info.read_by:
                    info.read_by.append(op)
                return
            self._last = (operand, operand._version, name)
        A = heads_first(operand, role)
        st = neighbour_stats(A, grid, groups, self.metric, self.granularity)
        info = self.operands.get(name)
        if info is None:
            kind = "rope" if (role in ("q", "k") and groups.names[0] in ("t", "h", "w")) else "chunk"
            info = self.operands[name] = OperandInfo(name, kind, groups, A.shape[1], [op])
        elif info.groups.sizes != groups.sizes:
            raise ValueError(f"operand {name} changed its channel groups from {info.groups.sizes} to {groups.sizes} "
                             f"at layer {layer}; per-layer chunk sizes are not supported by characterize")
        if self.run is not None:
            h = st.delta_hist.sum(0)
            rk = (self.run, name)
            self.run_hists[rk] = self.run_hists[rk] + h if rk in self.run_hists else h
        key = (name, layer, int(call.step))
        if key in self.stats:
            self.stats[key].add_(st)
        else:
            self.stats[key] = st
        self.grids.add(grid.shape)
        self.calls += 1


def characterize_runs(pipe, prompts: Sequence[str], seeds: Sequence[int], settings, base: KaleidoConfig | None = None,
                      progress: bool = True) -> tuple[OperandRecorder, dict]:
    """Generate every (prompt, seed) with the capture attached.

    Returns ``(recorder, dense)`` where ``dense`` is keyed like
    :func:`kaleido.evaluation.generate.dense_runs` (``(prompt, seed) -> (frames,
    pipeline s, transformer s)``): the capture computes the dense model's output.
    """
    from tqdm.auto import tqdm

    from kaleido.techniques.kaleido_reuse.apply import add_observer, apply, remove
    from kaleido.evaluation.generate import generate

    if not prompts:
        raise ValueError("characterize needs at least one prompt")
    if not seeds:
        raise ValueError("characterize needs at least one seed")
    cfg = capture_config(base)
    report = apply(pipe.transformer, cfg)
    recorder = OperandRecorder(cfg.reuse.metric, cfg.reuse.granularity, report.rope_split)
    add_observer(pipe.transformer, recorder)
    dense = {}
    try:
        pairs = [(p, s) for p in prompts for s in seeds]
        for p, s in tqdm(pairs, desc="characterize", disable=not progress):
            recorder.run = (p, int(s))
            dense[(p, s)] = generate(pipe, p, s, settings)
        recorder.run = None
    finally:
        remove(pipe.transformer)
    if recorder.calls == 0:
        raise ValueError("characterize: the pipeline never called the patched transformer; nothing was captured")
    return recorder, dense
