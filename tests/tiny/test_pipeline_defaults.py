"""``load_pipeline("tiny")``: a WanPipeline whose call defaults are TINY_DEMO; clean loading and prompt warnings."""

from __future__ import annotations

import subprocess
import sys
import warnings

import pytest
import torch

from kaleido.tiny.pipeline import TINY_DEMO, PromptWarning, TinyWanPipeline, load_pipeline


@pytest.fixture(scope="module")
def pipe():
    p = load_pipeline("tiny")
    p.set_progress_bar_config(disable=True)
    return p


def test_tiny_pipeline_is_a_wan_pipeline_with_the_demo_defaults(pipe):
    from diffusers import WanPipeline

    assert isinstance(pipe, TinyWanPipeline) and isinstance(pipe, WanPipeline)
    out = pipe("a red circle moving right", num_inference_steps=1, output_type="np").frames[0]
    assert out.shape == (TINY_DEMO.num_frames, TINY_DEMO.height, TINY_DEMO.width, 3)


def test_keywords_and_positionals_still_override(pipe):
    out = pipe("a red circle", height=32, width=32, num_frames=5, num_inference_steps=1, output_type="np").frames[0]
    assert out.shape == (5, 32, 32, 3)
    # WanPipeline's positional order is kept: prompt, negative_prompt, height, width, num_frames, steps
    out = pipe("a red circle", "", 32, 48, 5, 1, output_type="np").frames[0]
    assert out.shape == (5, 32, 48, 3)


def test_same_video_as_the_stock_call_with_the_demo_settings(pipe):
    from diffusers import WanPipeline

    kw = dict(num_inference_steps=1, output_type="np")
    a = pipe("a blue square", generator=torch.Generator().manual_seed(3), **kw).frames[0]
    b = WanPipeline.__call__(pipe, "a blue square", generator=torch.Generator().manual_seed(3),
                             **{**TINY_DEMO.pipeline_kwargs(), **kw}).frames[0]
    assert (a == b).all()


def test_words_outside_the_vocabulary_warn_naming_them_and_the_file(pipe):
    with pytest.warns(PromptWarning, match=r"'sliding', 'diagonally' not in the model's vocabulary") as rec:
        pipe("a red circle sliding diagonally", num_inference_steps=1, num_frames=1, height=16, width=16,
             output_type="np")
    msg = str(rec[0].message)
    assert "\n" not in msg and msg.endswith("tokenizer/vocab.txt")
    assert rec[0].filename == __file__  # points at the caller's line, not at kaleido's source
    with warnings.catch_warnings():
        warnings.simplefilter("error", PromptWarning)
        pipe("a red circle moving right on a striped background", num_inference_steps=1, num_frames=1, height=16,
             width=16, output_type="np")


def test_loading_asks_for_dtype_and_keeps_it():
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        p = load_pipeline("tiny", dtype=torch.bfloat16)
    assert not [w for w in rec if "torch_dtype" in str(w.message)], [str(w.message) for w in rec]
    assert p.transformer.dtype == torch.bfloat16


@pytest.mark.parametrize("model, match", [
    ("someone/not-a-model", "not in the local Hugging Face cache"),
    ("no-such-thing", "neither 'tiny'"),
])
def test_bad_models_are_one_line(model, match, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # as HF_HUB_OFFLINE=1 sets it at import
    with pytest.raises(ValueError, match=match) as e:
        load_pipeline(model)
    assert "\n" not in str(e.value)


def test_a_broken_pipeline_folder_is_one_line(tmp_path):
    (tmp_path / "model_index.json").write_text('{"_class_name": "WanPipeline", "vae": ["diffusers", "AutoencoderKLWan"]}')
    with pytest.raises(ValueError, match=f"cannot load '{tmp_path}'") as e:
        load_pipeline(str(tmp_path))
    assert "\n" not in str(e.value)


def test_package_names_are_listed_and_reachable():
    code = ("import kaleido; names = dir(kaleido); "
            "assert {'apply', 'KaleidoConfig', 'get_trace', 'tiny', 'reuse'} <= set(names), names; "
            "print(kaleido.tiny.pipeline.load_pipeline.__name__)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == "load_pipeline", res.stderr


def test_a_saved_tiny_pipeline_loads_back_with_its_defaults(pipe, tmp_path):
    from diffusers import WanPipeline

    pipe.save_pretrained(str(tmp_path / "mine"), safe_serialization=True)
    again = load_pipeline(str(tmp_path / "mine"))
    assert type(again) is TinyWanPipeline
    stock = WanPipeline.from_pretrained(str(tmp_path / "mine"))  # plain diffusers reads it as a WanPipeline
    assert type(stock) is WanPipeline


def test_an_over_long_prompt_warns_once_at_the_callers_line(pipe):
    from kaleido.evaluation.generate import GenerationSettings, generate

    long = " ".join(["a red circle"] * 6)  # 18 words + </s> > 16 tokens
    with pytest.warns(PromptWarning, match="19 tokens but this model reads only the first 16") as rec:
        pipe(long, num_inference_steps=1, num_frames=1, height=16, width=16, output_type="np")
    assert len(rec) == 1 and rec[0].filename == __file__
    with warnings.catch_warnings(record=True) as rec:  # through the harness: still once, not twice
        warnings.simplefilter("always")
        generate(pipe, long, 0, GenerationSettings(num_inference_steps=1, num_frames=1, height=16, width=16, max_sequence_length=16))
    assert len([w for w in rec if issubclass(w.category, PromptWarning)]) == 1
