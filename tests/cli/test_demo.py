import json

from click.testing import CliRunner

from kaleido.cli.main import cli


def test_demo_json_reports_savings_and_error():
    res = CliRunner().invoke(cli, ["demo", "--json", "--seed", "1"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    ops = d["qk_ops"]
    assert ops["dense_macs"] == 2 * 1024 * 1024 * 64
    assert sum(ops["mac8"]) + sum(ops["mac_low"]) + sum(ops["skipped"]) == ops["dense_macs"]
    assert 0.0 < ops["saved_fraction"] < 1.0  # the example does reuse, and not everything
    for f in d["mode_fractions"].values():
        assert abs(f["compute"] + f["partial"] + f["full"] - 1.0) < 1e-9
    assert 0.0 < d["relative_error"] < 0.05


def test_demo_dense_thresholds_have_no_error_and_table_output():
    res = CliRunner().invoke(cli, ["demo", "--theta1", "0", "--theta2", "0"])
    assert res.exit_code == 0, res.output
    assert "COMPUTE" in res.output and "8-bit-equivalent saving 0.0%" in res.output
    assert "max abs error 0," in res.output


def test_demo_rejects_bad_thresholds():
    res = CliRunner().invoke(cli, ["demo", "--theta1", "5", "--theta2", "3"])
    assert res.exit_code != 0
    assert "theta1=5.0 > theta2=3.0" in res.output
    res = CliRunner().invoke(cli, ["demo", "--theta2", "20", "--low-bits", "4"])
    assert res.exit_code != 0 and "2**(low_bits-1)=8" in res.output
