"""What the report's quality figures compare: mean PSNR with its run count, the gap at matched savings,
each refused point once."""

from __future__ import annotations

from kaleido.compare.analysis import SettingAggregate
from kaleido.report.accel import design_table, quality_by_method
from kaleido.report.html import _gap_text, _quality_cell, _refused_section


def agg(method, k, n, psnr, qk, total):
    return SettingAggregate(method, {"k": k}, n, psnr, 0.9, psnr, qk, qk, total)


def test_design_rows_carry_the_mean_psnr_and_its_run_count():
    aggs = [agg("kaleido", 1, 4, 28.5, 0.5, 0.2), agg("kaleido", 2, 4, 20.0, 0.9, 0.5), agg("exion", 1, 2, 25.0, 0.4, 0.1)]
    assert quality_by_method(aggs) == {"kaleido": (28.5, 4), "exion": (25.0, 2)}
    t = design_table(None, {}, "wan-1.3b-480p", steps=1, quality=quality_by_method(aggs))
    dense, kal = t["designs"][:2]
    # no Kaleido row: the synthetic profile, no quality to show (not a borrowed one)
    assert dense["psnr"] is None and kal["psnr"] is None and kal["psnr_runs"] == 0
    assert _quality_cell(kal) == "-"
    assert _quality_cell({"psnr": 28.5, "psnr_runs": 4}) == "28.50 (4)"


def test_gap_compares_at_matched_whole_transformer_savings_and_says_so():
    # Kaleido's front: (10%, 40 dB), (30%, 20 dB); a dominated setting that must not count: (20%, 10 dB)
    aggs = [agg("kaleido", 1, 4, 40.0, 0.3, 0.1), agg("kaleido", 2, 4, 20.0, 0.7, 0.3), agg("kaleido", 3, 4, 10.0, 0.5, 0.2),
            agg("cambricon_d", 1, 2, 35.0, 0.0, 0.2), agg("cambricon_d", 2, 2, 30.0, 0.0, 0.5)]
    text = _gap_text(aggs)
    # at 20%: Kaleido interpolated to 30 dB, minus 35 -> -5 dB
    assert text.startswith("-5.00 dB at 20.0% of the whole transformer saved: Kaleido 30.00 (interpolated between")
    assert "(2 runs)" in text and "4 and 4 runs" in text
    assert "n/a at 50.0% saved by cambricon_d k=2 (Kaleido's settings save 10.0%-30.0%; not extrapolated)" in text
    assert text.endswith("at matched whole-transformer savings, each setting's mean PSNR over its runs, miniature pipeline)")


def test_each_refused_point_is_listed_once():
    errs = [{"method": "pab", "settings": {"skip": 2}, "error": "needs a spatial-temporal block split"}] * 2 + [
        {"method": "tome", "settings": {"ratio": 0.9}, "error": "ratio too high"}]
    html = _refused_section(errs)
    assert html.count("<li>") == 2 and html.count("pab") == 1 and "(2 prompt/seed rows)" in html


def test_design_table_carries_area_and_the_iso_area_line_reads_it():
    from kaleido.hw.designs.kaleido import simulate
    from kaleido.hw.inputs.workloads import get_workload
    from kaleido.report.html import _iso_area_row

    t = design_table(None, {}, "wan-1.3b-480p", steps=1)
    direct = simulate(get_workload("wan-1.3b-480p", steps=1), None).summary()  # no profile: the simulator itself
    assert t["area_mm2"]["dense_array"]["total_mm2"] == direct["area_mm2"]["dense_array"]["total_mm2"]
    iso = t["iso_area"]
    row = _iso_area_row(t)
    assert f"{iso['rows']}x{iso['cols']} = {iso['pes']:,} PEs" in row
    assert f"{iso['speedup_vs_dense_iso_area']:.2f}x (iso-area" in row
    assert _iso_area_row({**t, "iso_area": None}) == ""
