"""cache-dit's DBCache behind the Method interface: its accounting, read from cache-dit's statistics, against the
blocks that ran (counted here by forward hooks); its removal, stacking, refusals, and the missing extra."""

import sys

import numpy as np
import pytest
import torch

from kaleido.techniques import ModelShapes, make_method
from kaleido.techniques import cache_dit_peer

pytest.importorskip("cache_dit")

STEPS = 4  # random-wan: 2 blocks, 80 video tokens, 4 steps, one call per step (no guidance)
ONE_CALL = dict(separate_cfg=False)


def _block_calls(blocks_by_layer):
    """Forward hooks counting each block's runs: (counts by layer, their handles)."""
    counts = {layer: 0 for layer in blocks_by_layer}
    hooks = [b.register_forward_hook(lambda m, a, o, layer=layer: counts.__setitem__(layer, counts[layer] + 1))
             for layer, b in blocks_by_layer.items()]
    return counts, hooks


def _expected_from_block_calls(transformer, counts, shape):
    """Computed MACs per op kind if each layer ran ``counts[layer]`` calls of ``shape`` (B, S, L); the dense count."""
    computed, dense = {}, {}
    calls = max(counts.values())  # the first block of every list runs on every call
    for g in ModelShapes.of(transformer).gemms(*shape):
        computed[g.kind] = computed.get(g.kind, 0) + counts[g.layer] * g.macs
        dense[g.kind] = dense.get(g.kind, 0) + calls * g.macs
    return computed, dense


def _run(pipe_and_generate, settings, generations=1):
    (pipe, _), generate = pipe_and_generate
    tr = pipe.transformer
    counts, hooks = _block_calls({i: b for i, b in enumerate(tr.blocks)})
    h = make_method("cache_dit", **settings).apply(tr)
    try:
        frames = [generate() for _ in range(generations)]
        report = h.report()
    finally:
        h.remove()
        for x in hooks:
            x.remove()
    return frames[-1], report, counts


@pytest.fixture
def wan(random_pipe, generate):
    return random_pipe, generate


def test_accounting_read_from_cache_dits_statistics_matches_the_blocks_that_ran(wan, dense_frames):
    # F1B0 as FirstBlockCache: block 0 decides, block 1 is served while the first block's residual barely moves
    frames, rep, counts = _run(wan, dict(residual_diff_threshold=0.5, max_warmup_steps=1, **ONE_CALL), generations=2)
    assert counts[0] == 2 * STEPS and 0 < counts[1] < 2 * STEPS  # two generations, each refreshed
    served = rep.extra["cached_steps"]["blocks"]["cond"]  # cache-dit's own list, of the last generation
    assert counts[1] == 2 * STEPS - rep.extra["cached_calls"] and served and 0 not in served
    computed, dense = _expected_from_block_calls(wan[0][0].transformer, counts, (1, 80, 16))
    for kind, oc in rep.op_counts.items():
        assert (oc.total_mac8, oc.dense_macs) == (computed[kind], dense[kind]), kind
    assert rep.calls == 2 * STEPS and not np.array_equal(frames, dense_frames)
    np.testing.assert_array_equal(wan[1](), dense_frames)  # removed: the dense model, bit for bit
    tr = wan[0][0].transformer
    assert "forward" not in vars(tr) and not getattr(getattr(tr, "_diffusers_hook", None), "hooks", None)


def test_taylorseer_calibrator_steps_mask_and_a_threshold_of_zero(wan, dense_frames):
    _, rep, counts = _run(wan, dict(residual_diff_threshold=1.0, max_warmup_steps=0, taylorseer=True,
                                    taylorseer_order=2, steps_mask=(1, 0, 1, 0), steps_mask_policy="static", **ONE_CALL))
    assert rep.extra["cached_steps"]["blocks"]["cond"] == [1, 3] and counts == {0: STEPS, 1: 2}  # the mask decides
    frames, rep0, counts0 = _run(wan, dict(residual_diff_threshold=0.0, **ONE_CALL))
    np.testing.assert_array_equal(frames, dense_frames)  # 0 never caches: every block runs, as dense
    assert rep0.total_saved_fraction == 0.0 and counts0 == {0: STEPS, 1: STEPS}


def test_hunyuan_videos_two_streams_each_cache_by_their_own_first_block():
    from diffusers import HunyuanVideoTransformer3DModel

    from kaleido.models import testing as T

    pipe = T.tiny_random_hunyuan_video_pipeline(0)
    torch.manual_seed(1)
    pipe.transformer = HunyuanVideoTransformer3DModel(  # the tester's model with 3 dual- and 3 single-stream blocks
        in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=16, num_layers=3, num_single_layers=3,
        num_refiner_layers=1, mlp_ratio=2.0, patch_size=2, patch_size_t=1, qk_norm="rms_norm", guidance_embeds=True,
        text_embed_dim=16, pooled_projection_dim=8, rope_axes_dim=(4, 6, 6)).eval()
    pipe.set_progress_bar_config(disable=True)
    tr = pipe.transformer
    blocks = {layer: b for layer, b in enumerate([*tr.transformer_blocks, *tr.single_transformer_blocks])}

    def generate():
        with torch.no_grad():
            return pipe(num_inference_steps=STEPS, output_type="latent", generator=torch.Generator().manual_seed(0),
                        **T.hunyuan_call_kwargs()).frames

    dense = generate()
    shapes = set()
    hooks = [tr.register_forward_pre_hook(lambda m, a, kw: shapes.add(  # (B, video tokens, text tokens) of each call
        (kw["hidden_states"].shape[0], kw["hidden_states"].shape[2:].numel() // 4, kw["encoder_hidden_states"].shape[1])),
        with_kwargs=True)]
    counts, block_hooks = _block_calls(blocks)
    hooks += block_hooks
    h = make_method("cache_dit", residual_diff_threshold=1.0, max_warmup_steps=1, Bn_compute_blocks=1).apply(tr)
    try:
        out = generate()
        rep = h.report()
    finally:
        h.remove()
        for x in hooks:
            x.remove()
    assert rep.extra["matched"] == ["transformer_blocks", "single_transformer_blocks"]
    assert rep.extra["cached_steps"] == {"transformer_blocks": {"cond": [1, 2, 3], "uncond": []},
                                         "single_transformer_blocks": {"cond": [1, 2, 3], "uncond": []}}
    # F1B1 on 3 blocks per stream: the middle block of each stream skipped on the 3 served steps
    assert counts == {0: 4, 1: 1, 2: 4, 3: 4, 4: 1, 5: 4}
    (shape,) = shapes  # patch (1, 2, 2): a token per 4 latent positions
    computed, dense_macs = _expected_from_block_calls(tr, counts, shape)
    assert {k: (oc.total_mac8, oc.dense_macs) for k, oc in rep.op_counts.items()} == {
        k: (computed[k], dense_macs[k]) for k in rep.op_counts}
    assert not torch.equal(out, dense) and torch.equal(generate(), dense)


def test_a_step_cache_under_kaleido_and_the_stacking_rules(wan, dense_frames):
    (pipe, _), generate = wan
    cd = dict(technique="cache_dit", residual_diff_threshold=1.0, max_warmup_steps=1, **ONE_CALL)
    kaleido = dict(technique="kaleido", theta1=16, theta2=32, low_bits=6)
    _, alone, _ = _run(wan, {k: v for k, v in cd.items() if k != "technique"})
    h = make_method("stack", techniques=[cd, kaleido]).apply(pipe.transformer)
    try:
        generate()
        rep = h.report()
    finally:
        h.remove()
    np.testing.assert_array_equal(generate(), dense_frames)
    assert rep.extra["op_source"]["self_qk"] == "kaleido"
    # what cache-dit served stays skipped; Kaleido's reuse comes on top in the blocks that ran
    assert rep.op_counts["self_qk"].total_skipped >= alone.op_counts["self_qk"].total_skipped > 0
    with pytest.raises(ValueError, match=r"already has diffusers hooks .*apply cache_dit first") as e:
        make_method("stack", techniques=[kaleido, cd]).apply(pipe.transformer)
    assert "\n" not in str(e.value)
    np.testing.assert_array_equal(generate(), dense_frames)  # the refused stack left nothing behind
    with pytest.raises(ValueError, match="cache_dit and fbcache are both step caches"):
        make_method("stack", techniques=[cd, dict(technique="fbcache")])


@pytest.mark.parametrize("settings, match", [
    (dict(Fn_compute_blocks=8), r"Fn_compute_blocks=8 \+ Bn_compute_blocks=0 exceed the 2 blocks of .*blocks"),
    (dict(Fn_compute_blocks=1, Bn_compute_blocks=1), "it would skip nothing"),
])
def test_block_counts_it_cannot_use_are_refused_in_one_line(random_pipe, settings, match):
    tr = random_pipe[0].transformer
    with pytest.raises(ValueError, match=match) as e:
        make_method("cache_dit", **settings).apply(tr)
    assert "\n" not in str(e.value) and "forward" not in vars(tr)


def test_calls_that_do_not_alternate_as_separate_cfg_says_are_refused(wan, dense_frames):
    (pipe, _), generate = wan
    h = make_method("cache_dit", separate_cfg=True).apply(pipe.transformer)
    try:
        with pytest.raises(ValueError, match=r"separate_cfg=True expects two transformer calls per step .* set "
                                             r"separate_cfg=False") as e:
            generate()  # random-wan runs without guidance: one call per step
        assert "\n" not in str(e.value)
    finally:
        h.remove()
    np.testing.assert_array_equal(generate(), dense_frames)


def test_a_family_without_a_known_forward_pattern_is_refused(random_pipe, monkeypatch):
    monkeypatch.delitem(cache_dit_peer.FORWARD_PATTERNS, "WanAdapter")
    with pytest.raises(ValueError, match=r"no cache-dit forward pattern is known for WanTransformer3DModel") as e:
        make_method("cache_dit").apply(random_pipe[0].transformer)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("settings, match", [
    (dict(Fn_compute_blocks=0), r"Fn_compute_blocks=0 is out of range"),
    (dict(steps_mask=[1, 2]), "must be 1 \\(compute\\) / 0 \\(cache\\)"),
    (dict(steps_mask_policy="sometimes"), "steps_mask_policy"),
    (dict(taylorseer_order=5), "taylorseer_order"),
    (dict(separate_cfg="yes"), "true or false"),
    (dict(residual_diff_threshold=-0.1), "residual_diff_threshold"),
])
def test_bad_settings_get_one_line(settings, match):
    with pytest.raises(ValueError, match=match) as e:
        make_method("cache_dit", **settings)
    assert "\n" not in str(e.value)


def test_without_the_extra_asking_for_cache_dit_names_the_install_command(random_pipe, monkeypatch):
    from kaleido.compare.grids import build_points, method_grid

    monkeypatch.setitem(sys.modules, "cache_dit", None)  # `import cache_dit` now fails as when it is not installed
    install = "pip install 'kaleido-vdit\\[peers\\]'"
    with pytest.raises(ValueError, match=install) as e:
        make_method("cache_dit", **ONE_CALL).apply(random_pipe[0].transformer)
    assert "\n" not in str(e.value) and "forward" not in vars(random_pipe[0].transformer)
    with pytest.raises(ValueError, match=install):
        build_points("random-wan", ["cache_dit"], 1, (0,), {"num_inference_steps": 4})
    notes: list[str] = []
    grid = method_grid("random-wan", 4, notes=notes)
    assert "cache_dit" not in grid and any(n.startswith("cache_dit:") and "[peers]" in n for n in notes)


def test_its_sweep_points_and_stack_with_the_calibrated_kaleido_config():
    from kaleido.compare.grids import method_grid

    tiny = method_grid("tiny", 25)
    assert len(tiny["cache_dit"]) >= 2
    stacked = [s["techniques"] for s in tiny["stack"] if s["techniques"][0]["technique"] == "cache_dit"]
    assert stacked and stacked[0][1]["label"] == "tiny-default" and stacked[0][0]["Fn_compute_blocks"] == 1
    assert all(p["separate_cfg"] is False for p in method_grid("random-wan", 4)["cache_dit"])  # no guidance there


def test_the_cross_check_script_reads_both_caches_decisions_alike():
    """benchmarks/cross_check_cache_dit.py on the random pipeline: DBCache F1B0 without warm-up and
    FirstBlockCache at one threshold serve the same calls here, and so give the same video."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "cross_check_cache_dit.py"
    spec = importlib.util.spec_from_file_location("cross_check_cache_dit", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    (r,) = mod.cross_check("random-wan", 0.5, 1)
    assert r["calls"] == STEPS and r["served"] == {"cache_dit": 3, "fbcache": 3} and r["disagree"] == []
    assert r["cache_dit_statistics"] == {"blocks": {"cond": [1, 2, 3], "uncond": []}}
    assert r["psnr_cache_dit_vs_fbcache"] == float("inf")
