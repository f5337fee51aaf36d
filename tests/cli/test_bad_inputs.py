"""Every bad input of docs/errors.md gets the one line the table says, and no traceback.

``CASES`` is the table: each case is a ``kaleido`` command line run from a scratch folder holding
the case's files (relative names, so the messages hold no machine paths). The test runs each
(offline: ``HF_HUB_OFFLINE`` on) and checks that the output has no traceback, exits as the table
says, and that its ``Error:`` / ``warning:`` line is the table's message word for word. To
regenerate the table after changing a message: ``python tests/cli/test_bad_inputs.py`` (writes
docs/errors.md from what the code prints now).
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ERRORS_MD = ROOT / "docs" / "errors.md"
#: the installed package's folder; messages naming a shipped file say ``<kaleido>/...`` in the table
PACKAGE = str(Path(__import__("kaleido").__file__).parent)
LONG = "a red circle moving left on a plain background " * 2 + "and a blue square"


@dataclass(frozen=True)
class Case:
    topic: str
    what: str
    command: str
    files: dict = field(default_factory=dict)  # name -> text (bytes for binary); a name ending in "/" is a folder
    exit_code: int = 2
    kind: str = "Error"  # the line's prefix: "Error" (click's), or "warning" (the run goes on)
    cpu_only: bool = False  # a bad input only where torch sees no GPU


CFG = "generate --out o --config bad.yaml"
SIM = "simulate --workload hunyuan-720p"
CASES = [
    Case("thresholds", "theta1 above theta2", CFG, {"bad.yaml": "reuse: {theta1: 9, theta2: 1}\n"}),
    Case("thresholds", "a negative threshold", CFG, {"bad.yaml": "reuse: {theta1: -1, theta2: 4}\n"}),
    Case("thresholds", "low_bits outside 1-7", CFG, {"bad.yaml": "reuse: {low_bits: 9}\n"}),
    Case("config keys", "a misspelt key", CFG, {"bad.yaml": "reuse: {theta: 3}\n"}),
    Case("config keys", "an unknown section", CFG, {"bad.yaml": "reuze: {theta1: 3}\n"}),
    Case("config keys", "an unknown op switch", CFG, {"bad.yaml": "ops: {self_kq: {enabled: false}}\n"}),
    Case("YAML", "a YAML syntax error", CFG, {"bad.yaml": "reuse: {theta1: 3\n"}),
    Case("YAML", "a list where a mapping belongs", CFG, {"bad.yaml": "- theta1\n- 3\n"}),
    Case("paths", "a config file that does not exist", "generate --out o --config missing.yaml"),
    Case("paths", "a model folder without model_index.json", "generate --out o --model empty/", {"empty/": None}),
    Case("paths", "a model that is no folder, 'tiny' or hub id", "generate --out o --model ./nothing-here"),
    Case("paths", "an uncached hub id while offline", "generate --out o --model someone/not-a-model"),
    Case("paths", "a prompt file that does not exist", "characterize --prompts missing.txt --out o"),
    Case("paths", "a prompt file with no prompts", "characterize --prompts empty.txt --out o", {"empty.txt": "# none\n"}),
    Case("paths", "a results folder that does not exist", "report --results missing/ --out r.html"),
    Case("paths", "an output folder that cannot be created", "generate --out f/o", {"f": "a file, not a folder\n"}),
    Case("paths", "a comparison folder that cannot be created", "compare --pipeline random-wan --results f/rows",
         {"f": "a file, not a folder\n"}),
    Case("paths", "an output file whose folder cannot be created", "report --out f/r.html",
         {"f": "a file, not a folder\n"}),
    Case("steps", "zero steps", "generate --out o --steps 0"),
    Case("sizes", "a height the pipeline cannot generate", "generate --out o --height 13"),
    Case("sizes", "a width the pipeline cannot generate", "generate --out o --width 40"),
    Case("steps", "seeds that are not integers", "characterize --prompts p.txt --seeds a,b --out o",
         {"p.txt": "a red circle moving right\n"}),
    Case("steps", "a sweep point that is not THETA1:THETA2", "sweep --points 4-8 --out o"),
    Case("workloads", "an unknown workload", "simulate --workload sora-720p"),
    Case("workloads", "an array size that is not RxC", f"{SIM} --array big"),
    Case("workloads", "buffers that are not three sizes", f"{SIM} --buffers 64,64"),
    Case("workloads", "a chip of no arrays", f"{SIM} --arrays 0"),
    Case("workloads", "a chip preset and --arrays together", f"{SIM} --chip iso-power --arrays 3"),
    Case("profiles", "a profile name or file that does not exist", f"{SIM} --profile no_such_profile"),
    Case("profiles", "a profile that is not JSON", f"{SIM} --profile bad.json", {"bad.json": "{"}),
    Case("profiles", "a JSON file that is not a profile", f"{SIM} --profile other.json", {"other.json": "{\"a\": 1}"}),
    Case("profiles", "both --trace and --profile", f"{SIM} --trace t.safetensors --profile example"),
    Case("traces", "a trace file that does not exist", f"{SIM} --trace missing.safetensors"),
    Case("traces", "a trace file that is not a trace", f"{SIM} --trace bad.safetensors",
         {"bad.safetensors": b"not a safetensors file"}),
    Case("devices", "a device name torch does not know", "generate --out o --device gpu"),
    Case("devices", "a GPU on a machine without one", "generate --out o --device cuda", cpu_only=True),
    Case("devices", "fp16 on the CPU", "generate --out o --dtype fp16"),
    Case("prompts", "words outside the miniature model's vocabulary",
         "generate --out o --steps 1 --warmup-steps 0 --prompt 'a red circle sliding diagonally'", exit_code=0,
         kind="warning"),
    Case("prompts", "a prompt longer than the model reads",
         f"generate --out o --steps 1 --warmup-steps 0 --prompt '{LONG}'", exit_code=0, kind="warning"),
]


def run_case(case: Case, folder: Path):
    """``(exit code, the case's line without its prefix, whole output)`` of ``case`` run in ``folder``."""
    from click.testing import CliRunner
    from huggingface_hub import constants

    from kaleido.cli.main import cli

    for name, text in case.files.items():
        p = folder / name
        if name.endswith("/"):
            p.mkdir(parents=True, exist_ok=True)
        elif isinstance(text, bytes):
            p.write_bytes(text)
        else:
            p.write_text(text)
    cwd = os.getcwd()
    offline = constants.HF_HUB_OFFLINE
    os.chdir(folder)
    constants.HF_HUB_OFFLINE = True  # what HF_HUB_OFFLINE=1 (the documented test command) sets at import
    try:
        res = CliRunner().invoke(cli, shlex.split(case.command))
    finally:
        os.chdir(cwd)
        constants.HF_HUB_OFFLINE = offline
    prefix = f"{case.kind}: "
    import torch

    # where the package is installed, and which torch, as the table writes them
    output = res.output.replace(PACKAGE, "<kaleido>").replace(torch.__version__, "<torch version>")
    lines = [ln for ln in output.splitlines() if ln.startswith(prefix)]
    return res.exit_code, (lines[0][len(prefix):] if lines else None), output


def md_cell(text: str) -> str:
    """``text`` in a Markdown table cell: pipes escaped, ``<`` as ``&lt;`` (``<unk>`` is not an HTML tag)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace("|", "\\|")


def table_messages() -> set[str]:
    """The message cells of docs/errors.md (unescaped)."""
    out = set()
    for line in ERRORS_MD.read_text().splitlines():
        cells = [c.strip() for c in line.replace("\\|", "\x00").split("|")]
        if len(cells) >= 5 and cells[-2].startswith(("Error: ", "warning: ")):
            out.add(cells[-2].replace("\x00", "|").replace("&lt;", "<").replace("&amp;", "&"))
    return out


@pytest.mark.parametrize("case", CASES, ids=[c.what for c in CASES])
def test_bad_input_gets_its_one_line(case, tmp_path):
    import torch

    if case.cpu_only and torch.cuda.is_available():
        pytest.skip("this machine has a GPU: --device cuda is not a bad input here")
    code, line, output = run_case(case, tmp_path)
    assert "Traceback" not in output, output
    assert code == case.exit_code, output
    assert line is not None, f"no '{case.kind}:' line in:\n{output}"
    assert f"{case.kind}: {line}" in table_messages(), (
        f"docs/errors.md does not list what `kaleido {case.command}` prints now:\n{case.kind}: {line}\n"
        "(regenerate it: python tests/cli/test_bad_inputs.py)")
    if case.kind == "warning":  # printed once, up front - not once per generation with a source line
        assert output.count(line) == 1, output
        assert "warnings.warn" not in output and "PromptWarning" not in output, output


def test_every_case_is_in_the_table_once():
    rows = [ln for ln in ERRORS_MD.read_text().splitlines() if ln.startswith("| ") and "`kaleido " in ln]
    assert len(rows) == len(CASES)
    for c in CASES:
        mine = [r for r in rows if r.startswith(f"| {c.topic} | {md_cell(c.what)}")]
        assert len(mine) == 1 and f"`kaleido {md_cell(c.command)}`" in mine[0], c.what


def write_table(folder: Path) -> str:
    rows = ["| topic | bad input | command | exit | the one line it prints |", "|---|---|---|---|---|"]
    for i, c in enumerate(CASES):
        d = folder / str(i)
        d.mkdir()
        code, line, output = run_case(c, d)
        if line is None or "Traceback" in output:
            raise SystemExit(f"case {c.what!r} printed no single {c.kind} line:\n{output}")
        files = "; ".join(f"{n}: {t!r}" if n[-1] != "/" else f"{n} (empty folder)" for n, t in c.files.items())
        rows.append(f"| {c.topic} | {md_cell(c.what)}{' (' + md_cell(files) + ')' if files else ''} | "
                    f"`kaleido {md_cell(c.command)}` | {code} | {md_cell(c.kind + ': ' + line)} |")
    return "\n".join(rows) + "\n"


HEADER = """# Bad inputs and what they print

Every bad input a user can give the `kaleido` command gets one line naming the problem and the fix,
and no traceback; click puts `Usage:` and `Try 'kaleido CMD --help'` above it, and the exit status
is 2. A prompt the model will not read as written is not an error: the run goes on after one
`warning:` line per problem, printed once before generating (in Python the same text is a
`kaleido.tiny.pipeline.PromptWarning`). Where the check is the library's (configs, prompt files,
models, dtypes, sizes, profiles, traces, workloads), the Python API raises `ValueError` with the same text,
without click's `Invalid value for --option:` prefix; option ranges (`--steps 0`) are click's own, and
output folders (`--out`, `--results-dir`) are checked by the command line as it is read, before anything loads.

`&lt;kaleido&gt;` stands for the installed package's folder (`python -c "import kaleido; print(kaleido.__path__[0])"`),
`&lt;torch version&gt;` for `torch.__version__` (a CPU-only build here).
This table is generated by running each command offline (`HF_HUB_OFFLINE=1`) from a folder holding
the files named in the second column; `tests/cli/test_bad_inputs.py` checks that each command still
prints exactly its line (regenerate the table with `python tests/cli/test_bad_inputs.py`).

"""


if __name__ == "__main__":
    import tempfile

    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import torch

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        ERRORS_MD.write_text(HEADER + write_table(Path(tmp)))
    print(f"wrote {ERRORS_MD}", file=sys.stderr)
