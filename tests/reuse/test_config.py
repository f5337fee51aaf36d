import json
import math

import pytest

from kaleido.reuse import ReuseConfig


def test_defaults_and_dense():
    c = ReuseConfig(2, 6)
    assert (c.theta1, c.theta2, c.low_bits, c.metric, c.granularity) == (2.0, 6.0, 4, "linf", "group")
    d = ReuseConfig.dense()
    assert d.theta1 == d.theta2 == 0.0 and d.is_dense
    assert not c.is_dense


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(theta1=5, theta2=3), "theta1=5.0 > theta2=3.0"),
        (dict(theta1=-1, theta2=3), ">= 0"),
        (dict(theta1=0, theta2=-0.5), ">= 0"),
        (dict(theta1=float("nan"), theta2=3), "finite"),
        (dict(theta1=1, theta2=math.inf), "finite"),
        (dict(theta1=1, theta2=3, low_bits=0), "low_bits=0"),
        (dict(theta1=1, theta2=3, low_bits=8), "low_bits=8"),
        (dict(theta1=1, theta2=9, low_bits=4), "2**(low_bits-1)=8"),
        (dict(theta1=1, theta2=3, metric="l2"), "unknown metric 'l2'"),
        (dict(theta1=1, theta2=3, granularity="row"), "unknown quantisation granularity 'row'"),
        (dict(theta1=1, theta2=3, dense_steps=-1), "dense_steps"),
        (dict(theta1=1, theta2=3, schedule=((0.5, 4, 2),)), "schedule[0]"),
        (dict(theta1=1, theta2=3, schedule=((1.5, 1, 2),)), "[0, 1]"),
        (dict(theta1=1, theta2=3, schedule=((0.5, 1, 2), (0.2, 1, 2))), "sorted"),
        (dict(theta1=1, theta2=3, schedule=((0.5, 1),)), "(start_fraction, theta1, theta2)"),
    ],
)
def test_invalid_configs_name_the_problem(kwargs, words):
    with pytest.raises(ValueError) as e:
        ReuseConfig(**kwargs)
    assert words in str(e.value)


def test_theta2_limit_is_exactly_the_low_bit_range():
    # linf: Delta < theta2 = 8 means max|d| <= 7, which fits 4 signed bits; 8.5 would admit 8.
    ReuseConfig(0, 8, low_bits=4)
    with pytest.raises(ValueError):
        ReuseConfig(0, 8.5, low_bits=4)
    # mean_abs is checked per row in the decision, so a large theta2 is allowed.
    ReuseConfig(0, 20, low_bits=4, metric="mean_abs")


def test_at_step_without_schedule_returns_self():
    c = ReuseConfig(1, 4)
    assert c.at_step(0, 10) is c


def test_at_step_resolves_dense_steps_and_schedule():
    c = ReuseConfig(1, 4, dense_steps=2, schedule=((0.5, 2, 6), (0.8, 3, 8)))
    assert c.has_schedule
    steps = [c.at_step(s, 10) for s in range(10)]
    assert all(not s.has_schedule for s in steps)
    assert [(s.theta1, s.theta2) for s in steps] == (
        [(0.0, 0.0)] * 2 + [(1.0, 4.0)] * 3 + [(2.0, 6.0)] * 3 + [(3.0, 8.0)] * 2
    )
    assert steps[5].low_bits == c.low_bits and steps[5].metric == c.metric
    with pytest.raises(ValueError, match="step 10 of 10"):
        c.at_step(10, 10)


def test_round_trip_through_json():
    c = ReuseConfig(1.5, 6, low_bits=5, metric="mean_abs", granularity="head", dense_steps=3, schedule=((0.25, 2, 7),))
    d = json.loads(json.dumps(c.to_dict()))
    assert ReuseConfig.from_dict(d) == c
    with pytest.raises(ValueError, match="unknown keys"):
        ReuseConfig.from_dict({**d, "theta3": 1})
    with pytest.raises(ValueError, match="missing key 'theta2'"):
        ReuseConfig.from_dict({"theta1": 1})
