"""The comparison's pipelines load through the one loader (kaleido.tiny.pipeline.load_pipeline), with its errors."""

from __future__ import annotations

import pytest

from kaleido.compare.pipelines import build_random_wan_pipeline, load_pipeline, pipeline_fingerprint


def test_a_saved_folder_loads_and_fingerprints_like_any_model(tmp_path):
    folder = tmp_path / "random-wan"
    build_random_wan_pipeline().save_pretrained(str(folder), safe_serialization=True)
    pipe, call = load_pipeline(str(folder))
    assert type(pipe).__name__ == "WanPipeline" and call == {}
    fp = pipeline_fingerprint(str(folder))
    assert fp.startswith(f"{folder}:") and fp == pipeline_fingerprint(str(folder))


@pytest.mark.parametrize("name, match", [
    ("./nothing-here", r"neither 'tiny', an existing pipeline folder, nor a hub id like 'org/name' \(or 'random-wan'"),
    ("someone/some-model", "a comparison runs on local weights"),
])
def test_a_bad_pipeline_name_is_one_line(name, match):
    with pytest.raises(ValueError, match=match) as e:
        pipeline_fingerprint(name)
    assert "\n" not in str(e.value)


def test_an_empty_folder_gets_the_loaders_message(tmp_path):
    with pytest.raises(ValueError, match="is a folder without model_index.json: pass a diffusers pipeline folder"):
        load_pipeline(str(tmp_path))


def test_dtype_names_and_a_bad_one():
    import torch

    from kaleido.tiny.pipeline import torch_dtype

    assert torch_dtype("bf16") is torch.bfloat16 and torch_dtype(torch.float16) is torch.float16
    with pytest.raises(ValueError, match=r"dtype 'fp64' is not one of \['fp32', 'bf16', 'fp16'\]"):
        torch_dtype("fp64")
