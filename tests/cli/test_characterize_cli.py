"""`kaleido characterize` on a tiny random Wan pipeline saved to a folder; bad prompt files."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from kaleido.cli.main import cli

FAST = ["--steps", "2", "--frames", "5", "--height", "32", "--width", "32"]


@pytest.fixture(scope="module")
def pipe_dir(tmp_path_factory):
    from kaleido.models.testing import tiny_random_wan_pipeline

    d = tmp_path_factory.mktemp("pipe") / "tiny-random-wan"
    tiny_random_wan_pipeline().save_pretrained(str(d), safe_serialization=True)
    return d


def test_characterize_writes_the_table_heatmaps_and_claim(tmp_path, pipe_dir):
    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps(["a red circle"]))
    out = tmp_path / "char"
    r = CliRunner().invoke(cli, ["characterize", "--model", str(pipe_dir), "--prompts", str(prompts),
                                 "--out", str(out), "--seeds", "0", *FAST])
    assert r.exit_code == 0, r.output
    d = json.loads((out / "characterization.json").read_text())
    assert d["meta"]["prompts"] == ["a red circle"] and d["meta"]["seeds"] == [0]
    q = d["operands"]["self_q"]
    assert set(q["best_axis"]) == {"t", "h", "w"} and all(a in ("t", "h", "w") for a in q["best_axis"].values())
    assert set(q["summary"]["t"]) == {"t", "h", "w"}
    assert set(q["summary"]["t"]["h"]) == {"delta_median", "delta_p90", "cos_mean"}
    assert len(q["table"]["delta_median"]) == 2 and len(q["table"]["delta_median"][0]) == 2  # layers x steps
    assert set(d["claim"]) == {"self_q", "self_k"} and isinstance(d["claim"]["self_q"]["holds"], bool)
    assert "the paper's claim" in r.output
    for png in ("group_axis_delta", "group_axis_cos", "layer_step_self_q", "layer_step_self_k", "layer_step_linear"):
        assert (out / f"{png}.png").stat().st_size > 1000
    assert "| self_q | t |" in (out / "summary.md").read_text()


@pytest.mark.parametrize("content, match", [(None, "does not exist"), ("\n  \n# comment\n", "holds no prompts"),
                                            ("[1, 2]", "list of strings")])
def test_bad_prompt_files_are_usage_errors(tmp_path, content, match):
    path = tmp_path / "prompts.txt"
    if content is not None:
        path.write_text(content)
    r = CliRunner().invoke(cli, ["characterize", "--model", "tiny", "--prompts", str(path), "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and match in r.output
