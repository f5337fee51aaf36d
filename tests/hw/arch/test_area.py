"""Area at 16 nm and the iso-area comparison: hand-worked figures and invariants."""

import json
import math
from importlib.resources import files

import pytest

from kaleido.hw.arch.area import (SYNTHESIS_FILE, SynthesisFigures, TRANSISTORS_PER_MM2_16NM, chip_area, dense_array_area,
                             iso_area_pes, kaleido_array_area, logic_mm2, pointer_list_kib, psum_bits, sram_mm2,
                             synthesis_figures)
from kaleido.hw.arch.chip import ChipConfig
from kaleido.hw.arch.config import ArrayConfig
from kaleido.hw.inputs.profile import Profile
from kaleido.hw.designs.kaleido import iso_area_shapes, simulate as _simulate
from kaleido.hw.inputs.workloads import get_workload

BUFFERS = (1536, 1536, 512)
CFG7 = ArrayConfig(low_bits=7)  # the measured profile's widest PARTIAL difference


def simulate(wl, prof, **kw):
    return _simulate(wl, prof, CFG7, transfer=True, **kw)


def _figures(dense=5000.0, kaleido=8000.0, dispatcher=70000.0) -> SynthesisFigures:
    return SynthesisFigures(24, dense, {lb: kaleido for lb in range(1, 8)}, dispatcher, 64, {})


def test_logic_density_and_pointer_list_by_hand():
    assert logic_mm2(TRANSISTORS_PER_MM2_16NM) == pytest.approx(1.0)
    # 6144 tokens, 13-bit pointers: 6144 * 13 / 8 bytes = 9984 B = 9.75 KiB
    assert pointer_list_kib(6144) == pytest.approx(9.75)
    assert pointer_list_kib(1) == 0.0
    # CACTI points are returned exactly (times the 22 -> 16 nm bit-cell ratio 0.070 / 0.092)
    assert sram_mm2(1024) == pytest.approx(1.07861 * 0.070 / 0.092)
    assert sram_mm2(512) < sram_mm2(1024) < sram_mm2(2048)


def test_shipped_figures_load_and_kaleido_pe_costs_more():
    fig = synthesis_figures()
    assert fig.acc_bits == 17 + math.ceil(math.log2(ArrayConfig().rows))
    assert sorted(fig.kaleido_pe_by_low_bits) == list(range(1, 8))
    for lb in range(1, 8):
        assert fig.kaleido_pe_transistors(lb) > fig.dense_pe_transistors > 0
        assert 0 < fig.pe_overhead(lb) < 2
    assert fig.dispatcher_window_tokens == 64
    with pytest.raises(ValueError, match="no synthesised Kaleido PE for 8-bit"):
        fig.kaleido_pe_transistors(8)


def test_bad_figures_file_is_one_line(tmp_path):
    with pytest.raises(ValueError, match="no synthesis figures; write them with `python benchmarks/rtl_area.py`"):
        synthesis_figures(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"acc_bits": 24}))
    with pytest.raises(ValueError, match="not a synthesis-figures file .*rewrite it"):
        synthesis_figures(bad)


def test_chip_areas_add_up():
    fig = _figures()
    d = dense_array_area(100, BUFFERS, fig)
    k = kaleido_array_area(100, BUFFERS, fig, 1024.0, 6144, 4)
    assert d.pe_array_mm2 == pytest.approx(100 * 5000 / TRANSISTORS_PER_MM2_16NM)
    assert k.pe_array_mm2 == pytest.approx(100 * 8000 / TRANSISTORS_PER_MM2_16NM)
    assert k.dispatcher_mm2 == pytest.approx(logic_mm2(70000) + sram_mm2(9.75))
    assert k.anchor_store_mm2 == pytest.approx(sram_mm2(1024))
    assert k.buffers_mm2 == d.buffers_mm2 == pytest.approx(sum(sram_mm2(b) for b in BUFFERS))
    assert k.total_mm2 == pytest.approx(k.pe_array_mm2 + k.dispatcher_mm2 + k.anchor_store_mm2 + k.buffers_mm2)
    # iso-area: Kaleido's PE array, dispatcher and store re-spent on 5000-transistor PEs
    extra = k.total_mm2 - d.total_mm2
    assert iso_area_pes(k, d, 5000) == round(100 + extra / logic_mm2(5000))
    with pytest.raises(ValueError, match="n_pes=0"):
        chip_area(0, 1.0, BUFFERS)


def test_iso_area_shapes():
    assert iso_area_shapes(35719, ArrayConfig()) == [(128, 279), (189, 189)]
    assert iso_area_shapes(16384, ArrayConfig()) == [(128, 128)]


@pytest.fixture(scope="module")
def wan480():
    return get_workload("wan-1.3b-480p"), Profile.load(files("kaleido") / "assets" / "profiles" / "tiny_wan_default.json")


def test_equal_area_gives_the_dense_array_itself(wan480):
    """A Kaleido PE as small as the dense one, no dispatcher logic, no store: the iso-area array is the dense one."""
    wl, prof = wan480
    fig = _figures(5000.0, 5000.0, 0.0)
    r = simulate(wl, None, synthesis=fig)
    s = r.summary()
    assert r.area["kaleido"].total_mm2 == pytest.approx(r.area["dense_array"].total_mm2)
    assert s["iso_area"]["pes"] == 16384 and (s["iso_area"]["rows"], s["iso_area"]["cols"]) == (128, 128)
    assert s["iso_area"]["time_s"] == pytest.approx(s["time_s"]["dense_array"], rel=1e-12)
    # with reuse and register pricing only the matcher's next-pointer list is extra: that many more PEs
    s = simulate(wl, prof, anchor_pricing="register", synthesis=fig).summary()
    W = max(g.window_rows for g in simulate(wl, prof, anchor_pricing="register", synthesis=fig).gemms)
    assert s["iso_area"]["pes"] == 16384 + round(sram_mm2(pointer_list_kib(W)) / logic_mm2(5000))
    assert s["iso_area"]["time_s"] <= s["time_s"]["dense_array"]


def test_iso_area_array_is_faster_than_the_dense_one_and_stores_are_sized_by_pricing(wan480):
    wl, prof = wan480
    one_mb = simulate(wl, prof, anchor_pricing="sram_1m")
    assert one_mb.area["kaleido"].anchor_store_mm2 == pytest.approx(sram_mm2(1024))
    mapped = simulate(wl, prof)
    s = mapped.summary()
    store = max(g.anchor_store_kib for g in mapped.gemms)
    assert store > 0 and mapped.area["kaleido"].anchor_store_mm2 == pytest.approx(sram_mm2(store))
    assert s["area_mm2"]["kaleido_over_dense"] > 1
    assert s["iso_area"]["pes"] > 16384
    assert s["iso_area"]["time_s"] < s["time_s"]["dense_array"]
    assert s["speedup"]["vs_dense_array_iso_area"] < s["speedup"]["vs_dense_array"]


def test_dense_run_has_no_dispatcher_or_store_area(wan480):
    wl, _ = wan480
    r = simulate(wl, None)
    assert r.area["kaleido"].anchor_store_mm2 == 0.0
    assert r.area["kaleido"].dispatcher_mm2 == pytest.approx(logic_mm2(synthesis_figures().dispatcher_transistors))
    assert r.area["kaleido"].pe_array_mm2 == pytest.approx(16384 * logic_mm2(synthesis_figures().kaleido_pe_transistors(7)))


def test_shipped_file_is_the_benchmarks():
    d = json.loads(SYNTHESIS_FILE.read_text())
    assert d["written_by"] == "benchmarks/rtl_area.py"
    assert set(synthesis_figures().flows.values()) <= {"default", "noalumacc", "booth"}
    assert d["dense_pe"]["flow"] in ("default", "noalumacc", "booth")


def test_psum_width_by_hand_and_a_note_when_the_array_is_not_the_synthesised_one(wan480):
    # 17-bit product, then one more bit per doubling of the chain: 128 rows -> 24, 64 -> 23, 16 -> 21
    assert (psum_bits(128), psum_bits(64), psum_bits(16), psum_bits(129)) == (24, 23, 21, 25)
    wl, _ = wan480
    same = _simulate(wl, None, ArrayConfig(low_bits=7), synthesis=_figures())
    assert not any("partial sums" in n for n in same.notes)
    small = _simulate(wl, None, ArrayConfig(rows=64, cols=64, low_bits=7), synthesis=_figures())
    assert any("24-bit partial sums" in n and "64-row array needs 23" in n for n in small.notes)


def test_a_chip_of_several_arrays_says_why_it_has_no_iso_area_row(wan480):
    wl, _ = wan480
    r = _simulate(wl, None, chip=ChipConfig(arrays=4, array=CFG7))
    assert r.iso_area is None and "iso_area" not in r.summary()
    assert any("no iso-area row on a chip of 4 arrays" in n for n in r.notes)
