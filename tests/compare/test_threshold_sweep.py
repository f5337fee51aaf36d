"""kaleido.compare.threshold_sweep.point_config: a point's thresholds for every op."""

from __future__ import annotations

import pytest

from kaleido.compare.threshold_sweep import point_config
from kaleido.techniques.kaleido_reuse import KaleidoConfig


def test_a_point_replaces_the_thresholds_of_every_op():
    base = KaleidoConfig.from_dict({"ops": {"proj": {"theta1": 1, "theta2": 2}}})
    assert base.reuse_config("proj", 0).theta2 == 2
    cfg = point_config(base, (3.0, 6.0))
    for sw in ("self_qk", "cross_qk", "proj", "ffn"):
        rc = cfg.reuse_config(sw, 0)
        assert (rc.theta1, rc.theta2, rc.low_bits) == (3.0, 6.0, base.reuse.low_bits)
    kept = point_config(base, (3.0, 6.0), keep_op_overrides=True)
    assert kept.reuse_config("proj", 0).theta2 == 2 and kept.reuse_config("ffn", 0).theta2 == 6.0
    cfg = point_config(base, (8, 16, 5, "mean_abs"))
    assert cfg.reuse.low_bits == 5 and cfg.reuse.metric == "mean_abs"


def test_a_bad_point_is_refused_by_the_config():
    with pytest.raises(ValueError, match="theta1=9.0 > theta2=1.0"):
        point_config(KaleidoConfig(), (9, 1))
