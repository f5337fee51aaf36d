"""Kaleido behind the baselines' interface: flat settings derived from KaleidoConfig, ledger kinds from the trace."""

import pytest

from kaleido.techniques import make_method
from kaleido.techniques.kaleido_reuse.method import KaleidoSettings
from kaleido.techniques.kaleido_reuse import KaleidoConfig
from kaleido.ops import BLOCK_OPS, SWITCHES


def test_flat_defaults_are_the_default_configs_base_and_switches():
    s, cfg = KaleidoSettings(), KaleidoConfig()
    assert (s.theta1, s.theta2, s.low_bits, s.metric, s.dense_steps) == (
        cfg.reuse.theta1, cfg.reuse.theta2, cfg.reuse.low_bits, cfg.reuse.metric, cfg.reuse.dense_steps)
    assert {sw: getattr(s, sw) for sw in SWITCHES} == {sw: cfg.ops[sw].enabled for sw in SWITCHES}
    flat = s.to_config()
    # one threshold pair for every op: the default config's self-attention override is not kept
    assert all(flat.reuse_config(sw, 0) == cfg.reuse for sw in SWITCHES)
    assert cfg.reuse_config("self_qk", 0) != cfg.reuse
    assert KaleidoSettings(theta1=1.0).theta2 == cfg.reuse.theta2
    with pytest.raises(ValueError, match="theta2"):
        KaleidoSettings(theta1=cfg.reuse.theta2 + 1)


def test_every_block_kind_is_counted_from_the_trace(random_pipe, generate):
    pipe, _ = random_pipe
    handle = make_method("kaleido", theta1=64, theta2=64, low_bits=7, metric="mean_abs").apply(pipe.transformer)
    try:
        generate()
    finally:
        rep = handle.report()
        handle.remove()
    # the text-side k/v projections are named cross_proj_kv in the trace: no kind falls back to the shape model
    assert rep.extra["trace_summary_ops"] == sorted(k.value for k in BLOCK_OPS)
    assert rep.op_counts["cross_proj_kv"].total_mac_low == 0 and rep.saved_fraction("cross_proj_kv") == 0.0
    assert rep.saved_fraction("self_qk") > 0


def test_a_whole_config_runs_as_given_with_each_ops_own_low_bits(random_pipe, generate):
    """``config=`` carries per-op thresholds and low_bits (the calibrated default): the counts are the trace's."""
    import kaleido
    from kaleido.compare.points import settings_label

    pipe, _ = random_pipe
    d = KaleidoConfig().to_dict()
    d["ops"]["self_qk"].update(theta1=64.0, theta2=64.0, low_bits=7)
    d["ops"]["ffn"].update(theta1=8.0, theta2=8.0, low_bits=4)
    cfg = KaleidoConfig.from_dict(d)
    handle = make_method("kaleido", config=d, label="mine").apply(pipe.transformer)
    try:
        generate()
    finally:
        rep = handle.report()
        handle.remove()
    kaleido.apply(pipe.transformer, cfg)
    try:
        generate()
        trace = kaleido.get_trace(pipe.transformer)
    finally:
        kaleido.remove(pipe.transformer)
    want = {}
    for r in trace.records:
        if r.layer >= 0 and r.op == "self_qk":
            oc = r.op_counts().total()
            want = {k: want.get(k, 0) + v for k, v in (("mac8", oc.total_mac8), ("low", oc.total_mac_low))}
    got = rep.op_counts["self_qk"]
    assert (got.total_mac8, got.total_mac_low, got.low_bits) == (want["mac8"], want["low"], 7)
    assert rep.saved_fraction("self_qk") > 0
    assert settings_label("kaleido", make_method("kaleido", config=d, label="mine").settings_dict()) == \
        "kaleido config=mine"


def test_a_whole_config_and_flat_settings_together_are_refused():
    with pytest.raises(ValueError, match="either a whole config or the flat settings") as e:
        KaleidoSettings(theta1=3.0, config=KaleidoConfig().to_dict())
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="unknown key"):
        KaleidoSettings(config={"reuse": {"thetaX": 1}})
