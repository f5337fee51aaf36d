"""``kaleido simulate`` from any trace: Kaleido's statistics or a baseline's recorded decisions, through one door.

A baseline's trace (or its profile file) is replayed by that baseline's design; the figures must equal what the
comparison's accelerator table (``kaleido.report.accel.design_table``) computes for the same recorded decisions -
a second code path (the table prices every design of the registry, with its own dense reference).
"""

import json

import pytest
import torch
from click.testing import CliRunner

from kaleido.cli.main import cli
from kaleido.evaluation.simulator_profiles import simulator_profile_extras
from kaleido.hw.inputs.baseline_profile import BaselineProfile
from kaleido.hw.inputs.from_trace import load_stats, stats_from_trace
from kaleido.hw.inputs.profile import Profile
from kaleido.report.accel import design_table

WL = "turbodiffusion-1.3b-480p"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """``{method: (trace, file)}``: Cambricon-D's and Kaleido's traces of one generation on the random pipeline."""
    from kaleido.compare.pipelines import load_pipeline
    from kaleido.techniques import make_method

    pipe, call = load_pipeline("random-wan")
    call = dict(call, max_sequence_length=16, num_inference_steps=3)
    out = {}
    d = tmp_path_factory.mktemp("traces")
    for method in ("cambricon_d", "kaleido"):
        h = make_method(method).apply(pipe.transformer)
        try:
            pipe(prompt="a red ball", generator=torch.Generator().manual_seed(0), output_type="np", **call)
            trace = h.simulator_traces()["accel" if method != "kaleido" else "kaleido"]
        finally:
            h.remove()
        out[method] = (trace, trace.save(d / f"{method}.safetensors"))
    return out


def _json(output: str) -> dict:
    return json.loads(output[output.index("{"):])


def test_one_door_gives_each_trace_its_own_kind_of_statistics(recorded):
    assert isinstance(stats_from_trace(recorded["kaleido"][0])[0], Profile)
    prof, _ = stats_from_trace(recorded["cambricon_d"][0])
    assert isinstance(prof, BaselineProfile) and prof.method == "cambricon_d"


def test_a_baseline_trace_costs_what_the_accelerator_table_shows(recorded, tmp_path):
    trace, path = recorded["cambricon_d"]
    res = CliRunner().invoke(cli, ["simulate", "-w", WL, "--trace", str(path), "--json"])
    assert res.exit_code == 0, res.output
    got = _json(res.output)[WL]
    row = {"point": {"settings": {}}, "quality": {"psnr": 30.0}, "report": {"extra": simulator_profile_extras({"accel": trace})}}
    table = next(d for d in design_table(None, {"cambricon_d": row}, WL)["designs"] if d["method"] == "cambricon_d")
    assert table["replayed"] and got["design"] == table["design"]
    assert got["cycles"] == table["cycles"] and got["speedup_vs_dense"] == pytest.approx(table["speedup_vs_dense"], 1e-12)
    assert got["utilisation"] == pytest.approx(table["utilisation"], 1e-12)
    assert got["upper_bound_speedup_vs_dense"] == pytest.approx(table["upper_bound_speedup_vs_dense"], 1e-12)
    assert got["energy_pj"]["mac"] * 1e-12 == pytest.approx(table["mac_energy_j"], 1e-12)
    assert 1.0 < got["speedup_vs_dense"] <= got["upper_bound_speedup_vs_dense"]  # it skips work, and pays for it
    # the same decisions saved as a profile file (what a comparison row keeps) give the same figures
    f = tmp_path / "cambricon.json"
    f.write_text(json.dumps(row["report"]["extra"]["accel_profile"]))
    again = CliRunner().invoke(cli, ["simulate", "-w", WL, "--profile", str(f), "--json"])
    assert again.exit_code == 0, again.output
    assert _json(again.output)[WL]["cycles"] == got["cycles"]
    assert isinstance(load_stats(f), BaselineProfile)


def test_a_baseline_trace_prints_its_table_and_writes_its_result(recorded, tmp_path):
    res = CliRunner().invoke(cli, ["simulate", "-w", WL, "--trace", str(recorded["cambricon_d"][1]), "--out",
                                   str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())  # rich wraps a title to the terminal
    assert "replayed from a recorded cambricon_d trace" in text and "speedup vs dense array" in text
    assert "recorded decisions measured on" in text  # the carry to the workload's grid, said once
    assert json.loads((tmp_path / "o" / "result.json").read_text())[WL]["method"] == "cambricon_d"


def test_a_kaleido_trace_still_runs_kaleido(recorded):
    res = CliRunner().invoke(cli, ["simulate", "-w", WL, "--trace", str(recorded["kaleido"][1]), "--json"])
    assert res.exit_code == 0, res.output
    assert "kaleido" in _json(res.output)[WL]["summary"]["time_s"]


def test_what_a_baseline_cannot_do_and_files_of_no_known_kind_get_one_line(recorded, tmp_path):
    res = CliRunner().invoke(cli, ["simulate", "-w", WL, "--trace", str(recorded["cambricon_d"][1]), "--chip",
                                   "iso-power"])
    assert res.exit_code == 2 and "a cambricon_d trace is replayed on one array: drop --chip / --arrays" in res.output
    res = CliRunner().invoke(cli, ["simulate", "-w", WL, "--trace", str(recorded["cambricon_d"][1]), "--anchor-pricing",
                                   "register"])  # a Kaleido-only option is refused, not silently ignored
    assert res.exit_code == 2 and "--anchor-pricing: Kaleido's design only; a cambricon_d trace is replayed" in " ".join(res.output.split())
    f = tmp_path / "other.json"
    f.write_text(json.dumps({"format": "something-else", "version": 1}))
    res = CliRunner().invoke(cli, ["simulate", "-w", WL, "--profile", str(f)])
    assert res.exit_code == 2 and "Traceback" not in res.output
    line = " ".join(res.output.split())
    assert "is neither a Kaleido profile nor a baseline profile" in line and "'kaleido-baseline-profile'" in line
