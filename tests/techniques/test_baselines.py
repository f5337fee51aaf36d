"""Every baseline on a tiny random Wan pipeline: it changes what it claims, counts what it skips, and undoes itself."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from kaleido.evaluation.simulator_profiles import simulator_profile_extras
from kaleido.techniques import METHODS, BLOCK_KINDS, TECHNIQUES, ModelShapes, make_method
from kaleido.compare.grids import GRIDS
from kaleido.compare.presentation import COLOURS
from kaleido.techniques.registry import GROUPS
from kaleido.techniques.sparse_videogen import classify_heads, sample_rows, spatial_temporal_masks
from kaleido.reuse import TokenGrid

S, STEPS, LAYERS, HEADS, HD = 80, 4, 2, 2, 24  # random-wan: 5x4x4 tokens, 4 steps, no CFG
COMMITTED_ROWS = Path(__file__).resolve().parents[2] / "docs" / "results" / "compare"


def run_method(random_pipe, generate, name, **settings):
    pipe, _ = random_pipe
    handle = make_method(name, **settings).apply(pipe.transformer)
    try:
        frames = generate()
    finally:
        report = handle.report()  # what the comparison keeps: the report and its traces' simulator profiles
        report.extra.update(simulator_profile_extras(handle.simulator_traces()))
        handle.remove()
    return frames, report


def psnr(a, b):
    mse = float(((a - b) ** 2).mean())
    return float("inf") if mse == 0 else 10 * np.log10(1.0 / mse)


def test_every_registered_technique_has_tester_settings():
    from tester_settings import CASES

    assert set(CASES) == set(TECHNIQUES)  # a new technique gets its tester case; a removed one loses it
    assert all(CASES[n].settings is not None for n in TECHNIQUES)


def test_every_method_is_registered_and_rejects_bad_settings():
    # every method of the committed comparison is still registered (its rows stay reproducible)
    committed = {json.loads(p.read_text())["point"]["method"] for p in COMMITTED_ROWS.glob("*.json")}
    assert committed - {"dense"} <= set(METHODS) and len(committed) > 10
    for name, t in TECHNIQUES.items():  # and every registration carries what its readers need
        assert t.method.name == name and name in GRIDS, name  # swept by the comparison
        assert COLOURS[name].startswith("#") and t.group in GROUPS, name  # drawn in a colour of its own
        assert t.unavailable() or (GRIDS[name]("tiny", 25) and GRIDS[name]("random-wan", 4)), name
    assert len(set(COLOURS.values())) == len(COLOURS)  # no two techniques drawn alike
    with pytest.raises(ValueError, match="density"):
        make_method("block_topk", density=1.5)
    with pytest.raises(ValueError, match="unknown setting"):
        make_method("tome", rate=0.5)
    with pytest.raises(ValueError, match="unknown baseline"):
        make_method("nope")


def test_dense_counts_match_the_wan_shapes(random_pipe, generate, dense_frames):
    frames, rep = run_method(random_pipe, generate, "block_topk", density=1.0, block_size=8)
    np.testing.assert_allclose(frames, dense_frames, atol=1e-5)
    per_call_layer = HEADS * S * S * HD
    assert rep.op_counts["self_qk"].dense_macs == STEPS * LAYERS * per_call_layer
    assert rep.saved_fraction("self_qk") == 0.0
    shapes = ModelShapes.of(random_pipe[0].transformer)
    assert shapes.rope_split == (8, 8, 8) and shapes.dim == 48
    assert rep.op_counts["ffn_in"].dense_macs == STEPS * LAYERS * S * 48 * 96
    assert set(BLOCK_KINDS) - {"fused_out"} <= set(rep.op_counts)  # fused_out: HunyuanVideo's single-stream only


def test_sparse_videogen_counts_the_blocks_it_skips(random_pipe, generate, dense_frames):
    frames, rep = run_method(random_pipe, generate, "sparse_videogen", density=0.3, block_size=8)
    # 10 blocks of 8 tokens, 3 kept per query block -> 70% of the pairs skipped, in q.k^T and P.V
    assert rep.saved_fraction("self_qk") == pytest.approx(0.7)
    assert rep.saved_fraction("self_pv") == pytest.approx(0.7)
    assert rep.saved_fraction("ffn_in") == 0.0 and rep.estimate_macs > 0
    sp, tp = rep.extra["heads_spatial_temporal"]
    assert sp + tp == STEPS * LAYERS * HEADS
    assert 0 < np.abs(frames - dense_frames).max()


def test_sparse_videogen_classifies_a_temporal_head():
    grid = TokenGrid(4, 4, 4)
    S = grid.n_grid
    pos = torch.arange(S) % 16  # the same place in every frame has the same key
    k = torch.nn.functional.one_hot(pos, 16).float().view(1, S, 1, 16) * 8
    q, v = k.clone(), torch.randn(1, S, 1, 16)
    m_sp, m_tp = spatial_temporal_masks(grid, 0.25, 8)
    assert classify_heads(q, k, v, m_sp, m_tp, sample_rows(S, 16)).item() is True
    qs = torch.nn.functional.one_hot(torch.arange(S) // 16, 16).float().view(1, S, 1, 16) * 8  # frame-local
    assert classify_heads(qs, qs.clone(), v, m_sp, m_tp, sample_rows(S, 16)).item() is False


def test_block_topk_keeps_the_requested_fraction(random_pipe, generate, dense_frames):
    frames, rep = run_method(random_pipe, generate, "block_topk", density=0.5, block_size=8)
    assert rep.saved_fraction("self_qk") == pytest.approx(0.5)
    assert rep.op_counts["estimate"].total_mac8 == STEPS * LAYERS * HEADS * 10 * 10 * HD
    assert psnr(frames, dense_frames) < 200


def test_tome_savings_follow_the_merged_token_count(random_pipe, generate, dense_frames):
    frames, rep = run_method(random_pipe, generate, "tome", ratio=0.5)
    assert rep.saved_fraction("self_qk") == pytest.approx(1 - (40 / 80) ** 2)
    frames0, rep0 = run_method(random_pipe, generate, "tome", ratio=0.0)
    np.testing.assert_allclose(frames0, dense_frames, atol=1e-5)
    assert rep0.saved_fraction("self_qk") == 0.0


def test_adaptiv_merge_rate_is_dynamic(random_pipe, generate, dense_frames):
    _, rep_all = run_method(random_pipe, generate, "adaptiv", tau=0.0)  # every source merges into its window
    assert rep_all.saved_fraction("self_qk") == pytest.approx(1 - (20 / 80) ** 2)
    _, rep_some = run_method(random_pipe, generate, "adaptiv", tau=0.6)
    merged = rep_some.extra["merged_tokens"]
    assert 0 < rep_some.saved_fraction("self_qk") < rep_all.saved_fraction("self_qk")
    assert len(set(merged)) > 1  # the rate changes from layer to layer / step to step


def test_taylorseer_refuses_identifiers_that_match_nothing(random_pipe):
    pipe, _ = random_pipe
    with pytest.raises(ValueError, match="match no module"):
        make_method("taylorseer", identifiers=("^transformer_blocks.*attn",)).apply(pipe.transformer)
    assert not pipe.transformer.is_cache_enabled


def test_taylorseer_skips_matched_units_only(random_pipe, generate, dense_frames):
    frames, rep = run_method(random_pipe, generate, "taylorseer", cache_interval=3, disable_cache_before_step=1)
    assert rep.extra["matched"] == ["blocks.0.attn1", "blocks.0.ffn", "blocks.1.attn1", "blocks.1.ffn"]
    assert rep.saved_fraction("self_qk") > 0 and rep.saved_fraction("ffn_in") == rep.saved_fraction("self_qk")
    assert rep.saved_fraction("cross_qk") == 0.0  # attn2 is not cached
    assert not random_pipe[0].transformer.is_cache_enabled


def test_first_block_cache_skips_whole_blocks(random_pipe, generate):
    _, rep = run_method(random_pipe, generate, "fbcache", threshold=50.0)
    # block 0 always runs; block 1 is skipped whenever the cache hits
    assert 0 < rep.saved_fraction("ffn_in") <= 0.5
    assert rep.saved_fraction("self_qk") == rep.saved_fraction("cross_qk") == rep.saved_fraction("ffn_in")


def test_magcache_serves_whole_steps_from_the_cache(random_pipe, generate, dense_frames):
    # retention 0, at most one step in a row from the cache: step 0 computes (nothing cached yet), 1 is served,
    # 2 computes (two in a row would exceed max_skip_steps), 3 is served -> every block GEMM half skipped
    frames, rep = run_method(random_pipe, generate, "magcache", mag_ratios=(1.0, 0.99, 1.0, 0.99),
                             num_inference_steps=STEPS, retention_ratio=0.0, threshold=0.5, max_skip_steps=1)
    assert rep.extra["served_steps"] == {"cond": [1, 3]}
    assert rep.extra["matched"] == ["blocks.0", "blocks.1"]
    for kind, oc in rep.op_counts.items():
        assert oc.total_skipped * 2 == oc.dense_macs and oc.total_mac8 * 2 == oc.dense_macs, kind
    assert not np.array_equal(frames, dense_frames)
    assert not random_pipe[0].transformer.is_cache_enabled


def test_magcache_calibrates_its_ratios_and_uses_them(random_pipe, generate, dense_frames):
    frames, rep = run_method(random_pipe, generate, "magcache", calibrate=True, num_inference_steps=STEPS)
    np.testing.assert_array_equal(frames, dense_frames)  # calibration skips nothing
    assert rep.total_saved_fraction == 0.0 and rep.extra["served_steps"] == {}
    ratios = rep.extra["mag_ratios"]["cond"]
    assert len(ratios) == STEPS and ratios[0] == 1.0 and all(r > 0 for r in ratios)
    # the measured ratios go straight back in; a huge threshold then serves every step it may
    _, rep2 = run_method(random_pipe, generate, "magcache", mag_ratios=ratios, num_inference_steps=STEPS,
                         retention_ratio=0.0, threshold=100.0, max_skip_steps=STEPS)
    assert rep2.extra["served_steps"] == {"cond": [1, 2, 3]}


@pytest.mark.parametrize("settings, match", [
    ({}, r"mag_ratios is missing .*calibrate=True"),
    (dict(mag_ratios=[1.0, -0.5]), "positive finite"),
    (dict(mag_ratios="1.0 0.9"), "list of numbers"),
    (dict(mag_ratios=[1.0], calibrate=True), "not both"),
    (dict(mag_ratios=[1.0], threshold=-1.0), r"threshold=-1.0 is out of range"),
    (dict(mag_ratios=[1.0], num_inference_steps=2.5), "whole number"),
    (dict(mag_ratios=[1.0], retention_ratio=1.5), "retention_ratio"),
    (dict(calibrate="yes"), "true or false"),
])
def test_magcache_bad_settings_get_one_line(settings, match):
    with pytest.raises(ValueError, match=match) as e:
        make_method("magcache", **settings)
    assert "\n" not in str(e.value)


def test_magcache_refuses_a_run_of_another_step_count(random_pipe, generate, dense_frames):
    pipe, _ = random_pipe
    h = make_method("magcache", mag_ratios=(1.0, 1.0), num_inference_steps=2).apply(pipe.transformer)
    try:
        with pytest.raises(ValueError, match=r"runs 4 steps but num_inference_steps=2; set num_inference_steps=4") as e:
            generate()  # Wan's pipeline passes its step count to the cache context
        assert "\n" not in str(e.value)
    finally:
        h.remove()
    np.testing.assert_array_equal(generate(), dense_frames)


def test_magcache_report_refuses_a_shorter_run_where_the_pipeline_does_not_say_its_step_count():
    # HunyuanVideo's pipeline sets cache contexts without the step count: 2 steps of a 3-step schedule run
    # unnoticed, and the report (what every harness reads) says so in one line
    from kaleido.models import testing as T

    pipe = T.tiny_random_hunyuan_video_pipeline(0)
    pipe.set_progress_bar_config(disable=True)
    h = make_method("magcache", mag_ratios=(1.0, 1.0, 1.0), num_inference_steps=3).apply(pipe.transformer)
    try:
        with torch.no_grad():
            pipe(num_inference_steps=2, output_type="latent", generator=torch.Generator().manual_seed(0),
                 **T.hunyuan_call_kwargs())
        with pytest.raises(ValueError, match=r"the generation ran 2 steps but num_inference_steps=3; "
                                             r"set num_inference_steps=2") as e:
            h.report()
        assert "\n" not in str(e.value)
        with torch.no_grad():  # a run of the full count starts afresh and reports
            pipe(num_inference_steps=3, output_type="latent", generator=torch.Generator().manual_seed(0),
                 **T.hunyuan_call_kwargs())
        assert "served_steps" in h.report().extra
    finally:
        h.remove()


def test_magcache_refuses_a_block_class_diffusers_does_not_know():
    from diffusers.models.transformers.transformer_wan import WanTransformerBlock

    class CustomBlock(WanTransformerBlock):
        pass

    tr = _bare_wan()
    tr.blocks[1].__class__ = CustomBlock  # a subclass: not in diffusers' TransformerBlockRegistry
    with pytest.raises(ValueError, match=r"magcache: diffusers' MagCache does not support CustomBlock \(blocks.1\)"):
        make_method("magcache", mag_ratios=(1.0,)).apply(tr)
    assert not tr.is_cache_enabled and not hasattr(tr, "_diffusers_hook")


def _bare_wan():
    from diffusers import WanTransformer3DModel

    torch.manual_seed(0)
    return WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=24, in_channels=4,
                                 out_channels=4, text_dim=16, freq_dim=16, ffn_dim=32, num_layers=2,
                                 rope_max_seq_len=64).eval()


def _bare_wan_inputs(t: float = 500.0) -> dict:
    g = torch.Generator().manual_seed(0)
    return dict(hidden_states=torch.randn(1, 4, 3, 8, 8, generator=g), timestep=torch.full((1,), t),
                encoder_hidden_states=torch.randn(1, 7, 16, generator=g), return_dict=False)


def test_steps_and_slots_come_from_the_cache_context():
    """A pipeline-like loop: cond and uncond calls under their cache contexts, the same timestep on every step
    (the timestep rule would count all four calls as one step with slots 0..3)."""
    tr = _bare_wan()
    kw = _bare_wan_inputs()
    h = make_method("tome", ratio=0.0).apply(tr)  # any method: the handle counts the steps
    seen = []
    h.observe("call planned", "test", lambda gemms: seen.append(
        (h.call.step, h.call.slot, h.call.context, h.call.num_steps, h.call.generation)))
    try:
        with torch.no_grad():
            for _ in range(2):  # a context with only a name (HunyuanVideo's pipeline): step = calls in it so far
                for name in ("cond", "uncond"):
                    with tr.cache_context(name):
                        tr(**kw)
            for i in range(2):  # a context with the step index (Wan's pipeline); step 0 again: a new generation
                for name in ("cond", "uncond"):
                    with tr.cache_context(name, step_index=i, num_inference_steps=2):
                        tr(**kw)
            tr(**kw)  # bare calls (no context): the timestep rule
            tr(**kw)
            tr(**_bare_wan_inputs(400.0))
    finally:
        h.remove()
    assert seen == [
        (0, 0, "cond", None, 0), (0, 1, "uncond", None, 0), (1, 0, "cond", None, 0), (1, 1, "uncond", None, 0),
        (0, 0, "cond", 2, 1), (0, 1, "uncond", 2, 1), (1, 0, "cond", 2, 1), (1, 1, "uncond", 2, 1),
        (0, 0, None, None, 2), (0, 1, None, None, 2), (1, 0, None, None, 2),
    ]
    assert not hasattr(tr, "_diffusers_hook")  # the handle's context hook is gone, and the registry with it


def test_pab_skips_attention_and_refuses_two_calls_per_step(random_pipe, generate):
    _, rep = run_method(random_pipe, generate, "pab", self_skip_range=2, cross_skip_range=2, timestep_range=(0, 1001))
    assert rep.saved_fraction("self_qk") > 0 and rep.saved_fraction("cross_qk") > 0
    assert rep.saved_fraction("ffn_in") == 0.0
    pipe, _ = random_pipe
    h = make_method("pab").apply(pipe.transformer)
    try:
        with pytest.raises(ValueError, match="twice per step"):
            generate(guidance_scale=3.0)  # separate cond/uncond calls share PAB's cache: refused
    finally:
        h.remove()


def test_exion_prunes_attention_and_reuses_ffn_masks(random_pipe, generate, dense_frames):
    frames, rep = run_method(random_pipe, generate, "exion", attn_density=0.5, ffn_tau=0.2, ffn_period=2)
    assert rep.saved_fraction("self_qk") == pytest.approx(0.5)
    assert 0 < rep.saved_fraction("ffn_in") < 0.5  # only the steps between dense ones save
    assert rep.saved_fraction("ffn_in") == rep.saved_fraction("ffn_out")
    off, rep_off = run_method(random_pipe, generate, "exion", attn_density=1.0, ffn_tau=0.0)
    np.testing.assert_allclose(off, dense_frames, atol=1e-5)
    assert rep_off.total_saved_fraction == 0.0


def test_cambricon_d_low_bit_deltas_trade_quality_for_savings(random_pipe, generate, dense_frames):
    f2, rep2 = run_method(random_pipe, generate, "cambricon_d", delta_bits=2)
    f8, rep8 = run_method(random_pipe, generate, "cambricon_d", delta_bits=8)
    assert psnr(f8, dense_frames) > psnr(f2, dense_frames)
    assert rep2.op_counts["ffn_in"].low_bits == 2 and rep2.op_counts["ffn_in"].total_mac_low > 0
    assert rep2.saved_fraction("ffn_in") > rep8.saved_fraction("ffn_in") > 0
    assert rep2.saved_fraction("self_qk") == 0.0  # attention stays dense by construction


#: settings a method cannot do without here (MagCache: the model's magnitude ratios, one per step; cache-dit: one
#: call per step, this pipeline's guidance being off)
REQUIRED = {"magcache": dict(mag_ratios=(1.0,) * STEPS, num_inference_steps=STEPS), "cache_dit": dict(separate_cfg=False)}


@pytest.mark.parametrize("name", sorted(set(METHODS) - {"kaleido", "stack"}))  # stack: tests/techniques/test_stack.py
def test_remove_restores_the_dense_model_bit_for_bit(random_pipe, generate, dense_frames, name):
    if TECHNIQUES[name].unavailable():
        pytest.skip(TECHNIQUES[name].unavailable())
    pipe, _ = random_pipe
    h = make_method(name, **REQUIRED.get(name, {})).apply(pipe.transformer)
    generate()
    h.remove()
    np.testing.assert_array_equal(generate(), dense_frames)


def test_kaleido_behind_the_same_interface(random_pipe, generate, dense_frames):
    frames0, rep0 = run_method(random_pipe, generate, "kaleido", theta1=0, theta2=0)
    np.testing.assert_allclose(frames0, dense_frames, atol=1e-5)
    assert rep0.saved_fraction("self_qk") == 0.0
    assert rep0.op_counts["self_qk"].dense_macs == STEPS * LAYERS * HEADS * S * S * HD  # same accounting
    frames, rep = run_method(random_pipe, generate, "kaleido", theta1=64, theta2=64, low_bits=7, metric="mean_abs")
    assert rep.saved_fraction("self_qk") > 0.2
    assert "hw_profile" in rep.extra and rep.extra["hw_profile"]["format"] == "kaleido-profile"
    with pytest.raises(ValueError, match="theta2"):
        make_method("kaleido", theta1=8, theta2=4)


@pytest.mark.parametrize("name", ["sparse_videogen", "block_topk"])
def test_dense_warmup_steps_run_and_are_charged_dense(random_pipe, generate, name):
    # block-sparse at 30% density skips 70% of the pairs; with 2 of the 4 steps dense, half of that
    _, rep = run_method(random_pipe, generate, name, density=0.3, block_size=8, dense_steps=2)
    assert rep.saved_fraction("self_qk") == pytest.approx(0.7 * (STEPS - 2) / STEPS)
    _, rep_all = run_method(random_pipe, generate, name, density=0.3, block_size=8, dense_steps=STEPS)
    assert rep_all.saved_fraction("self_qk") == 0.0
