"""kaleido.calibration.split_prompts: calibration and held-out prompts never overlap."""

from __future__ import annotations

import pytest

from kaleido.calibration import split_prompts


def test_without_heldout_the_second_half_is_held_out():
    assert split_prompts(["a", "b", "c"]) == (["a", "b"], ["c"])
    assert split_prompts(["a", "b", "c", "d"]) == (["a", "b"], ["c", "d"])
    assert split_prompts(["a"], ["b"]) == (["a"], ["b"])


def test_too_few_or_shared_prompts_are_one_line_errors():
    with pytest.raises(ValueError, match="give at least 2") as e:
        split_prompts(["a"])
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match=r"\['b'\] are both calibration and held-out prompts; keep the two sets disjoint"):
        split_prompts(["a", "b"], ["b", "c"])
    with pytest.raises(ValueError, match="disjoint"):
        split_prompts(["a", "a"])  # halves of a list with a repeated prompt
