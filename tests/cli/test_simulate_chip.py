"""`kaleido simulate --chip PRESET` / `--arrays N`: the chip presets reach the library, bad combinations stop in one line."""

import json

from click.testing import CliRunner

from kaleido.cli.main import cli
from kaleido.hw.chip_presets import chip_preset


def _run(args):
    return CliRunner().invoke(cli, ["simulate", "-w", "cogvideox-2b-480p", "--steps", "1", "--json", *args])


def test_chip_preset_runs_and_reports_its_arrays():
    res = _run(["--chip", "iso-peak-int8", "--profile", "tiny_wan_default"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output[res.output.index("{"):])["cogvideox-2b-480p"]
    assert out["chip"]["arrays"] == chip_preset("iso-peak-int8").chip.arrays
    assert out["summary"]["chip"]["dram_gbps"] == 2039.0
    assert out["energy_table"]["static_w"] > 0  # a chip preset charges static power


def test_arrays_option_and_one_array_equal_the_plain_run():
    plain = json.loads(_run([]).output)["cogvideox-2b-480p"]["summary"]
    one = json.loads(_run(["--arrays", "1"]).output)["cogvideox-2b-480p"]["summary"]
    assert one["cycles"] == plain["cycles"] and one["energy_j"] == plain["energy_j"]
    four = json.loads(_run(["--arrays", "4"]).output)["cogvideox-2b-480p"]["summary"]
    assert four["cycles"]["dense_array"] < plain["cycles"]["dense_array"]


def test_chip_and_arrays_together_is_one_line_error():
    res = _run(["--chip", "iso-power", "--arrays", "3"])
    assert res.exit_code != 0
    msg = [line for line in res.output.splitlines() if "Error" in line]
    assert msg and "--chip or --arrays" in msg[0]
    res = _run(["--arrays", "0"])
    assert res.exit_code != 0 and "ChipConfig.arrays=0" in res.output
