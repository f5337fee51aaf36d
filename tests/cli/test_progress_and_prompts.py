"""One labelled progress bar per generation in a terminal, none in a log; prompt problems once, in one line."""

from __future__ import annotations

import pytest

from kaleido.generation_settings import GenerationSettings
from kaleido.evaluation.generate import dense_runs, prompt_problems, show_progress

SMALL = GenerationSettings(num_inference_steps=2, num_frames=5, height=32, width=32)


@pytest.fixture(scope="module")
def random_pipe():
    from kaleido.models.testing import tiny_random_wan_pipeline

    return tiny_random_wan_pipeline()


def test_no_bars_when_stderr_is_not_a_terminal(random_pipe, capfd):
    assert show_progress(None) is False  # pytest's stderr is a pipe, as a log file is
    dense_runs(random_pipe, ["a", "b"], [0], SMALL, warmup_steps=1)
    err = capfd.readouterr().err
    assert "it/s" not in err and "%|" not in err


def test_one_labelled_bar_per_generation_when_asked(random_pipe, capfd):
    dense_runs(random_pipe, ["a", "b"], [0], SMALL, progress=True, warmup_steps=1)
    err = capfd.readouterr().err
    for label in ("warm-up", "dense 1/2", "dense 2/2"):
        assert label in err
    final = [seg for seg in err.replace("\r", "\n").splitlines() if "2/2 [" in seg and "100%" in seg]
    assert len({seg.split(":")[0] for seg in final}) == 2  # dense 1/2 and 2/2 each finish one bar (no nesting)


def test_prompt_problems_are_one_line_each():
    from kaleido.tiny.pipeline import load_pipeline

    pipe = load_pipeline("tiny")
    assert prompt_problems(pipe, "a red circle moving right on a striped background", 16) == []
    probs = prompt_problems(pipe, "a red circle sliding " + "on a plain background " * 4, 16)
    assert len(probs) == 2 and all("\n" not in p for p in probs)
    assert "'sliding'" in probs[0] and "vocab.txt" in probs[0]
    assert "reads only the first 16" in probs[1]
