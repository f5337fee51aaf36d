"""Generate the shipped example profile from real mode maps on SYNTHETIC correlated data.

Nothing better existed when this was written: the profile's mode maps are produced by
:func:`kaleido.reuse.decide` (the real decision, int8, drift rule) on synthetic
operands - per channel, a sum of random walks along t, h and w plus i.i.d. noise,
with the walk along each group's reuse axis made smoother (as RoPE groups are, SPEC
§2).  The numbers it yields describe that synthetic data, not any vDiT; it is to be
replaced by a profile converted from the trained tiny model's ``ReuseTrace``.

Run ``python -m kaleido.hw.inputs.example_profile OUT.json`` to regenerate (seeded).
"""

from __future__ import annotations

import sys

import numpy as np
import torch

from kaleido.reuse import ChannelGroups, TokenGrid
from kaleido.reuse.config import ReuseConfig
from kaleido.reuse.decide import decide
from kaleido.reuse.quant import quantize

from .profile import Profile

GRID = (6, 12, 16)
LINEAR_OPS = ("proj_q", "proj_k", "proj_v", "proj_out", "cross_proj_q", "cross_proj_out", "ffn_up", "ffn_down")
LABEL = ("SYNTHETIC example: mode maps decided by kaleido.reuse.decide on synthetic spatially correlated "
         "random fields, not on a real model; replace with a profile from the tiny model's trace")


def correlated_field(rng: np.random.Generator, grid: TokenGrid, groups: ChannelGroups, heads: int,
                     smooth: float = 0.05, rough: float = 1.0, noise: float = 0.03) -> torch.Tensor:
    """``(heads, S, K)`` float: per channel, random walks along t/h/w plus noise.

    Along the reuse axis of each channel's group the walk's step is ``smooth``; along
    the other two axes ``rough``.
    """
    T, H, W = grid.shape
    out = np.zeros((heads, T, H, W, groups.dim))
    for sl, axis in zip(groups.slices, groups.axes):
        k = sl.stop - sl.start
        for d, L in enumerate((T, H, W)):
            step = smooth if d == axis.dim else rough
            walk = np.cumsum(rng.normal(0, step, size=(heads, L, k)), axis=1)
            shape = [heads, 1, 1, 1, k]
            shape[1 + d] = L
            out[..., sl] += walk.reshape(shape)
    out += rng.normal(0, noise, size=out.shape)
    return torch.tensor(out.reshape(heads, grid.n_grid, groups.dim), dtype=torch.float32)


def build(seed: int = 0, theta1: float = 2.0, theta2: float = 8.0, low_bits: int = 4) -> Profile:
    rng = np.random.default_rng(seed)
    grid = TokenGrid(*GRID)
    cfg = ReuseConfig(theta1=theta1, theta2=theta2, low_bits=low_bits)
    maps: dict = {}
    rope = ChannelGroups.from_rope(16, 56, 56)
    q, _ = quantize(correlated_field(rng, grid, rope, heads=4), rope)
    maps["self_attn_qk"] = [decide(q, grid, rope, cfg)]
    chunks = ChannelGroups.from_chunks(128, 32, ["t", "w", "t", "h"])
    q, _ = quantize(correlated_field(rng, grid, chunks, heads=4), chunks)
    maps["cross_attn_qk"] = [decide(q, grid, chunks, cfg)]
    lin = ChannelGroups.from_chunks(512, 128, ["t", "w", "t", "h"])
    for op in LINEAR_OPS:
        q, _ = quantize(correlated_field(rng, grid, lin, heads=1), lin)
        maps[op] = [decide(q, grid, lin, cfg)]
    maps["self_attn_pv"] = None  # P.V reuse is optional (SPEC §4): kept dense
    maps["cross_attn_pv"] = None
    src = (f"kaleido.hw.inputs.example_profile.build(seed={seed}, theta1={theta1}, theta2={theta2}, "
           f"low_bits={low_bits}) on grid {GRID}")
    return Profile.from_mode_maps("synthetic-correlated", maps, label=LABEL, source=src)


if __name__ == "__main__":  # pragma: no cover
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m kaleido.hw.inputs.example_profile OUT.json")
    build().save(sys.argv[1])
