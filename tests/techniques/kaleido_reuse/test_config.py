"""KaleidoConfig: round trips, overrides, and clear errors on bad keys and values."""

from __future__ import annotations

import pytest

from kaleido.techniques.kaleido_reuse import KaleidoConfig
from kaleido.reuse import ReuseConfig


def _custom() -> KaleidoConfig:
    return KaleidoConfig.from_dict({
        "reuse": {"theta1": 1, "theta2": 6, "low_bits": 4, "dense_steps": 2, "schedule": [[0.5, 2, 8]]},
        "ops": {
            "self_qk": {"axes": ["w", "t", "t"], "theta1": 3},
            "cross_qk": {"enabled": False},
            "ffn": {"chunk_size": 64, "axes": "h"},
            "pv": {"enabled": True, "chunk_size": 8},
        },
        "layers": {"0-1": {"self_qk": {"enabled": False}}, "3": {"proj": {"theta2": 4}}},
        "trace": {"record_maps": True},
    })


def test_round_trip_json_yaml_and_files(tmp_path):
    cfg = _custom()
    assert KaleidoConfig.from_json(cfg.to_json()) == cfg
    assert KaleidoConfig.from_yaml(cfg.to_yaml()) == cfg
    assert KaleidoConfig.from_dict(cfg.to_dict()) == cfg
    for name in ("c.json", "c.yaml"):
        assert KaleidoConfig.load(cfg.save(tmp_path / name)) == cfg
    assert KaleidoConfig.from_yaml("") == KaleidoConfig()


def test_resolution_per_op_layer_and_step():
    cfg = _custom()
    assert cfg.reuse_config("self_qk", 5).theta1 == 3.0
    assert cfg.reuse_config("proj", 5).theta2 == 6.0
    assert cfg.reuse_config("proj", 3).theta2 == 4.0
    assert not cfg.op_config("self_qk", 1).enabled and cfg.op_config("self_qk", 2).enabled
    assert cfg.op_config("ffn", 0).axes == ("h",) and cfg.op_config("ffn", 0).chunk_size == 64
    rc = cfg.reuse_config("ffn", 0)
    assert rc.at_step(0, 10).theta2 == 0.0  # warm-up
    assert rc.at_step(3, 10).theta2 == 6.0
    assert rc.at_step(6, 10).theta2 == 8.0  # schedule from half-way
    assert KaleidoConfig.dense().reuse == ReuseConfig.dense()
    assert KaleidoConfig().with_thresholds(1, 3).reuse.theta2 == 3.0


@pytest.mark.parametrize(
    "bad, words",
    [
        ({"reuse": {"theta": 1}}, ["unknown key", "theta1"]),
        ({"ops": {"self_attn": {}}}, ["unknown key", "self_qk"]),
        ({"ops": {"proj": {"chunk": 8}}}, ["unknown key", "chunk_size"]),
        ({"ops": {"proj": {"chunk_size": 0}}}, ["chunk_size", ">= 1"]),
        ({"ops": {"proj": {"axes": "x"}}}, ["axis", "'x'"]),
        ({"ops": {"proj": {"enabled": "yes"}}}, ["enabled"]),
        ({"ops": {"self_qk": {"groups": "heads"}}}, ["groups", "rope"]),
        ({"reuse": {"theta1": 5, "theta2": 2}}, ["theta1", "theta2"]),
        ({"reuse": {"theta1": 1, "theta2": 40}}, ["low_bits"]),
        ({"reuse": {"low_bits": 9}}, ["low_bits"]),
        ({"reuse": {"metric": "l2"}}, ["metric"]),
        ({"ops": {"ffn": {"theta1": -1}}}, ["ops.ffn", ">= 0"]),
        ({"layers": {"a-b": {}}}, ["layers key"]),
        ({"layers": {"4-2": {}}}, ["range end"]),
        ({"layers": {"0": {"attn": {}}}}, ["unknown key"]),
        ({"layers": {"0": {"proj": {"theta1": 40}}}}, ["layers['0'].proj"]),
        ({"version": 2}, ["version"]),
        ({"trace": {"maps": True}}, ["record_maps"]),
        ({"extra": 1}, ["unknown key"]),
    ],
)
def test_bad_config_is_a_clear_value_error(bad, words):
    with pytest.raises(ValueError) as e:
        KaleidoConfig.from_dict(bad)
    for w in words:
        assert w in str(e.value), str(e.value)


def test_bad_files(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        KaleidoConfig.load(tmp_path / "missing.yaml")
    (tmp_path / "b.yaml").write_text("reuse: [1, 2\n")
    with pytest.raises(ValueError, match="YAML"):
        KaleidoConfig.load(tmp_path / "b.yaml")
    (tmp_path / "b.json").write_text("{")
    with pytest.raises(ValueError, match="JSON"):
        KaleidoConfig.load(tmp_path / "b.json")
    (tmp_path / "l.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(ValueError, match="mapping"):
        KaleidoConfig.load(tmp_path / "l.yaml")


def test_shipped_default_yaml_is_the_default_config():
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "configs" / "default.yaml"
    assert KaleidoConfig.load(path) == KaleidoConfig()


def test_shipped_self_qk_only_yaml_reuses_self_attention_qk_only():
    from pathlib import Path

    cfg = KaleidoConfig.load(Path(__file__).resolve().parents[3] / "configs" / "self-qk-only.yaml")
    assert [k for k, op in cfg.ops.items() if op.enabled] == ["self_qk"]
    r = cfg.reuse_config("self_qk", 0)
    assert (r.theta1, r.theta2, r.low_bits, r.dense_steps) == (36, 64, 7, 3)


def test_round_trip_keeps_thresholds_when_an_op_drops_a_default_override():
    import dataclasses

    cfg = KaleidoConfig()
    ops = dict(cfg.ops)
    ops["self_qk"] = dataclasses.replace(ops["self_qk"], reuse={})
    flat = dataclasses.replace(cfg, ops=ops)
    back = KaleidoConfig.from_yaml(flat.to_yaml())
    assert back.reuse_config("self_qk", 0) == flat.reuse_config("self_qk", 0) == flat.reuse


def test_packaged_calibrated_config_loads_by_name():
    from kaleido.techniques.kaleido_reuse.config import packaged_configs

    assert "calibrated-tiny" in packaged_configs()
    by_name = KaleidoConfig.load("calibrated-tiny")
    assert by_name.to_dict() == KaleidoConfig.load(packaged_configs()["calibrated-tiny"]).to_dict()
    assert by_name.to_dict() != KaleidoConfig().to_dict()  # it is not the hand-written default
    with pytest.raises(ValueError, match="packaged configs by name: .*calibrated-tiny"):
        KaleidoConfig.load("no-such-config")
