"""Tiles cut from the shipped model's own attention: real post-RoPE queries and keys through the RTL.

The shipped tiny Wan pipeline generates with Kaleido applied and an observer on its runtime keeps
the self-attention q and k of one layer at one step. A tile is cut from them: every video token,
the first channels of each RoPE group (t, h, w; the tile has at most 64 rows), one head, and the
first keys as the stationary operand. The reuse core decides the tile's modes on those channels
with the packaged ``tiny-default`` self-attention thresholds, and the RTL must give the core's int8
products bit for bit and the cycles ``kaleido.hw`` charges.
"""

import dataclasses

import numpy as np
import pytest
import torch

pytest.importorskip("amaranth")

from kaleido.reuse import ChannelGroups, Mode, quantize, quantize_columns, reuse_matmul  # noqa: E402
from kaleido.hw.rtl.harness import model_tile, run_kaleido_tile  # noqa: E402
from kaleido.techniques.kaleido_reuse.apply import add_observer, apply, remove  # noqa: E402
from kaleido.techniques.kaleido_reuse.config import default_config  # noqa: E402
from kaleido.tiny.pipeline import load_pipeline  # noqa: E402

from tests.hw.rtl.test_tile_against_model import core_products  # noqa: E402

#: (step, layer) whose self-attention operands are kept
STEP, LAYER = 1, 0


@pytest.fixture(scope="module")
def recorded():
    pipe = load_pipeline("tiny")
    pipe.set_progress_bar_config(disable=True)
    kept = {}

    def keep(call, layer, op, role, module, operand, grid, groups):
        if op == "self_qk" and layer == LAYER and int(call.step) == STEP and role in ("q", "k"):
            kept[role] = operand.detach().clone()
            kept["grid"], kept["groups"] = grid, groups

    config = default_config("tiny")
    apply(pipe.transformer, config)
    add_observer(pipe.transformer, keep)
    try:
        pipe("a red circle moving left on a plain background", height=64, width=64, num_frames=5,
             num_inference_steps=3, guidance_scale=3.0, output_type="np",
             generator=torch.Generator().manual_seed(0))
    finally:
        remove(pipe.transformer)
    assert {"q", "k"} <= kept.keys(), "the observer saw no self-attention operands at that step and layer"
    return kept, config.reuse_config("self_qk", LAYER)


def cut(kept, per_group: int, n_keys: int):
    """The tile: grid tokens x the first ``per_group`` channels of each group, head 0; keys 0..n_keys-1."""
    grid, groups = kept["grid"], kept["groups"]
    starts = np.cumsum((0,) + groups.sizes[:-1])
    chans = np.concatenate([np.arange(s, s + per_group) for s in starts])
    rows = slice(grid.prefix, grid.prefix + grid.n_grid)
    A = kept["q"][0, rows, 0][:, chans].float()
    B = kept["k"][0, rows, 0][:n_keys][:, chans].float().T.contiguous()
    sub = ChannelGroups((per_group,) * len(groups), groups.axes, groups.names)
    tile_grid = type(grid)(grid.T, grid.H, grid.W)
    return A, B, tile_grid, sub


@pytest.mark.parametrize("bands", [None, (4.0, 8.0, 4)], ids=["packaged", "4-bit"])
def test_recorded_tile_through_the_rtl(recorded, bands):
    """The packaged thresholds (7-bit PARTIAL, one lane) and a 4-bit variant (packed PARTIAL)."""
    kept, op = recorded
    A, B, grid, groups = cut(kept, per_group=4, n_keys=6)
    config = dataclasses.replace(op, schedule=(), dense_steps=0)
    if bands is not None:
        config = dataclasses.replace(config, theta1=bands[0], theta2=bands[1], low_bits=bands[2])
    _, mm, _ = reuse_matmul(A, B, grid, groups, config, exact_int8=True)
    m = mm.modes.numpy()
    assert (m == Mode.COMPUTE).any() and (m == Mode.FULL).any(), "the cut tile has no reuse to check"
    assert bands is None or (m == Mode.PARTIAL).any(), "the 4-bit bands gave no PARTIAL to pack"
    A_q, _ = quantize(A, groups, config.granularity)
    B_q, _ = quantize_columns(B, "column")
    run = run_kaleido_tile(A_q, B_q, mm, cols=8, window_rows=8)
    assert np.array_equal(run.products, core_products(A_q.numpy(), B_q.numpy(), mm))
    model = model_tile(mm, B.shape[1], 8, 8)
    assert (run.stream, run.cycles) == (model.stream, model.cycles)
