"""The target search on a synthetic model of quality and savings (no generation): build_config and bisection."""

from __future__ import annotations

import dataclasses

import pytest

from kaleido.techniques.kaleido_reuse import KaleidoConfig
from kaleido.calibration.target import (
    Measure, SearchPoint, Target, build_config, calibrate_to_target, max_scale, scaled_thresholds,
)

LAYERS = 4


def fake_evaluate(cfg: KaleidoConfig) -> Measure:
    """PSNR falls and savings grow with every enabled op's theta1; warm-up steps buy PSNR, cost savings."""
    qk = [cfg.reuse_config("self_qk", layer).theta1 / 64 if cfg.op_config("self_qk", layer).enabled else 0.0
          for layer in range(LAYERS)]
    other = sum(cfg.reuse_config(sw, 0).theta1 / 32 for sw in ("cross_qk", "proj", "ffn") if cfg.ops[sw].enabled)
    warm = cfg.reuse_config("self_qk", 0).dense_steps
    psnr = 60 - 25 * sum(qk) / LAYERS - 3 * other - 6 * max(qk) + 2 * warm
    qk_saved = 0.9 * sum(qk) / LAYERS * (25 - warm) / 25
    return Measure(1, psnr, psnr - 1, 0.9, {"self_qk": qk_saved, "whole_transformer": 0.3 * qk_saved + 0.02 * other,
                                             "reusable_ops": 0.3 * qk_saved})


def test_scaled_thresholds_are_capped_and_ordered():
    assert scaled_thresholds(40, 64, 7, 1.0) == (40, 64)
    assert scaled_thresholds(40, 64, 7, 1.5) == (60, 64)
    assert scaled_thresholds(40, 64, 7, 2.0) == (64, 64)
    assert scaled_thresholds(16, 32, 6, 0.5) == (8, 16)
    assert max_scale(KaleidoConfig(), ("self_qk",)) == pytest.approx(1.6)
    assert max_scale(KaleidoConfig(), ("self_qk", "proj")) == pytest.approx(2.0)


def test_build_config_scale_one_is_the_base_and_variants_load():
    base = KaleidoConfig()
    same = build_config(base, {}, SearchPoint())
    for sw in ("self_qk", "cross_qk", "proj", "ffn"):
        assert same.reuse_config(sw, 2) == base.reuse_config(sw, 2)
    axes = {"1": {"self_qk": {"axes": ["h", "w", "t"]}}}
    cfg = build_config(base, axes, SearchPoint(1.5, "qk_only", 2, (3,)))
    assert not cfg.ops["proj"].enabled and not cfg.ops["ffn"].enabled and cfg.ops["self_qk"].enabled
    assert cfg.reuse_config("self_qk", 0).theta1 == 60 and cfg.reuse_config("self_qk", 3).theta1 == 64
    assert cfg.reuse_config("self_qk", 0).dense_steps == 2
    assert cfg.op_config("self_qk", 1).axes == ("h", "w", "t")
    assert KaleidoConfig.from_yaml(cfg.to_yaml()) == cfg
    assert build_config(base, axes, SearchPoint(axes=False)).op_config("self_qk", 1).axes is None


@pytest.mark.parametrize("value", [35.0, 45.0])
def test_psnr_target_is_met_with_the_most_savings_among_the_candidates(value):
    t = Target("psnr", value)
    res = calibrate_to_target(KaleidoConfig(), fake_evaluate, t, {}, range(LAYERS), budget=14)
    assert len(res.candidates) <= 14 and res.candidates[0].stage == "default"
    assert res.met_on_calibration and res.chosen.measure.psnr_mean_db >= value
    feasible = [c for c in res.candidates if c.feasible]
    assert res.chosen.measure.saved("self_qk") == max(c.measure.saved("self_qk") for c in feasible)
    default = fake_evaluate(KaleidoConfig())
    if default.psnr_mean_db >= value:  # the default meets the target: calibration must not save less
        assert res.chosen.measure.saved("self_qk") >= default.saved("self_qk")
    assert {c.stage for c in res.candidates} >= {"default", "scale/all", "scale/qk_only"}
    d = res.to_dict()
    assert d["met_on_calibration"] and d["search_trace"][0]["stage"] == "default"


def test_savings_target_is_met_with_the_best_psnr_among_the_candidates():
    t = Target("savings", 0.5)
    res = calibrate_to_target(KaleidoConfig(), fake_evaluate, t, {}, range(LAYERS), budget=12)
    assert res.met_on_calibration and res.chosen.measure.saved("self_qk") >= 0.5
    feasible = [c for c in res.candidates if c.feasible]
    assert res.chosen.measure.psnr_mean_db == max(c.measure.psnr_mean_db for c in feasible)


def test_an_unreachable_target_returns_the_closest_candidate_with_its_shortfall():
    res = calibrate_to_target(KaleidoConfig(), fake_evaluate, Target("savings", 0.99), {}, range(LAYERS), budget=8)
    assert not res.met_on_calibration
    assert res.to_dict()["shortfall_on_calibration"] > 0.05
    assert any(n.startswith("ops stage skipped: no candidate met the target") for n in res.notes)


@pytest.mark.parametrize("kind, value, match", [("psnr", 200, "impossible"), ("psnr", 5, "impossible"),
                                                ("savings", 1.5, r"\(0, 1\)"), ("savings", 0, r"\(0, 1\)"),
                                                ("savings", float("nan"), "finite"), ("ssim", 0.9, "kind")])
def test_impossible_targets_are_refused(kind, value, match):
    with pytest.raises(ValueError, match=match):
        Target(kind, value)


@pytest.mark.parametrize("op_min_saving", [0.0, 0.001, 0.05])
def test_ops_stage_switches_off_only_ops_that_save_too_little(op_min_saving):
    """The last stage turns an op other than q.k^T off when the target holds and the saving falls by less than
    op_min_saving; in the synthetic model every op saves 0.75-2 points of the transformer (0.02 x theta1 / 32)."""
    def free_ops(cfg: KaleidoConfig) -> Measure:  # the other ops cost no PSNR, so the family "all" is chosen
        m = fake_evaluate(cfg)
        other = sum(cfg.reuse_config(sw, 0).theta1 / 32 for sw in ("cross_qk", "proj", "ffn") if cfg.ops[sw].enabled)
        return Measure(1, m.psnr_mean_db + 3 * other, m.psnr_min_db + 3 * other, 0.9, m.saved_fraction)

    t = Target("psnr", 35.0, "whole_transformer")
    res = calibrate_to_target(KaleidoConfig(), free_ops, t, {}, range(LAYERS), budget=30,
                              op_min_saving=op_min_saving)
    assert res.chosen.point.family == "all"
    ops = [c for c in res.candidates if c.stage == "ops"]
    off = res.chosen.point.off
    assert res.met_on_calibration and "self_qk" not in off
    if op_min_saving == 0.0:
        assert not ops and off == ()
        return
    assert len(ops) == 3  # cross_qk, proj, ffn: each tried once
    for sw in off:  # each op turned off is off in the chosen config
        assert not res.chosen.config.ops[sw].enabled
    # the stage starts from the candidate with every op on, and each op it keeps off cost under op_min_saving
    (start,) = [c for c in res.candidates if c.stage != "ops" and c.point == dataclasses.replace(res.chosen.point, off=())]
    lost = start.measure.saved("whole_transformer") - res.chosen.measure.saved("whole_transformer")
    assert 0.0 <= lost < max(1, len(off)) * op_min_saving
    if op_min_saving == 0.05:  # every op saves less than 5 points: all three off
        assert set(off) == {"cross_qk", "proj", "ffn"}
    else:  # every op saves more than 0.1 points: all three kept
        assert off == ()
    assert res.to_dict()["search_trace"][-1]["point"]["off"] == list(ops[-1].point.off)


def test_op_min_saving_out_of_range_is_refused():
    with pytest.raises(ValueError, match="op_min_saving=1.5"):
        calibrate_to_target(KaleidoConfig(), fake_evaluate, Target("psnr", 35.0), {}, (), op_min_saving=1.5)
