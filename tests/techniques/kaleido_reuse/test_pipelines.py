"""Whole diffusers pipelines (tiny, random, built in code) generating a few steps with Kaleido."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import kaleido
from kaleido.techniques.kaleido_reuse import KaleidoConfig, get_trace
from kaleido.models import testing as T
from kaleido.evaluation.generate import GenerationSettings, generate
from kaleido.tiny.pipeline import load_pipeline
from kaleido.reuse import ReuseConfig

WAN_SETTINGS = GenerationSettings(num_inference_steps=2, num_frames=9, height=64, width=64, guidance_scale=5.0)


@pytest.fixture(scope="module")
def wan_pipe():
    return T.tiny_random_wan_pipeline()


def test_wan_pipeline_separate_cond_uncond_calls(wan_pipe):
    dense, _, _ = generate(wan_pipe, "a red circle moving right", 0, WAN_SETTINGS)
    kaleido.apply(wan_pipe.transformer, KaleidoConfig.dense())
    try:
        same, _, _ = generate(wan_pipe, "a red circle moving right", 0, WAN_SETTINGS)
        trace = get_trace(wan_pipe.transformer)
    finally:
        kaleido.remove(wan_pipe.transformer)
    assert np.abs(same - dense).max() < 1e-5  # thresholds 0: Kaleido's video is the dense video
    assert trace.steps == [0, 1]
    assert set(trace.meta["contexts_seen"]) == {"cond", "uncond"}
    assert trace.meta["grid"] == {"T": 3, "H": 4, "W": 4}
    # one self_qk record per (step, context, layer)
    assert len(trace.select(op="self_qk")) == 2 * 2 * 2
    again, _, _ = generate(wan_pipe, "a red circle moving right", 0, WAN_SETTINGS)
    assert np.array_equal(again, dense)  # remove() restored the stock pipeline exactly


def test_wan_pipeline_reuse_and_new_generation(wan_pipe):
    kaleido.apply(wan_pipe.transformer, KaleidoConfig(reuse=ReuseConfig(4.0, 8.0, dense_steps=1)))
    try:
        frames, _, _ = generate(wan_pipe, "a blue square moving up", 1, WAN_SETTINGS)
        first = get_trace(wan_pipe.transformer)
        generate(wan_pipe, "a blue square moving up", 2, WAN_SETTINGS)
        second = get_trace(wan_pipe.transformer)
    finally:
        kaleido.remove(wan_pipe.transformer)
    assert np.isfinite(frames).all()
    assert first is not second and second.steps == [0, 1]  # the pipeline's end-of-call reset split them
    assert all(not r.enabled for r in first.select(step=0))
    assert any(r.enabled for r in first.select(step=1))


def test_pipeline_saved_to_a_folder_loads_by_path(tmp_path, wan_pipe):
    wan_pipe.save_pretrained(str(tmp_path / "pipe"), safe_serialization=True)
    loaded = load_pipeline(str(tmp_path / "pipe"))
    assert type(loaded).__name__ == "WanPipeline"
    a, _, _ = generate(wan_pipe, "a red circle", 3, WAN_SETTINGS)
    b, _, _ = generate(loaded, "a red circle", 3, WAN_SETTINGS)
    assert np.abs(a - b).max() < 1e-5
    with pytest.raises(ValueError, match="model_index.json"):
        load_pipeline(str(tmp_path))
    with pytest.raises(ValueError, match="neither"):
        load_pipeline("not a model")


@pytest.mark.parametrize("rope", [True, False], ids=["5b_style", "2b_style"])
def test_cogvideox_pipeline_cfg_in_one_batch(rope):
    pipe = T.tiny_random_cogvideox_pipeline(rope=rope)
    kaleido.apply(pipe.transformer, KaleidoConfig(reuse=ReuseConfig(4.0, 8.0, dense_steps=0)))
    with torch.no_grad():
        out = pipe(num_inference_steps=2, output_type="np", generator=torch.Generator().manual_seed(0),
                   **T.cogvideox_call_kwargs())
    trace = kaleido.remove(pipe.transformer)
    assert np.isfinite(out.frames[0]).all()
    assert trace.meta["contexts_seen"] == ["cond_uncond"]
    assert trace.steps == [0, 1]
    qk = trace.select(op="self_qk")
    assert {r.batch for r in qk} == {2}  # cond and uncond in one batch
    assert all(r.grid.prefix == 6 and r.grid.suffix == 0 for r in qk)  # [text; video]
    names = trace.op_kind_stats()["self_qk"].group_names
    assert names == (("t", "h", "w") if rope else ("c0",))


def test_hunyuan_video_pipeline_dual_and_single_stream():
    pipe = T.tiny_random_hunyuan_video_pipeline()
    kaleido.apply(pipe.transformer, KaleidoConfig(reuse=ReuseConfig(4.0, 8.0, dense_steps=0)))
    with torch.no_grad():
        out = pipe(num_inference_steps=2, output_type="np", generator=torch.Generator().manual_seed(0),
                   **T.hunyuan_call_kwargs())
    trace = kaleido.remove(pipe.transformer)
    assert np.isfinite(out.frames[0]).all()
    assert trace.steps == [0, 1]
    assert {r.layer for r in trace.select(op="self_qk")} == {0, 1}  # dual (0) and single (1) stream
    assert {r.grid.suffix for r in trace.select(op="self_qk")} == {6}  # [video; text]
    fused = trace.select(op="fused_out")
    assert fused and all(r.groups.dim == 32 + 64 for r in fused)  # cat[attn, mlp] input of proj_out


def test_warm_up_changes_neither_videos_nor_traces(wan_pipe):
    from kaleido.evaluation.generate import dense_runs
    from kaleido.evaluation.runs import kaleido_runs

    cfg = KaleidoConfig(reuse=ReuseConfig(4.0, 8.0, dense_steps=1))
    settings = GenerationSettings(num_inference_steps=3, num_frames=9, height=64, width=64, guidance_scale=5.0)
    runs = {}
    for warm in (0, 1):
        dense = dense_runs(wan_pipe, ["a blue square moving up"], [1], settings, progress=False, warmup_steps=warm)
        runs[warm] = (dense, kaleido_runs(wan_pipe, cfg, dense, settings, progress=False, lpips=False, warmup_steps=warm))
    (d0, k0), (d1, k1) = runs[0], runs[1]
    key = ("a blue square moving up", 1)
    assert np.array_equal(d0[key][0], d1[key][0])
    assert np.array_equal(k0[0].video, k1[0].video)
    assert k1[0].trace.steps == [0, 1, 2]  # the 1-step warm-up's trace is not part of the run's
    assert k0[0].trace.summary() == k1[0].trace.summary()
