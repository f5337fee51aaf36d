"""The recorder, tables, best axes and the claim check on synthetic operands (no model)."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from kaleido.characterize import Characterization, OperandRecorder, check_claim
from kaleido.reuse import ChannelGroups, TokenGrid

GRID = TokenGrid(4, 4, 4)
ROPE = ChannelGroups.from_rope(4, 6, 6)


def _q(paper: bool, seed: int = 0) -> torch.Tensor:
    """q ``(1, S, 2, 16)``: with ``paper`` each RoPE group's channels vary along their own axis only
    (t-channels along t, h-channels along h, w-channels along w); otherwise every channel is constant along h."""
    g = torch.Generator().manual_seed(seed)
    T, H, W = GRID.shape
    if paper:
        t_part = torch.randn(T, 1, 1, 2, 4, generator=g).expand(T, H, W, 2, 4)
        h_part = torch.randn(1, H, 1, 2, 6, generator=g).expand(T, H, W, 2, 6)
        w_part = torch.randn(1, 1, W, 2, 6, generator=g).expand(T, H, W, 2, 6)
        x = torch.cat([t_part, h_part, w_part], dim=-1)
    else:
        x = torch.randn(T, 1, W, 2, 16, generator=g).expand(T, H, W, 2, 16)
    return x.reshape(1, GRID.n_grid, 2, 16).contiguous()


def _record(paper: bool) -> Characterization:
    rec = OperandRecorder()
    for step in range(2):
        for layer in range(2):
            call = SimpleNamespace(step=step)
            q = _q(paper, seed=10 * step + layer)
            rec(call, layer, "self_qk", "q", "blocks.0.attn1", q, GRID, ROPE)
            rec(call, layer, "self_qk", "k", "blocks.0.attn1", q + 0, GRID, ROPE)
            x = torch.randn(1, GRID.n_grid, 8)
            rec(call, layer, "proj_q", "x", "to_q", x, GRID, ChannelGroups.from_chunks(8, 4))
            rec(call, layer, "proj_k", "x", "to_k", x, GRID, ChannelGroups.from_chunks(8, 4))  # same tensor
    return Characterization.from_recorder(rec, {"model": "synthetic"})


def test_paper_like_operands_make_the_claim_hold():
    ch = _record(paper=True)
    q = ch.operands["self_q"]
    assert q.kind == "rope" and q.layers == [0, 1] and q.steps == [0, 1] and q.heads == 2
    # ties (Delta 0 along both other axes) go to the order t, h, w
    assert q.best_axes() == {"t": "h", "h": "t", "w": "t"}
    assert q.best_axes(per_layer=True) == {"0": {"t": "h", "h": "t", "w": "t"}, "1": {"t": "h", "h": "t", "w": "t"}}
    c = check_claim(q)
    assert c.holds is True and "HOLDS" in c.statement and c.groups["h"]["delta_median"]["t"] == 0
    assert c.orthogonal_holds is True
    assert all(cl.holds for cl in ch.claims())


def test_other_operands_make_it_fail_and_the_json_has_every_table():
    ch = _record(paper=False)
    q = ch.operands["self_q"]
    assert q.best_axes() == {"t": "h", "h": "h", "w": "h"}
    c = check_claim(q)
    assert c.holds is False and "DOES NOT HOLD" in c.statement
    assert c.groups["t"]["agrees"] is True and c.groups["h"]["agrees"] is False  # t along space is still as claimed
    assert c.orthogonal_holds is False and c.groups["h"]["own_axis_least_alike"] is False
    d = ch.to_dict()
    assert set(d["operands"]) == {"self_q", "self_k", "proj_q"}
    assert d["operands"]["proj_q"]["read_by"] == ["proj_q", "proj_k"]  # the shared input is counted once
    assert d["operands"]["proj_q"]["kind"] == "chunk" and check_claim(ch.operands["proj_q"]).holds is None
    tab = d["operands"]["self_q"]["table"]
    assert tab["dims"] == ["layer", "step", "head", "group", "axis"]
    assert [len(tab["delta_median"]), len(tab["delta_median"][0]), len(tab["delta_median"][0][0]),
            len(tab["delta_median"][0][0][0]), len(tab["delta_median"][0][0][0][0])] == [2, 2, 2, 3, 3]
    # layers x steps x heads x groups x (T-1)*H*W neighbour pairs along t
    assert d["operands"]["self_q"]["pairs_per_axis"]["t"] == 2 * 2 * 2 * 3 * (3 * 4 * 4)
    assert d["claim"]["self_q"]["holds"] is False and len(d["statements"]) == 2
