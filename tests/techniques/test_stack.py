"""A step cache stacked with Kaleido: each unit the cache skips costs nothing, each unit that runs is costed by
Kaleido's mode maps, and removing the stack restores the dense model exactly."""

import numpy as np
import pytest

from kaleido.techniques import make_method
from kaleido.ops import UNIT_OPS

KALEIDO = {"technique": "kaleido", "theta1": 48, "theta2": 64, "low_bits": 7}
TAYLOR = {"technique": "taylorseer", "cache_interval": 3, "disable_cache_before_step": 1}


def _run(random_pipe, generate, method):
    pipe, _ = random_pipe
    handle = method.apply(pipe.transformer)
    try:
        frames = generate()
        report = handle.report()
    finally:
        handle.remove()
    return frames, report, handle


def test_stacked_accounting_composes(random_pipe, generate, dense_frames):
    _, ts, _ = _run(random_pipe, generate, make_method("taylorseer", **{k: v for k, v in TAYLOR.items() if k != "technique"}))
    stack = make_method("stack", techniques=[TAYLOR, KALEIDO])
    frames, rep, handle = _run(random_pipe, generate, stack)
    assert [m.name for m in handle.method.methods] == ["taylorseer", "kaleido"]
    assert not np.array_equal(frames, dense_frames)
    trace = rep.extra["stack"][1]["report"]
    for kind in UNIT_OPS["attn1"] + UNIT_OPS["ffn"]:
        k = kind.value
        # the same dense work is accounted for, whichever technique decided it
        assert rep.op_counts[k].dense_macs == ts.op_counts[k].dense_macs
        # what TaylorSeer skips stays skipped, and Kaleido's own FULL reuse comes on top
        assert rep.op_counts[k].total_skipped >= ts.op_counts[k].total_skipped
        assert rep.extra["op_source"][k] == "kaleido"
        assert trace["op_counts"][k]["dense_macs"] == rep.op_counts[k].dense_macs
    # TaylorSeer computes about a third of the attn1 units after its warm-up step; Kaleido saves on those
    skipped_by_cache = ts.op_counts["self_qk"].total_skipped
    assert 0 < skipped_by_cache < ts.op_counts["self_qk"].dense_macs
    assert rep.op_counts["self_qk"].total_skipped + rep.op_counts["self_qk"].total_mac_low > skipped_by_cache
    assert rep.total_saved_fraction > ts.total_saved_fraction


def test_cache_skipped_units_cost_exactly_what_the_cache_alone_skips(random_pipe, generate):
    """Kaleido's trace covers the units that ran; the units TaylorSeer served are the ones it skips alone."""
    _, ts, _ = _run(random_pipe, generate, make_method("taylorseer", cache_interval=3, disable_cache_before_step=1))
    _, rep, handle = _run(random_pipe, generate, make_method("stack", techniques=[TAYLOR, KALEIDO]))
    trace = handle.handles[1].trace  # the Kaleido handle's trace of the stacked run
    ran = {}
    for r in trace.records:
        if r.layer >= 0 and r.op == "self_qk":
            ran[r.op] = ran.get(r.op, 0) + r.dense_macs
    assert ran["self_qk"] == ts.op_counts["self_qk"].total_mac8  # the units that computed under the cache
    full_skip = sum(r.op_counts().total().total_skipped for r in trace.records if r.op == "self_qk" and r.layer >= 0)
    assert rep.op_counts["self_qk"].total_skipped == ts.op_counts["self_qk"].total_skipped + full_skip


def test_removing_the_stack_restores_dense_exactly(random_pipe, generate, dense_frames):
    _run(random_pipe, generate, make_method("stack", techniques=[TAYLOR, KALEIDO]))
    np.testing.assert_array_equal(generate(), dense_frames)


@pytest.mark.parametrize("techniques, match", [
    ([TAYLOR], "at least two"),
    ([TAYLOR, {"technique": "fbcache"}], "both step caches"),
    ([KALEIDO, {"technique": "tome", "ratio": 0.3}], "both decide"),
    ([{"technique": "tome", "ratio": 0.3}, {"technique": "block_topk"}], "both decide self_"),
    ([TAYLOR, {"technique": "stack", "techniques": []}], "another stack"),
    ([TAYLOR, {"cache_interval": 3}], "'technique' name"),
    ([TAYLOR, {"technique": "nope"}], "unknown baseline"),
])
def test_stack_refuses_what_does_not_compose(techniques, match):
    with pytest.raises(ValueError, match=match):
        make_method("stack", techniques=techniques)
