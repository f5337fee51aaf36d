"""Every technique on every supported model family: the shared tester (method_tester.py) once per family."""

import re
from pathlib import Path

import pytest
import torch
from method_tester import FAMILIES, SETTINGS, MethodTesterMixin

from kaleido.baselines import METHODS, make_method


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
