"""Every simulated design behind one protocol, in one registry (kaleido.hw.designs).

Each registered design keeps the protocol, counts one small workload (the miniature pipeline's) with the
statistics of its kind and has its counts priced: on the array by the cited EnergyTable - so a table with
every entry doubled doubles every component and leaves the counts alone -, the A100 at its board power.
Adding a design is one file plus its registration: a design written into a fresh module and registered
is replayed from a trace of its method and gets its row in the accelerator table, with nothing else edited.
"""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from importlib.resources import files

import pytest

from kaleido.hw.designs.baseline_replay import BaselineProfile, Cell
from kaleido.hw.arch.config import ArrayConfig
from kaleido.hw.designs import DESIGNS, Design, DesignCounts, evaluate, get_design, register_design, replayed_designs
from kaleido.hw.designs.common import MeasuredSkips, OpFractions
from kaleido.hw.arch.energy import ActionCounts, EnergyTable
from kaleido.hw.inputs.profile import Profile
from kaleido.hw.inputs.workloads import miniature_workload

WL = miniature_workload((5, 16, 16), steps=2)
CFG = ArrayConfig(low_bits=7)  # wide enough for the shipped miniature profile's PARTIAL differences (up to 7 bits)
KINDS = ("self_attn_qk", "self_attn_pv", "proj_q", "proj_out", "ffn_up", "ffn_down")
CELL = {"adaptiv": Cell(0.5, 0.0, 0.5, estimate=0.01), "exion": Cell(0.4, 0.0, 0.6, estimate=0.25, tile=0.7),
        "cambricon_d": Cell(0.2, 0.5, 0.3, 4, outliers=0.02)}


def doubled(table: EnergyTable) -> EnergyTable:
    return EnergyTable({k: replace(e, value_pj=2 * e.value_pj) for k, e in table.entries.items()},
                       static_w=2 * table.static_w)


def trace_of(method: str, cell: Cell) -> BaselineProfile:
    ops = {k: [[cell, Cell.dense()], [cell, cell]] for k in KINDS}  # 2 recorded steps x 2 layers
    return BaselineProfile(method, {}, "WanTransformer3DModel", (5, 16, 16), 128, ops)


def stats_for(design) -> list:
    """The statistics each kind of design reads: none; Kaleido's profile; a replayed technique's trace (and the
    MAC shares of a row recorded without one)."""
    if design.method is None:
        return [None]
    if design.method == "kaleido":
        return [Profile.load(files("kaleido") / "assets" / "profiles" / "tiny_wan_default.json")]
    cell = CELL.get(design.method, Cell(0.5, 0.0, 0.5))
    return [trace_of(design.method, cell),
            MeasuredSkips(design.method, {}, {k: OpFractions(cell.mac8, cell.mac_low, cell.skipped, cell.low_bits)
                                              for k in KINDS})]


def test_the_registry_holds_every_design_once_in_table_order():
    assert list(DESIGNS) == ["dense", "a100", "kaleido", "adaptiv", "exion", "cambricon_d"]
    assert [d.method for d in replayed_designs()] == ["adaptiv", "exion", "cambricon_d"]
    assert all(DESIGNS[n].name == n for n in DESIGNS)


@pytest.mark.parametrize("name", list(DESIGNS))
def test_every_design_keeps_the_protocol_counts_and_is_priced(name):
    d = get_design(name)
    assert isinstance(d, Design)
    assert callable(d.count) and callable(d.price)
    assert isinstance(d.label, str) and d.label and isinstance(d.on_array, bool)
    assert d.method is None or isinstance(d.method, str)
    assert all(isinstance(a, str) for a in d.assumptions) and all(isinstance(v, str) for v in d.inputs.values())
    table = EnergyTable(static_w=0.25)
    for stats in stats_for(d):
        counts = d.count(WL, stats, CFG)
        assert isinstance(counts, DesignCounts) and counts.workload == WL.name
        assert counts.time_s > 0 and counts.dense_macs > 0
        priced = d.price(counts, table)
        assert priced and all(v >= 0 for v in priced.values())
        r = evaluate(d, WL, stats, CFG, table)
        assert r.energy_pj == pytest.approx(priced, rel=1e-12) and r.energy_j > 0
        if not d.on_array:
            continue
        assert 0 < counts.cycles and 0 < counts.dense_cycles and 0 < counts.utilisation(128 * 128) <= 1
        assert counts.actions and all(isinstance(a, ActionCounts) for a in counts.actions)
        assert priced["mac"] > 0 and priced["static"] == pytest.approx(0.25 * counts.time_s * 1e12)
        # Accelergy's split: energy comes from the table alone - double every entry, every component doubles
        twice = d.price(counts, doubled(table))
        assert twice == pytest.approx({k: 2 * v for k, v in priced.items()}, rel=1e-12)


def test_a_design_needs_statistics_of_its_kind():
    with pytest.raises(ValueError, match="needs its trace"):
        get_design("exion").count(WL, None)
    with pytest.raises(ValueError, match="cannot be replayed"):
        get_design("exion").count(WL, trace_of("adaptiv", CELL["adaptiv"]))


def test_low_bit_macs_of_several_widths_are_each_priced_at_their_width():
    ops = {"proj_q": [[Cell(0.0, 1.0, 0.0, 4)]], "ffn_up": [[Cell(0.0, 1.0, 0.0, 6)]]}
    prof = BaselineProfile("cambricon_d", {}, "WanTransformer3DModel", (5, 16, 16), 128, ops)
    counts = get_design("cambricon_d").count(WL, prof)
    widths = {a.low_bits for a in counts.actions if a.mac_low}
    assert widths == {4, 6}
    t = EnergyTable()
    mac = sum(a.mac8 * t.mac_pj(8) + a.mac_low * t.mac_pj(a.low_bits) for a in counts.actions)
    assert get_design("cambricon_d").price(counts, t)["mac"] == pytest.approx(mac, rel=1e-12)


def test_register_refuses_what_does_not_keep_the_protocol():
    class NoPrice:
        name, label, method, on_array, assumptions, inputs = "np", "np", None, True, (), {}

        def count(self, workload, stats=None, cfg=None):
            raise AssertionError

    with pytest.raises(TypeError, match="Design protocol"):
        register_design(NoPrice())
    assert "np" not in DESIGNS


NEW_DESIGN = '''
"""A toy column-skipping accelerator: the kept share of every GEMM's output columns runs dense."""
from types import MappingProxyType

from kaleido.hw.arch.compute import dense_cycles
from kaleido.hw.designs.common import GemmCost, ceil_frac
from kaleido.hw.designs.replay import ReplayedDesign


class ColumnSkip(ReplayedDesign):
    name = method = "toy_column_skip"
    label = "toy column-skip class"
    assumptions = ("a test design",)
    inputs = MappingProxyType({"kept columns per step and layer": "MEASURED: trace of toy_column_skip"})

    def gemm_cost(self, g, fr, cfg):
        n = ceil_frac(g.N, fr.kept)
        return dense_cycles(g.M, g.K, n, cfg), float(g.M) * g.K * n, 0.0, 8

    def replay_cost(self, g, c, cfg, base):
        if c.skipped <= 0:
            return base
        n = ceil_frac(g.N, c.kept)
        m = float(g.M) * g.K * n
        return GemmCost(dense_cycles(g.M, g.K, n, cfg), m, m, 0.0, 8, base.dram_bytes)
'''


def test_adding_a_design_is_one_file_plus_its_registration(tmp_path):
    from kaleido.report.accel import design_table

    path = tmp_path / "toy_column_skip.py"  # the one file
    path.write_text(NEW_DESIGN)
    spec = importlib.util.spec_from_file_location("toy_column_skip", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    design = register_design(mod.ColumnSkip())  # its registration
    try:
        prof = trace_of("toy_column_skip", Cell(0.5, 0.0, 0.5))
        row = {"method": "toy_column_skip", "point": {"settings": {"keep": 0.5}}, "quality": {"psnr": 31.0},
               "report": {"extra": {"accel_profile": prof.to_dict()}}}
        r = evaluate(design, WL, prof)
        assert r.counts.cycles < r.counts.dense_cycles and r.energy_pj["mac"] > 0
        t = design_table(None, {"toy_column_skip": row}, WL)
        (d,) = [d for d in t["designs"] if d["method"] == "toy_column_skip"]
        assert d["replayed"] and d["design"] == "toy column-skip class" and d["speedup_vs_dense"] > 1
        assert d["mac_energy_j"] == pytest.approx(r.component_j("mac"), rel=1e-12)
    finally:
        DESIGNS.pop("toy_column_skip")


@pytest.mark.parametrize("arrays", [None, 1, 4, 64])
def test_the_dense_design_is_kaleidos_dense_reference(arrays):
    # two independent countings of the same dense array: the dense design's own (from the architecture models)
    # and the reference Kaleido's design counts beside its figures - equal to the last bit, on one array and on
    # chips that split by columns, by heads and (64 arrays: more than heads) by keys
    from kaleido.hw.arch.chip import ChipConfig
    from kaleido.hw.designs.kaleido import simulate
    from kaleido.hw.inputs.workloads import get_workload

    for name in ("wan-1.3b-480p", "hunyuan-720p", "turbodiffusion-480p"):
        wl = get_workload(name)
        chip = None if arrays is None else ChipConfig(arrays)
        d = get_design("dense").count(wl, None, None, chip=chip)
        sim = simulate(wl, None, None, chip=chip)
        assert (d.cycles, d.time_s, d.dense_macs) == (sim.cycles("dense"), sim.time_s("dense"),
                                                      sum(g.macs for g in sim.gemms))
        assert d.actions[0].to_dict() == sim.counts("dense").to_dict()
        assert d.arrays == sim.arrays
