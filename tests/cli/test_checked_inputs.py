"""Inputs refused in one line before any work: an output folder that cannot be made (every ``--out`` /
``--results-dir`` / ``--report``), a size the loaded pipeline cannot generate (every model-running
subcommand, and the library's :meth:`GenerationSettings.check_for` / the comparison's harness), and fp16 on the
CPU (:func:`kaleido.tiny.pipeline.load_pipeline`). docs/errors.md holds one example of each
(tests/cli/test_bad_inputs.py)."""

from __future__ import annotations

import os
import shlex
from types import SimpleNamespace

import pytest
import torch

from kaleido.cli._paths import FIX, folder_problem
from kaleido.generation_settings import GenerationSettings, size_rule


def _run(command: str):
    from click.testing import CliRunner

    from kaleido.cli.main import cli

    return CliRunner().invoke(cli, shlex.split(command))


def _one_error_line(res) -> str:
    assert "Traceback" not in res.output, res.output
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.startswith("Error: ")]
    assert len(lines) == 1, res.output
    return lines[0]


# -- output folders -------------------------------------------------------------------------------------------

#: every option a subcommand writes into (``kaleido compare --results`` is cli/compare.py's), with {} the folder
OUTPUTS = [
    "generate --out {}",
    "sweep --out {}",
    "characterize --prompts p.txt --out {}",
    "calibrate --out {}/c.yaml",
    "calibrate --out c.yaml --report {}/r.json",
    "calibrate --out c.yaml --results-dir {}",
    "simulate --workload hunyuan-720p --out {}",
    "train-tiny --out {}",
    "report --out {}/r.html",
]
#: a folder below a file, and one below /proc (no folder can be made there, by root either)
BAD_FOLDERS = ["f/sub"] + (["/proc/nope"] if os.path.isdir("/proc/self") else [])


@pytest.mark.parametrize("folder", BAD_FOLDERS)
@pytest.mark.parametrize("command", OUTPUTS)
def test_every_output_option_refuses_a_folder_it_cannot_make(command, folder, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "f").write_text("a file, not a folder\n")
    (tmp_path / "p.txt").write_text("a red circle moving right\n")
    res = _run(command.format(folder))
    line = _one_error_line(res)
    assert f"'{folder}'" in line and line.endswith(FIX), line  # names the folder and the fix
    assert "loading" not in res.output  # refused as the command line is read, before any model loads
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f", "p.txt"]  # and nothing was written


def test_a_folder_that_can_be_made_passes_and_is_left_as_it_was(tmp_path):
    assert folder_problem(tmp_path / "a" / "b") is None
    assert list(tmp_path.iterdir()) == []  # the check removed the folders it made
    assert folder_problem(tmp_path / "a" / "b", keep=True) is None
    assert (tmp_path / "a" / "b").is_dir()  # an output file's folder is kept: not every file writer makes it
    assert folder_problem(tmp_path) is None and list(tmp_path.iterdir()) == [tmp_path / "a"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into a read-only-mode folder")
def test_a_folder_without_write_permission_is_refused(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    try:
        assert "cannot create folder" in folder_problem(locked / "out")
        assert "cannot write into folder" in folder_problem(locked)
    finally:
        locked.chmod(0o755)


# -- sizes ----------------------------------------------------------------------------------------------------


class _Stub:
    """A pipeline's shape without its weights: ``vae_scale_factor_spatial`` and the transformer's patch size."""

    def __init__(self, vae_factor: int, patch: tuple[int, int, int]):
        self.vae_scale_factor_spatial = vae_factor
        self.transformer = SimpleNamespace(config=SimpleNamespace(patch_size=patch))

    def __call__(self, *args, **kwargs):
        raise AssertionError("a refused size must stop before the pipeline is called")


class WanPipeline(_Stub):
    """Stands in for diffusers' class of that name (:func:`size_rule` reads the class names of the MRO)."""


class TinyWanPipeline(WanPipeline):
    pass


class OtherPipeline(_Stub):
    """A pipeline with a VAE and patches but no known check_inputs rule."""


@pytest.mark.parametrize("pipe, multiple", [
    (WanPipeline(8, (1, 2, 2)), 16),  # Wan 2.1 at real scale: VAE 8 x patch 2, and check_inputs' 16
    (TinyWanPipeline(4, (1, 1, 1)), 16),  # the tiny Wan: VAE 4 x patch 1 = 4, but check_inputs asks 16
    (OtherPipeline(8, (1, 4, 4)), 32),  # no check_inputs rule known: the latent must split into whole patches
])
def test_size_rule(pipe, multiple):
    assert size_rule(pipe)[0] == multiple
    GenerationSettings(height=multiple, width=3 * multiple).check_for(pipe)
    GenerationSettings().check_for(pipe)  # None: the pipeline's own default
    with pytest.raises(ValueError, match=rf"^height {multiple + 1} is not a multiple of {multiple}, which "
                                         rf"{type(pipe).__name__} needs .*; use height {multiple} or {2 * multiple}$"):
        GenerationSettings(height=multiple + 1, width=multiple).check_for(pipe)


def test_size_refusal_names_both_sides_and_the_nearest_sizes():
    with pytest.raises(ValueError) as e:
        GenerationSettings(height=13, width=40).check_for(TinyWanPipeline(4, (1, 1, 1)))
    assert str(e.value) == ("height 13 and width 40 are not multiples of 16, which TinyWanPipeline needs for height and "
                            "width (WanPipeline.check_inputs asks 16; VAE factor 4 x patch 1 = 4); use height 16 and "
                            "width 32 or 48")


def test_a_pipeline_of_unknown_shape_is_not_checked():
    assert size_rule(SimpleNamespace()) is None
    GenerationSettings(height=13, width=40).check_for(SimpleNamespace())


def test_the_rule_agrees_with_diffusers_check_inputs():
    """Every size diffusers' WanPipeline.check_inputs refuses, check_for refuses (and the tiny pipeline's
    patches add nothing beyond it)."""
    import diffusers

    pipe = TinyWanPipeline(4, (1, 1, 1))
    pipe.config = SimpleNamespace(boundary_ratio=None)  # what check_inputs reads of a Wan 2.1 pipeline
    for h in range(8, 80):
        try:
            diffusers.WanPipeline.check_inputs(pipe, "a prompt", None, h, 64)
            theirs = True
        except ValueError:
            theirs = False
        try:
            GenerationSettings(height=h, width=64).check_for(pipe)
            ours = True
        except ValueError:
            ours = False
        assert ours == theirs, h


def test_the_comparison_harness_refuses_a_size_before_generating():
    from kaleido.evaluation.harness import run_against_dense

    method = SimpleNamespace(name="m", settings_dict=dict, apply=lambda t: pytest.fail("applied"))
    with pytest.raises(ValueError, match="^width 40 is not a multiple of 16"):
        run_against_dense(TinyWanPipeline(4, (1, 1, 1)), {"height": 64, "width": 40}, method, "a prompt", 0)


@pytest.mark.parametrize("command, hint", [
    ("generate --out o --height 13 --width 40", "--height/--width"),
    ("sweep --out o --width 40", "--width"),
    ("characterize --prompts p.txt --out o --height 24", "--height"),
    ("calibrate --out c.yaml --height 8", "--height"),
])
def test_every_model_subcommand_refuses_a_size_in_one_line(command, hint, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    (tmp_path / "p.txt").write_text("a red circle moving right\n")
    line = _one_error_line(_run(command))
    assert line.startswith(f"Error: Invalid value for {hint}: ") and " of 16, which TinyWanPipeline needs" in line
    assert "; use " in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.txt"]  # nothing generated or written


# -- dtypes ---------------------------------------------------------------------------------------------------


def test_fp16_on_the_cpu_is_refused_before_loading(monkeypatch):
    from kaleido.tiny import pipeline

    monkeypatch.setattr(pipeline, "resolve_model", lambda m: pytest.fail("the model was looked up"))
    for dtype in ("fp16", torch.float16):
        with pytest.raises(ValueError, match=r"^dtype fp16 is not supported on the CPU \(.*\); use bf16 or fp32"):
            pipeline.load_pipeline("tiny", device="cpu", dtype=dtype)
    assert pipeline.check_dtype("cpu", "bf16") is torch.bfloat16
    assert pipeline.check_dtype(torch.device("cpu"), torch.float32) is torch.float32
    assert pipeline.check_dtype("cuda:0", "fp16") is torch.float16  # a GPU runs fp16 (its presence is check_device's)


def test_fp16_on_the_cpu_is_refused_by_every_model_subcommand(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.txt").write_text("a red circle moving right\n")
    for command in ("generate --out o", "sweep --out o", "characterize --prompts p.txt --out o", "calibrate --out c.yaml"):
        line = _one_error_line(_run(f"{command} --dtype fp16"))
        assert line.startswith("Error: Invalid value for --dtype: dtype fp16 is not supported on the CPU"), line
