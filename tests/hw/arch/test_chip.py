"""The multi-array chip (kaleido.hw.arch.chip): one array is today's model exactly; invariants as properties."""

from importlib.resources import files

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kaleido.hw.arch.chip import ChipConfig, split_gemm
from kaleido.hw.chip_presets import PRESETS, STATIC_FRACTION, chip_preset
from kaleido.hw.arch.config import ArrayConfig, BufferConfig
from kaleido.hw.arch.dispatcher import LEVELS
from kaleido.hw.arch.energy import EnergyTable
from kaleido.hw.inputs.profile import Profile
from kaleido.hw.outputs.requirements import first_reaching, measured_fractions, uniform_profile
from kaleido.hw.designs.kaleido import DESIGN_LEVEL, simulate
from kaleido.hw.inputs.workloads import Gemm, get_workload, workload_names

MEASURED = Profile.load(files("kaleido") / "assets" / "profiles" / "tiny_wan_default.json")
SYNTH = Profile.load(files("kaleido") / "assets" / "profiles" / "synthetic_correlated.json")


def _numbers(d, prefix=""):
    """Every number in a nested summary dict, by path (strings such as the normalisation text left out)."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_numbers(v, f"{prefix}{k}/"))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out[prefix + k] = v
    return out


@pytest.mark.parametrize("name", workload_names())
def test_one_array_chip_is_the_single_array_on_every_workload(name):
    wl = get_workload(name, steps=3)
    for prof, cfg in ((MEASURED, ArrayConfig(low_bits=7)), (None, ArrayConfig(dataflow="os"))):
        one = simulate(wl, prof, cfg, transfer=True)
        chip = simulate(wl, prof, transfer=True, chip=ChipConfig(1, cfg))
        a, b = one.summary(), chip.summary()
        assert "chip" in b and "chip" not in a
        b.pop("chip")
        assert _numbers(a) == _numbers(b)  # exactly, not approximately
        assert [g.kaleido_cycles for g in one.gemms] == [g.kaleido_cycles for g in chip.gemms]
        assert [g.dram_bytes for g in one.gemms] == [g.dram_bytes for g in chip.gemms]


def test_one_array_chip_is_exact_with_the_synthetic_profile_and_per_step_statistics():
    wl = get_workload("wan-1.3b-480p", steps=4)
    one = simulate(wl, SYNTH, ArrayConfig(), transfer=True)
    chip = simulate(wl, SYNTH, transfer=True, chip=ChipConfig(1, ArrayConfig()))
    b = chip.summary()
    b.pop("chip")
    assert _numbers(one.summary()) == _numbers(b)


def test_split_charges_ceil_imbalance_and_idle_arrays():
    cfg = ArrayConfig()
    # 12 column folds on 5 arrays: the busiest gets 3, the partial last fold on an array with 2
    g = Gemm("ffn_up", 1000, 256, 11 * 128 + 40, 1, 1000)
    s = split_gemm(g, 12, ChipConfig(5, cfg))
    assert s.kind == "columns" and sum(p.arrays for p in s.parts) == 5
    assert max(p.N for p in s.parts) == 3 * 128 and sum(p.N * p.arrays for p in s.parts) == g.N
    # more arrays than column folds: the rest idle
    s = split_gemm(g, 12, ChipConfig(40, cfg))
    assert sum(p.arrays for p in s.parts) == 12
    # 12 heads on 5 arrays: 3 rounds for the busiest (uneven heads)
    qk = Gemm("self_attn_qk", 2000, 128, 2000, 12, 2000)
    s = split_gemm(qk, 12, ChipConfig(5, cfg))
    assert s.kind == "heads" and max(p.rounds for p in s.parts) == 3
    assert sum(p.arrays * p.rounds for p in s.parts) == 12


def test_pv_k_split_pays_a_reduction_and_qk_key_split_none():
    cfg = ArrayConfig()
    chip = ChipConfig(48, cfg)
    pv = Gemm("self_attn_pv", 4096, 4096, 128, 12, 4096)
    s = split_gemm(pv, 12, chip)
    assert s.kind == "heads+k-split" and s.reduction_psums > 0 and s.reduction_cycles > 0
    qk = Gemm("self_attn_qk", 4096, 128, 4096, 12, 4096)
    s = split_gemm(qk, 12, chip)
    assert s.kind == "heads+key-columns" and s.reduction_psums == 0
    # P.V with reuse statistics is not split by keys
    assert split_gemm(pv, 12, chip, key_split=False).kind == "heads"
    wl = get_workload("wan-1.3b-480p", steps=1)
    r = simulate(wl, None, chip=chip)
    e = r.energy_pj(DESIGN_LEVEL)
    assert e["chip_reduction"] > 0


def test_shared_dram_bounds_each_gemm():
    wl = get_workload("wan-1.3b-480p", steps=1)
    slow = simulate(wl, None, chip=ChipConfig(16, ArrayConfig(), dram_gbps=10.0))
    bw = 10.0e9
    assert slow.time_s("dense") >= sum(g.dram_bytes for g in slow.gemms) / bw * (1 - 1e-12)
    fast = simulate(wl, None, chip=ChipConfig(16, ArrayConfig(), dram_gbps=1e6))
    assert fast.time_s("dense") < slow.time_s("dense")


def test_multicast_moves_activations_once():
    wl = get_workload("wan-1.3b-480p", steps=1)
    on = simulate(wl, None, chip=ChipConfig(8, ArrayConfig(), dram_gbps=2039.0))
    off = simulate(wl, None, chip=ChipConfig(8, ArrayConfig(), dram_gbps=2039.0, multicast=False))
    lin = [(a.dram_bytes, b.dram_bytes) for a, b in zip(on.gemms, off.gemms) if a.op == "ffn_up"]
    assert lin and all(x < y for x, y in lin)


UNLIMITED = BufferConfig(dram_gbps=999_999.0)


@settings(max_examples=12, deadline=None)
@given(name=st.sampled_from(["cogvideox-2b-480p", "wan-1.3b-480p", "turbodiffusion-1.3b-480p", "hunyuan-480p"]),
       n=st.integers(2, 200), full=st.floats(0.0, 0.9), partial=st.floats(0.0, 0.1),
       scope=st.sampled_from(["all", "attention"]), flow=st.sampled_from(["ws", "os"]))
def test_chip_invariants(name, n, full, partial, scope, flow):
    wl = get_workload(name, steps=1)
    cfg = ArrayConfig(dataflow=flow, buffers=UNLIMITED)
    prof = uniform_profile(wl, full, partial, scope)
    one = simulate(wl, prof, chip=ChipConfig(1, cfg))
    many = simulate(wl, prof, chip=ChipConfig(n, cfg))
    # more arrays are never slower than one at unlimited bandwidth, at every level and dense
    assert many.cycles("dense") <= one.cycles("dense")
    for lv in LEVELS:
        assert many.cycles(lv) <= one.cycles(lv)
    assert many.time_s(DESIGN_LEVEL) <= one.time_s(DESIGN_LEVEL)
    # utilisation of the chip's PEs never exceeds 1
    for lv in ("dense", *LEVELS):
        assert 0.0 <= many.utilisation(lv) <= 1.0 + 1e-12
    # the chip never uses less energy than the single array's MACs
    mac_one = one.energy_pj(DESIGN_LEVEL)["mac"]
    assert sum(many.energy_pj(DESIGN_LEVEL).values()) >= mac_one
    assert many.energy_pj(DESIGN_LEVEL)["mac"] == pytest.approx(mac_one, rel=1e-9)  # MACs are partitioned, not copied


def test_presets_match_the_a100_on_their_terms():
    peak = ArrayConfig().peak_ops_per_s
    p8, p16 = chip_preset("iso-peak-int8"), chip_preset("iso-peak-bf16")
    assert abs(p8.chip.peak_ops_per_s - 624e12) <= peak / 2
    assert abs(p16.chip.peak_ops_per_s - 312e12) <= peak / 2
    for name in PRESETS:
        p = chip_preset(name)
        assert p.chip.bandwidth_gbps == 2039.0
        assert p.energy.static_w == pytest.approx(STATIC_FRACTION * p.array_dynamic_w)
    pw = chip_preset("iso-power")
    n = pw.chip.arrays
    per = pw.array_dynamic_w + pw.array_static_w
    assert pw.dram_interface_w + n * per <= 400.0 < pw.dram_interface_w + (n + 1) * per
    assert chip_preset("iso-memory").chip.arrays * ArrayConfig().buffers.dram_gbps <= 2039.0
    # more static power, fewer arrays in 400 W
    assert chip_preset("iso-power", static_w_per_array=2 * pw.array_static_w).chip.arrays < n


def test_chip_rejects_bad_input_in_one_line():
    for bad in (0, -3, 2.5, True, 10_000):
        with pytest.raises(ValueError, match="ChipConfig.arrays") as e:
            ChipConfig(bad)
        assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="dram_gbps"):
        ChipConfig(2, dram_gbps=0.0)
    with pytest.raises(ValueError, match="not one of"):
        chip_preset("iso-area")
    with pytest.raises(ValueError, match="cfg and chip.array differ"):
        simulate(get_workload("wan-1.3b-480p", steps=1), None, ArrayConfig(dataflow="os"), chip=ChipConfig(2))
    with pytest.raises(ValueError, match="full"):
        uniform_profile(get_workload("wan-1.3b-480p", steps=1), 1.5)


def test_first_reaching_interpolates_and_says_unreachable():
    x = [0.0, 0.25, 0.5, 0.75, 1.0]
    r = first_reaching(x, [1.0 + v for v in x], 1.6)
    assert r.share == pytest.approx(0.6)
    assert first_reaching(x, [1.0 + v for v in x], 3.0).share is None
    assert "unreachable" in first_reaching(x, [1.0 + v for v in x], 3.0).label()
    assert first_reaching(x, [1.0 + v for v in x], 0.5).share == 0.0
    assert first_reaching(x, [1.0, 2.0, 1.0, 1.0, 1.0], 1.5).share == pytest.approx(0.125)  # first crossing
    with pytest.raises(ValueError, match="increasing"):
        first_reaching([0.5, 0.1], [1, 2], 1.0)


def test_measured_fractions_weight_by_macs():
    wl = get_workload("wan-1.3b-480p", steps=1)
    m = measured_fractions(MEASURED, wl, "attention")
    assert 0.0 < m["full"] < 1.0 and 0.0 <= m["partial"] < 1.0
    full = measured_fractions(uniform_profile(wl, 0.5, 0.0, "attention"), wl, "attention")["full"]
    assert 0.4 < full < 0.5  # rows without a reference and text rows compute
