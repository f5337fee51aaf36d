"""What a characterisation suggests to the target search: per-layer axes and the layer order (no model)."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from kaleido.characterize import Characterization, OperandRecorder
from kaleido.characterize.suggest import layers_by_likeness, suggested_axes
from kaleido.techniques.kaleido_reuse import KaleidoConfig
from kaleido.reuse import ChannelGroups, TokenGrid

GRID = TokenGrid(4, 4, 4)
ROPE = ChannelGroups.from_rope(4, 6, 6)


def _characterization() -> Characterization:
    """Layer 0: q alike along h only (large changes along t and w, small noise); layer 1: q constant
    everywhere (the most alike). The projections' input varies along h and w only (constant along t)."""
    rec = OperandRecorder()
    g = torch.Generator().manual_seed(0)
    T, H, W = GRID.shape
    for step in range(2):
        call = SimpleNamespace(step=step)
        q0 = (30 * torch.randn(T, 1, W, 2, 16, generator=g)).expand(T, H, W, 2, 16)
        q0 = (q0 + torch.randn(T, H, W, 2, 16, generator=g)).reshape(1, GRID.n_grid, 2, 16)
        q1 = torch.ones(1, GRID.n_grid, 2, 16)
        for layer, q in ((0, q0.contiguous()), (1, q1)):
            rec(call, layer, "self_qk", "q", "attn1", q, GRID, ROPE)
            x = (30 * torch.randn(1, H, W, 8, generator=g)).expand(T, H, W, 8).reshape(1, GRID.n_grid, 8)
            rec(call, layer, "proj_q", "x", "to_q", x.contiguous(), GRID, ChannelGroups.from_chunks(8, 4))
    return Characterization.from_recorder(rec, {"model": "synthetic"})


def test_axes_follow_the_most_alike_neighbours():
    axes = suggested_axes(_characterization(), KaleidoConfig())
    assert axes["0"]["self_qk"] == {"axes": ["h", "h", "h"]}  # layer 0's q repeats along h only
    assert axes["0"]["proj"] == {"axes": ["t"]} and axes["1"]["proj"] == {"axes": ["t"]}
    assert "cross_qk" not in axes["0"]  # no cross-attention operand was characterised


def test_layers_most_alike_first_and_unseen_layers_last():
    ch = _characterization()
    assert layers_by_likeness(ch, 3) == [1, 0, 2]
    assert layers_by_likeness(None, 3) == [0, 1, 2]
