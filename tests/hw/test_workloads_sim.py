"""Workload shapes, the whole-run simulation, the A100 model, energy table, and the CLI."""

import json

import pytest
from click.testing import CliRunner

from kaleido.hw.arch.config import ArrayConfig
from kaleido.hw.arch.energy import EnergyTable
from kaleido.hw.arch.gpu import A100Config, a100_gemm
from kaleido.hw.inputs.profile import Profile
from kaleido.hw.designs.kaleido import simulate
from kaleido.hw.inputs.workloads import Gemm, get_workload


def example():
    from importlib.resources import files

    return Profile.load(files("kaleido") / "assets" / "profiles" / "synthetic_correlated.json")


@pytest.mark.parametrize("name, grid", [
    ("hunyuan-720p", (33, 45, 80)), ("wan-1.3b-480p", (21, 30, 52)), ("wan-14b-720p", (21, 45, 80)),
    ("cogvideox-5b-480p", (13, 30, 45)), ("hunyuan-480p", (33, 30, 53)),
])
def test_token_grids_from_published_settings(name, grid):
    assert get_workload(name).grid_thw == grid


def test_wan_macs_per_forward():
    wl = get_workload("wan-1.3b-480p", steps=1)
    n, d = 32760, 1536
    qk = next(g for g in wl.gemms if g.op == "self_attn_qk")
    assert (qk.M, qk.K, qk.N, qk.count) == (n, 128, n, 12 * 30 * 2)  # heads x layers x CFG passes
    ffn = next(g for g in wl.gemms if g.op == "ffn_up")
    assert (ffn.M, ffn.K, ffn.N) == (n, d, 8960)
    kv = next(g for g in wl.gemms if g.op == "cross_proj_kv")
    assert kv.M == 512 and kv.grid_rows == 0


def test_joint_attention_text_rows_never_reuse():
    wl = get_workload("cogvideox-5b-480p", steps=1)
    qk = next(g for g in wl.gemms if g.op == "self_attn_qk")
    assert qk.M == 17550 + 226 and qk.grid_rows == 17550


def test_unknown_workload_and_bad_steps():
    with pytest.raises(ValueError, match="unknown workload 'sora-720p'"):
        get_workload("sora-720p")
    with pytest.raises(ValueError, match="resolution"):
        get_workload("hunyuan-1080p")
    with pytest.raises(ValueError, match="steps"):
        get_workload("hunyuan-720p", steps=0)
    with pytest.raises(ValueError, match="op kind"):
        Gemm("attn_magic", 1, 1, 1, 1, 0)


def test_a100_roofline():
    g = Gemm("proj_q", 4096, 4096, 4096, 3, 4096)
    t, e = a100_gemm(g, A100Config())
    assert t == pytest.approx(3 * 2 * 4096**3 / (312e12 * 0.73))
    assert e == pytest.approx(400 * t)
    thin = Gemm("proj_q", 4096, 16, 16, 1, 4096)  # memory bound
    t, _ = a100_gemm(thin, A100Config())
    assert t == pytest.approx((4096 * 16 + 16 * 16 + 4096 * 16) * 2 / 2039e9)
    with pytest.raises(ValueError, match="precision"):
        A100Config(precision="fp8")


def test_energy_table_cites_every_entry():
    t = EnergyTable()
    for e in t.entries.values():
        assert e.source and e.scaling and e.value_pj > 0 and e.node_nm in (0, 22, 45)
    assert t.mac_pj(4) < t.mac_pj(8)
    assert t.sram_pj_per_byte(64) < t.sram_pj_per_byte(256) < t.sram_pj_per_byte(1024)
    with pytest.raises(ValueError, match="no entry"):
        t.pj("flux_capacitor")


@pytest.mark.parametrize("flow", ["ws", "os"])
def test_whole_run_invariants(flow):
    wl = get_workload("cogvideox-2b-480p", steps=2)
    cfg = ArrayConfig(dataflow=flow)
    r = simulate(wl, example(), cfg, transfer=True)
    d = simulate(wl, None, cfg)
    s, sd = r.summary(), d.summary()
    json.dumps(r.to_dict(), default=float)
    assert sd["time_s"]["kaleido"] == sd["time_s"]["dense_array"]  # no profile: no reuse
    assert s["time_s"]["dense_array"] == pytest.approx(sd["time_s"]["dense_array"])
    assert s["time_s"]["kaleido"] <= s["time_s"]["dense_array"]
    assert s["energy_j"]["kaleido"] < s["energy_j"]["dense_array"]
    for lv, u in s["utilisation"].items():
        assert 0 < u <= 1, lv
    pes = 128 * 128
    for lv in ("none", "scheduler", "scheduler+matcher"):
        assert s["cycles"][f"kaleido[{lv}]"] * pes >= sum(g.work_pe_cycles for g in r.gemms) - 1
    assert s["macs"]["mac8"] + s["macs"]["mac_low"] + s["macs"]["skipped"] == pytest.approx(s["macs"]["dense"])
    assert any("carried" in n for n in r.notes)


def test_profile_low_bits_must_match_array():
    with pytest.raises(ValueError, match="low_bits"):
        simulate(get_workload("cogvideox-2b-480p", steps=1), example(), ArrayConfig(low_bits=3), transfer=True)


def test_narrower_partial_runs_on_a_wider_array_multiplier():
    wl = get_workload("cogvideox-2b-480p", steps=1)
    r4 = simulate(wl, example(), ArrayConfig(low_bits=4), transfer=True).summary()
    r6 = simulate(wl, example(), ArrayConfig(low_bits=6), transfer=True).summary()
    # same decisions; a wider PARTIAL multiplier costs more energy (and loses the packed mode)
    assert r6["macs"] == r4["macs"]
    assert r6["energy_j"]["kaleido"] > r4["energy_j"]["kaleido"]


def test_cli_runs_the_shipped_measured_profile():
    from click.testing import CliRunner

    from kaleido.cli.simulate import simulate as simulate_cmd

    res = CliRunner().invoke(simulate_cmd, ["-w", "wan-1.3b-480p", "--profile", "tiny_wan_default", "--transfer", "--steps", "1"])
    assert res.exit_code == 0, res.output
    assert "PARTIAL widths [6, 7]" in res.output.replace("\n", " ")
    bad = CliRunner().invoke(simulate_cmd, ["-w", "wan-1.3b-480p", "--profile", "no_such_profile"])
    assert bad.exit_code != 0 and "tiny_wan_default" in bad.output


def test_profile_of_other_model_needs_transfer():
    with pytest.raises(ValueError, match="--transfer"):
        simulate(get_workload("cogvideox-2b-480p", steps=1), example())


def test_cli_table_json_and_files(tmp_path):
    from kaleido.cli.main import cli

    runner = CliRunner()
    res = runner.invoke(cli, ["simulate", "-w", "cogvideox-2b-480p,cogvideox-2b-720p", "--steps", "2",
                              "--profile", "example", "--transfer", "--json", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert set(data) == {"cogvideox-2b-480p", "cogvideox-2b-720p"}
    assert data["cogvideox-2b-480p"]["summary"]["speedup"]["vs_dense_array"] > 1
    for f in ("result.json", "summary.csv", "per_op.csv", "speedup_per_workload.png", "utilisation.png",
              "trend_480p_720p.png"):
        assert (tmp_path / f).stat().st_size > 0
    res = runner.invoke(cli, ["simulate", "-w", "cogvideox-2b-480p", "--steps", "1", "--profile", "example", "--transfer"])
    assert res.exit_code == 0 and "PE utilisation" in res.output and "SYNTHETIC" in res.output


@pytest.mark.parametrize("args, match", [
    (["-w", "sora-720p"], "unknown workload"),
    (["-w", "hunyuan-720p", "--array", "0x128"], "rows=0"),
    (["-w", "hunyuan-720p", "--array", "big"], "RxC"),
    (["-w", "hunyuan-720p", "--buffers", "0,1,1"], "ifmap_kib=0"),
    (["-w", "hunyuan-720p", "--array", "1024x1024", "--buffers", "1,1,1"], "cannot hold"),
    (["-w", "hunyuan-720p", "--buffers", "64,64"], "three KiB sizes"),
    (["-w", "hunyuan-720p", "--dram-gbps", "0"], "dram_gbps"),
    (["-w", "hunyuan-720p", "--profile", "/nonexistent.json"], "does not exist"),
    (["-w", "hunyuan-720p", "--trace", "/nonexistent.safetensors"], "does not exist"),
])
def test_cli_bad_input(args, match):
    from kaleido.cli.main import cli

    res = CliRunner().invoke(cli, ["simulate", *args])
    assert res.exit_code == 2 and match in res.output, res.output


def test_design_registry_dense_and_a100():
    # the dense array and the A100 are registered designs; their counts priced by their tables give the whole-run
    # simulation's dense and A100 figures
    from kaleido.hw.designs import DESIGNS, evaluate, get_design, register_design

    wl = get_workload("cogvideox-2b-480p", steps=1)
    assert {"dense", "a100"} <= set(DESIGNS)
    s = simulate(wl, None).summary()
    dense, a100 = evaluate(get_design("dense"), wl), evaluate(get_design("a100"), wl)
    assert dense.counts.time_s == pytest.approx(s["time_s"]["dense_array"], rel=1e-12)
    assert dense.energy_j == pytest.approx(s["energy_j"]["dense_array"], rel=1e-12)
    assert a100.counts.time_s == pytest.approx(s["time_s"]["a100"], rel=1e-12)
    assert a100.energy_j == pytest.approx(s["energy_j"]["a100"], rel=1e-12)
    with pytest.raises(ValueError, match="unknown design"):
        get_design("sora")
    with pytest.raises(ValueError, match="already registered"):
        register_design(get_design("a100"))