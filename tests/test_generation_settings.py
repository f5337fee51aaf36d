"""GenerationSettings: the one type of a pipeline call's settings (diffusers' keyword names)."""

from __future__ import annotations

import pytest

from kaleido.generation_settings import GenerationSettings


def test_call_kwargs_leave_out_the_pipeline_defaults_and_round_trip():
    s = GenerationSettings(num_inference_steps=4, height=32, width=48, guidance_scale=1.0)
    assert s.call_kwargs() == {"height": 32, "width": 48, "num_inference_steps": 4, "guidance_scale": 1.0}
    assert s.to_dict()["num_frames"] is None and len(s.to_dict()) == 8  # the sampler is the eighth
    assert GenerationSettings.from_call(s.call_kwargs()) == s
    assert GenerationSettings().call_kwargs() == {}


def test_overrides_replace_only_given_values():
    s = GenerationSettings(num_inference_steps=25, num_frames=17)
    assert s.overridden(num_inference_steps=2, num_frames=None) == GenerationSettings(num_inference_steps=2, num_frames=17)
    assert s.overridden() == s


def test_bad_values_and_keys_are_one_line_errors():
    with pytest.raises(ValueError, match=r"GenerationSettings.num_inference_steps=0: give a whole number >= 1"):
        GenerationSettings(num_inference_steps=0)
    with pytest.raises(ValueError, match=r"GenerationSettings.height=32.5"):
        GenerationSettings(height=32.5)
    with pytest.raises(ValueError, match=r"pipeline call keys \['steps'\] are not generation settings"):
        GenerationSettings.from_call({"steps": 2})


def test_the_tiny_demo_and_the_harness_defaults_are_generation_settings():
    from kaleido.evaluation.generate import settings_for
    from kaleido.tiny.pipeline import TINY_DEMO

    assert isinstance(TINY_DEMO, GenerationSettings) and TINY_DEMO.sampler is None
    assert {k: v for k, v in TINY_DEMO.to_dict().items() if k != "sampler"} == TINY_DEMO.call_kwargs()
    assert settings_for("tiny") == TINY_DEMO
    # a sampler that is the model's own is dropped (rows keep their keys); another one is kept
    assert settings_for("tiny", sampler="euler") == TINY_DEMO
    assert settings_for("tiny", sampler="consistency").call_kwargs()["sampler"] == "consistency"
    assert settings_for("tiny-rcm", sampler="consistency").sampler is None
    assert settings_for("tiny-rcm", sampler="euler").sampler == "euler"
    assert settings_for("org/model", sampler="euler").sampler == "euler"  # a folder's own is not known here
    assert settings_for("tiny", num_inference_steps=3).num_inference_steps == 3 and TINY_DEMO.num_inference_steps == 25
    assert settings_for("org/model") == GenerationSettings()
