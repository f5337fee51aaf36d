"""An unavailable device is refused in one line, by the library loaders and by every model-running subcommand."""

import pytest
import torch
from click.testing import CliRunner

from kaleido.device import check_device

NO_GPU = not torch.cuda.is_available()


def test_cpu_is_accepted():
    assert check_device("cpu") == torch.device("cpu")
    assert check_device(torch.device("cpu")) == torch.device("cpu")


@pytest.mark.skipif(not NO_GPU, reason="this machine has a CUDA GPU")
@pytest.mark.parametrize("device", ["cuda", "cuda:3", "mps", "xpu"])
def test_an_absent_device_names_the_problem_and_the_fix(device):
    with pytest.raises(ValueError) as e:
        check_device(device)
    msg = str(e.value)
    assert f"device {device!r}" in msg and "use 'cpu'" in msg and "\n" not in msg


@pytest.mark.parametrize("device", ["gpu", "cuda:x", "CUDA", "meta"])
def test_a_name_that_is_no_usable_device(device):
    with pytest.raises(ValueError, match="'cpu', 'cuda', 'cuda:N' or 'mps'"):
        check_device(device)


class FakeCudaBuild:
    """What a CUDA build of torch reports, with ``n`` GPUs visible (the GPU branch, checked on this CPU machine)."""

    def __init__(self, monkeypatch, n: int):
        monkeypatch.setattr(torch.version, "cuda", "12.4")
        monkeypatch.setattr(torch.cuda, "is_available", lambda: n > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: n)


def test_gpu_index_past_the_last_device_is_refused(monkeypatch):
    FakeCudaBuild(monkeypatch, 1)
    assert check_device("cuda") == torch.device("cuda")
    assert check_device("cuda:0") == torch.device("cuda:0")
    with pytest.raises(ValueError, match=r"'cuda:3': this machine has 1 CUDA device\(s\), cuda:0 to cuda:0"):
        check_device("cuda:3")


def test_cuda_build_without_a_visible_gpu(monkeypatch):
    FakeCudaBuild(monkeypatch, 0)
    with pytest.raises(ValueError, match="sees no GPU.*CUDA_VISIBLE_DEVICES"):
        check_device("cuda")


@pytest.mark.skipif(not NO_GPU, reason="this machine has a CUDA GPU")
def test_library_loaders_refuse_before_loading():
    from kaleido.tiny.pipeline import load_pipeline
    from kaleido.tiny.pipeline import load_pipeline

    with pytest.raises(ValueError, match="CPU-only build"):
        load_pipeline("tiny", device="cuda")
    with pytest.raises(ValueError, match="'cuda:3'"):
        load_pipeline("someone/not-a-model", device="cuda:3")  # refused before any hub lookup


def _model_running_commands():
    from kaleido.cli.main import cli

    ctx = cli.make_context("kaleido", ["--help"], resilient_parsing=True)
    for name in cli.list_commands(ctx):
        cmd = cli.get_command(ctx, name)
        if any(p.name == "device" for p in cmd.params):
            yield name


def test_every_model_running_subcommand_takes_device():
    assert {"generate", "sweep", "calibrate", "characterize"} <= set(_model_running_commands())


@pytest.mark.skipif(not NO_GPU, reason="this machine has a CUDA GPU")
@pytest.mark.parametrize("name", list(_model_running_commands()))
@pytest.mark.parametrize("device", ["cuda", "cuda:3", "mps"])
def test_subcommand_refuses_an_absent_device_in_one_line(name, device):
    from kaleido.cli.main import cli

    res = CliRunner().invoke(cli, [name, "--device", device])
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    errors = [ln for ln in res.output.splitlines() if ln.startswith("Error:")]
    assert len(errors) == 1 and "Traceback" not in res.output
    assert f"device {device!r}" in errors[0] and "'cpu'" in errors[0]
