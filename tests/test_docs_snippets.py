"""The README's and docs/integration.md's Python snippets run, and their command lines parse, as written.

* Every ```python block of ``README.md`` and ``docs/integration.md`` is executed as it stands, in a
  fresh namespace, from a scratch folder that sees the repository's ``configs/`` (the snippets are
  written to be run from the repository root). The one substitution, announced in an HTML comment
  above each block, is the step count: the block's single ``num_inference_steps=25`` becomes
  ``num_inference_steps=2``. Nothing else is changed, so a snippet that drifts from the API, or that
  runs at another size than the miniature model's (diffusers' 480x832 x 81-frame defaults
  ran for 10 minutes), fails here.
* Every ``kaleido ...`` command of the ```bash blocks (each ``&&``-separated part that starts with
  ``kaleido``) and every inline ```kaleido ... --option``` span outside tables is parsed by the real
  click command (``make_context``: names, types, required options, ranges) without running it. The
  command table's cells are templates (``tiny|PATH|hub-id``) and are not parsed.
* The README's ``kaleido simulate ... --profile tiny_wan_default`` line is also run: the shipped
  profile comes from another grid than every published workload, and it must carry without a flag.
"""

from __future__ import annotations

import re
import shlex
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "docs/integration.md")
STEPS_AS_WRITTEN = "num_inference_steps=25"
STEPS_IN_TEST = "num_inference_steps=2"


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)


def command_lines(path: Path) -> list[str]:
    """``kaleido ...`` commands of the bash blocks, and inline ones with an option, outside tables."""
    text = path.read_text()
    cmds = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            for part in line.split("&&"):
                part = part.strip()
                if part.startswith("kaleido "):
                    cmds.append(part)
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    for line in prose.splitlines():
        if line.lstrip().startswith("|"):
            continue
        cmds += [c for c in re.findall(r"`(kaleido [^`]+)`", line) if " --" in c]
    return cmds


def parse(command: str):
    """Parse ``command`` with the real ``kaleido`` click command; raises click's error if it does not parse."""
    from kaleido.cli.main import cli

    name, *args = shlex.split(command, comments=True)[1:]
    sub = cli.get_command(None, name)
    assert sub is not None, f"{command!r}: no subcommand {name!r}"
    return sub.make_context(name, args)


@pytest.mark.parametrize("doc", DOCS)
def test_python_snippets_run_as_written(doc, tmp_path, monkeypatch):
    from kaleido.tiny.pipeline import TINY_DEMO, PromptWarning

    blocks = python_blocks(ROOT / doc)
    assert blocks, f"{doc} has no python block"
    (tmp_path / "configs").symlink_to(ROOT / "configs")
    monkeypatch.chdir(tmp_path)
    for code in blocks:
        assert code.count(STEPS_AS_WRITTEN) == 1, f"{doc}: the block must say {STEPS_AS_WRITTEN} exactly once"
        ns: dict = {}
        with warnings.catch_warnings():
            warnings.simplefilter("error", PromptWarning)  # the snippet's prompt is in the vocabulary
            exec(compile(code.replace(STEPS_AS_WRITTEN, STEPS_IN_TEST), f"{doc} snippet", "exec"), ns)
        video = ns["video"]
        # the miniature model's own size, from the pipeline's defaults (the snippet passes none)
        assert video.shape == (TINY_DEMO.num_frames, TINY_DEMO.height, TINY_DEMO.width, 3)
        assert ns["trace"].steps == [0, 1]
        assert (tmp_path / "trace.safetensors").stat().st_size > 0
        # kaleido.remove ran: the transformer is the stock one again
        assert getattr(ns["pipe"].transformer, "_kaleido_runtime", None) is None


@pytest.mark.parametrize("doc", DOCS)
def test_command_lines_parse(doc):
    cmds = command_lines(ROOT / doc)
    assert cmds, f"{doc} shows no kaleido command"
    for c in cmds:
        parse(c)


def test_readme_commands_include_the_simulate_and_generate_ones():
    cmds = command_lines(ROOT / "README.md")
    assert "kaleido generate --out out/demo" in cmds
    assert any(c.startswith("kaleido simulate --workload hunyuan-720p --profile tiny_wan_default") for c in cmds)
    assert any(c.startswith("kaleido simulate --workload all --trace") for c in cmds)


def test_a_drifted_command_would_fail():
    import click

    with pytest.raises(click.UsageError):
        parse("kaleido generate --modle tiny --out o")
    with pytest.raises(click.BadParameter):
        parse("kaleido generate --steps 0 --out o")


def test_readme_simulate_line_runs_as_written():
    from click.testing import CliRunner

    from kaleido.cli.main import cli

    line = next(c for c in command_lines(ROOT / "README.md") if "--profile tiny_wan_default" in c)
    res = CliRunner().invoke(cli, shlex.split(line, comments=True)[1:])
    assert res.exit_code == 0, res.output
    assert "carried to hunyuan-720p (33x45x80) by the documented carry-over rule" in res.output
    assert "speedup" in res.output
