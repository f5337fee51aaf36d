"""Every technique on every supported model family: the shared tester (method_tester.py) once per family."""

import re
from pathlib import Path

import pytest
import torch
from method_tester import FAMILIES, SETTINGS, STEPS, MethodTesterMixin

from kaleido.techniques import METHODS, make_method


class TestWan(MethodTesterMixin):
    family = "wan"


class TestHunyuanVideo(MethodTesterMixin):
    family = "hunyuan_video"


class TestCogVideoX5BStyle(MethodTesterMixin):
    family = "cogvideox_5b_style"


class TestCogVideoX2BStyle(MethodTesterMixin):
    family = "cogvideox_2b_style"


@pytest.mark.parametrize("name", sorted(METHODS))
def test_a_model_without_an_adapter_is_refused_in_one_line(name):
    with pytest.raises(ValueError, match="no adapter for Linear") as e:
        make_method(name, **SETTINGS[name]).apply(torch.nn.Linear(4, 4))
    assert "\n" not in str(e.value)


def test_the_docs_table_says_what_the_tester_checks():
    """docs/baselines.md's technique x family table: "refused" exactly where a family refuses the technique."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "baselines.md").read_text()
    section = text.split("### Every technique on every supported model", 1)[1].split("\n#", 1)[0]
    rows = {}
    for line in section.splitlines():
        m = re.match(r"\| `(\w+)`", line)
        if m:
            rows[m.group(1)] = [c.strip() for c in line.strip().strip("|").split("|")[1:]]
    assert set(rows) == set(METHODS)
    for name, cells in rows.items():
        assert len(cells) == len(FAMILIES), name
        for fam, cell in zip(FAMILIES.values(), cells):
            assert cell.startswith("refused") == (name in fam.refused), (name, fam.name, cell)


def test_pab_refuses_hunyuan_video_with_true_cfg():
    """HunyuanVideo's true classifier-free guidance (``true_cfg_scale > 1`` with a negative prompt) calls the
    transformer twice per step, under the contexts "cond" and "uncond": PAB would share its cache between them.
    (The tester's family runs HunyuanVideo's embedded guidance: one call per step, which PAB serves.)"""
    pipe, call = FAMILIES["hunyuan_video"].build()
    pipe.set_progress_bar_config(disable=True)
    g = torch.Generator().manual_seed(7)
    call = dict(call, true_cfg_scale=2.0, negative_prompt_embeds=torch.randn(1, 6, 16, generator=g),
                negative_pooled_prompt_embeds=torch.randn(1, 8, generator=g),
                negative_prompt_attention_mask=call["prompt_attention_mask"])
    slots = []
    h = make_method("pab", **SETTINGS["pab"]).apply(pipe.transformer)
    h.observe("call planned", "test", lambda gemms: slots.append((h.call.context, h.call.slot)))
    try:
        with pytest.raises(ValueError, match="calls the transformer twice per step") as e, torch.no_grad():
            pipe(num_inference_steps=STEPS, output_type="latent", generator=torch.Generator().manual_seed(0), **call)
    finally:
        h.remove()
    assert "\n" not in str(e.value)
    assert slots == [("cond", 0), ("uncond", 1)]  # refused at the first step's second call
