"""Capture on a tiny random Wan pipeline: every operand, the dense output unchanged, the model restored."""

from __future__ import annotations

import numpy as np
import pytest

from kaleido.generation_settings import GenerationSettings
from kaleido.evaluation.generate import generate

SETTINGS = GenerationSettings(num_inference_steps=2, num_frames=5, height=32, width=32)


@pytest.fixture(scope="module")
def pipe():
    from kaleido.models.testing import tiny_random_wan_pipeline

    p = tiny_random_wan_pipeline()
    p.set_progress_bar_config(disable=True)
    return p


def test_capture_records_every_operand_and_computes_the_dense_video(pipe):
    from kaleido.characterize import Characterization, characterize_runs
    from kaleido.techniques.kaleido_reuse import is_applied

    rec, dense = characterize_runs(pipe, ["a red circle"], [3], SETTINGS, progress=False)
    assert not is_applied(pipe.transformer)
    ref, _, _ = generate(pipe, "a red circle", 3, SETTINGS)
    np.testing.assert_array_equal(dense[("a red circle", 3)][0], ref)  # the capture is the stock computation
    assert set(rec.operands) == {"self_q", "self_k", "cross_q", "proj_q", "proj_out", "cross_proj_q",
                                 "cross_proj_out", "ffn_in", "ffn_out"}
    assert rec.operands["proj_q"].read_by == ["proj_q", "proj_k", "proj_v"]
    ch = Characterization.from_recorder(rec, {"model": "random"})
    q = ch.operands["self_q"]
    assert q.kind == "rope" and q.group_names == ("t", "h", "w") and q.group_sizes == (8, 8, 8)
    assert q.layers == [0, 1] and q.steps == [0, 1] and q.heads == 2
    assert tuple(q.delta_hist.shape) == (2, 2, 2, 3, 3, 256)
    # grid 2x2x2 (5 frames -> 2 latent frames; 32 px -> 2 tokens): pairs per matrix along t, h, w
    T, H, W = 2, 2, 2
    assert ch.meta["grids"] == [[T, H, W]]
    per = {"t": (T - 1) * H * W, "h": T * (H - 1) * W, "w": T * H * (W - 1)}
    d = ch.to_dict()["operands"]["self_q"]
    calls = 2 * 2  # steps x (cond, uncond) per layer
    for a, n in per.items():
        assert d["pairs_per_axis"][a] == n * calls * 2 * 2 * 3  # x layers x heads x groups
    assert ch.operands["ffn_out"].group_sizes == (32, 32)  # ffn_dim 64 in chunks of 32
