"""``kaleido.techniques``: one apply / remove for Kaleido and every baseline, configs that round-trip."""

import dataclasses

import numpy as np
import pytest

from kaleido import techniques
from kaleido.techniques import METHODS
from kaleido.techniques.kaleido_reuse import KaleidoConfig


#: settings a baseline cannot do without (MagCache: the model's magnitude ratios; a list, kept as a tuple)
REQUIRED = {"magcache": dict(mag_ratios=[1.0, 1.02, 0.97], num_inference_steps=3)}


def _baseline_configs():
    return {n: m.Settings(**REQUIRED.get(n, {})) for n, m in METHODS.items() if n not in ("kaleido", "stack")}


@pytest.mark.parametrize("name", sorted(_baseline_configs()))
def test_every_baseline_config_round_trips(name, tmp_path):
    cfg = _baseline_configs()[name]
    d = techniques.config_to_dict(cfg)
    assert d["technique"] == name
    back = techniques.config_from_dict(d)
    assert type(back) is type(cfg) and dataclasses.asdict(back) == dataclasses.asdict(cfg)
    for suffix in (".json", ".yaml"):
        p = techniques.save_config(cfg, tmp_path / f"c{suffix}")
        assert dataclasses.asdict(techniques.load_config(p)) == dataclasses.asdict(cfg)


def test_magcache_ratios_round_trip_as_numbers(tmp_path):
    cfg = METHODS["magcache"].Settings(mag_ratios=[1, 1.25, 0.5], num_inference_steps=3, threshold=0.1)
    assert cfg.mag_ratios == (1.0, 1.25, 0.5)  # a list in, a tuple of floats kept (hashable, frozen)
    d = techniques.config_to_dict(cfg)
    assert d == {"technique": "magcache", "threshold": 0.1, "max_skip_steps": 3, "retention_ratio": 0.2,
                 "num_inference_steps": 3, "mag_ratios": [1.0, 1.25, 0.5], "calibrate": False}
    for suffix in (".json", ".yaml"):
        assert techniques.load_config(techniques.save_config(cfg, tmp_path / f"m{suffix}")) == cfg
    calib = METHODS["magcache"].Settings(calibrate=True)
    assert techniques.config_from_dict(techniques.config_to_dict(calib)) == calib


def test_kaleido_config_and_stacks_round_trip(tmp_path):
    cfg = KaleidoConfig()
    d = techniques.config_to_dict(cfg)
    assert d["technique"] == "kaleido" and techniques.config_from_dict(d) == cfg
    # a mapping without "technique" is a KaleidoConfig, as kaleido.apply always read it
    assert techniques.config_from_dict(cfg.to_dict()) == cfg
    stack = [METHODS["taylorseer"].Settings(cache_interval=2), cfg]
    p = techniques.save_config(stack, tmp_path / "stack.yaml")
    back = techniques.load_config(p)
    assert isinstance(back, list) and back[1] == cfg and back[0].cache_interval == 2
    # a plain KaleidoConfig file still loads through the front door
    cfg.save(tmp_path / "k.yaml")
    assert techniques.load_config(tmp_path / "k.yaml") == cfg


@pytest.mark.parametrize("bad, match", [
    ({"technique": "nope"}, "unknown technique 'nope'"),
    ({"technique": "tome", "rate": 0.5}, r"tome: unknown setting\(s\) \['rate'\]"),
    ({"technique": "tome", "ratio": 5.0}, "ratio"),
    (3, "a mapping or a list"),
])
def test_bad_configs_get_one_line(bad, match):
    with pytest.raises(ValueError, match=match):
        techniques.config_from_dict(bad)


def test_apply_dispatches_on_the_config_type_and_remove_undoes_all(random_pipe, generate, dense_frames):
    pipe, _ = random_pipe
    tr = pipe.transformer
    rep = techniques.apply(tr, [METHODS["taylorseer"].Settings(cache_interval=3, disable_cache_before_step=1),
                                KaleidoConfig()])
    assert techniques.applied(tr) == ["taylorseer", "kaleido"]
    assert rep[1].patched.n_active > 0 and "Kaleido patched" in rep[1].summary()  # what Kaleido patched
    frames = generate()
    assert not np.array_equal(frames, dense_frames)
    trace = techniques.remove(tr)
    assert trace is not None and len(trace) > 0  # Kaleido's trace of the stacked run
    assert techniques.applied(tr) == []
    np.testing.assert_array_equal(generate(), dense_frames)
    with pytest.raises(ValueError, match="not applied"):
        techniques.remove(tr)


def test_apply_refuses_filters_a_baseline_cannot_honour_and_non_configs(random_pipe):
    tr = random_pipe[0].transformer
    with pytest.raises(ValueError, match="filter_fn is not supported"):
        techniques.apply(tr, METHODS["tome"].Settings(), filter_fn=lambda n, m: True)
    with pytest.raises(ValueError, match="not a technique config"):
        techniques.apply(tr, object())
    with pytest.raises(ValueError, match="empty list"):
        techniques.apply(tr, [])
    assert techniques.applied(tr) == []


def test_a_failing_list_undoes_only_what_it_applied(random_pipe, generate, dense_frames):
    tr = random_pipe[0].transformer
    techniques.apply(tr, METHODS["taylorseer"].Settings())
    try:
        with pytest.raises(ValueError, match="already has a diffusers cache"):
            techniques.apply(tr, [METHODS["tome"].Settings(), METHODS["fbcache"].Settings()])
        assert techniques.applied(tr) == ["taylorseer"]  # ToMe rolled back, the earlier cache kept
    finally:
        techniques.remove(tr)
    np.testing.assert_array_equal(generate(), dense_frames)


def test_a_list_follows_the_stacks_rules(random_pipe):
    tr = random_pipe[0].transformer
    with pytest.raises(ValueError, match="both decide self_"):
        techniques.apply(tr, [METHODS["tome"].Settings(), METHODS["block_topk"].Settings()])
    with pytest.raises(ValueError, match="both step caches"):
        techniques.apply(tr, [METHODS["taylorseer"].Settings(), METHODS["fbcache"].Settings()])
    assert techniques.applied(tr) == []


def _torch_hooks(module):
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in module.modules())


def test_kaleido_answers_with_the_handle_every_technique_does(random_pipe, generate, dense_frames):
    """kaleido.apply(KaleidoConfig) returns a MethodHandle like a baseline's: report, simulator traces, summary,
    remove; the same counts as KaleidoMethod through the comparison's path."""
    from kaleido.techniques.handle import MethodHandle
    from kaleido.techniques.kaleido_reuse.method import KaleidoMethod

    tr = random_pipe[0].transformer
    before = _torch_hooks(tr)
    cfg = KaleidoConfig()
    handle = techniques.apply(tr, cfg)
    assert isinstance(handle, MethodHandle) and handle.records_trace and not handle.removed
    assert handle.summary() == handle.patched.summary() and handle.summary().startswith("Kaleido patched")
    frames = generate()
    report, traces = handle.report(), handle.simulator_traces()
    assert set(traces) == {"kaleido"} and report.method == "kaleido" and report.calls > 0
    trace = techniques.remove(tr)
    assert handle.removed and trace.summary() == traces["kaleido"].summary()
    assert _torch_hooks(tr) == before and techniques.applied(tr) == []
    np.testing.assert_array_equal(generate(), dense_frames)

    other = KaleidoMethod.from_config(cfg).apply(tr)  # the comparison's path: the same handle, the same counts
    try:
        np.testing.assert_array_equal(generate(), frames)
        assert {k: v.to_dict() for k, v in other.report().op_counts.items()} == \
            {k: v.to_dict() for k, v in report.op_counts.items()}
    finally:
        other.remove()


def test_a_handle_follows_kaleido_removed_behind_the_front_doors_back(random_pipe, generate, dense_frames):
    from kaleido.techniques.kaleido_reuse import remove as remove_runtime

    tr = random_pipe[0].transformer
    before = _torch_hooks(tr)
    handle = techniques.apply(tr, KaleidoConfig())
    generate()
    trace = remove_runtime(tr)  # Kaleido's own remove: the handle is undone with it and keeps the trace
    assert handle.removed and handle.recorded_trace() is trace and trace is not None
    assert techniques.applied(tr) == [] and _torch_hooks(tr) == before
    np.testing.assert_array_equal(generate(), dense_frames)
    handle.remove()  # a second removal is a no-op


def test_remove_returns_the_report_of_a_technique_that_records_no_trace(random_pipe, generate):
    tr = random_pipe[0].transformer
    handle = techniques.apply(tr, METHODS["tome"].Settings())
    assert not handle.records_trace and handle.summary().startswith("tome applied to WanTransformer3DModel")
    generate()
    report = techniques.remove(tr)
    assert report.method == "tome" and report.calls > 0 and handle.removed
