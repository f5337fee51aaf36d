"""What the report's quality figures compare: mean PSNR with its run count, the gap at matched savings,
each refused point once."""

from __future__ import annotations

from kaleido.compare.analysis import MatchedCell, SettingAggregate
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


def test_gap_compares_at_matched_savings_and_says_so():
    matched = {"kaleido": [MatchedCell(0.5, 28.7, 0.9, ""), MatchedCell(0.7, 23.7, 0.8, "")],
               "cambricon_d": [MatchedCell(0.5, 25.0, 0.9, ""), MatchedCell(0.7, None, None, "")]}
    text = _gap_text(matched, 0.6)
    assert text.startswith("3.70 dB at 50% saved (28.70 minus 25.00); n/a at 70% (Cambricon-D's settings do not reach it)")
    assert "matched self-attention q.k^T savings" in text and "at most 60.0%" in text
    none = _gap_text({"kaleido": [MatchedCell(0.5, 28.7, 0.9, "")], "cambricon_d": [MatchedCell(0.5, None, None, "")]},
                     0.018)
    assert "dB at" not in none and "at most 1.8%" in none


def test_each_refused_point_is_listed_once():
    errs = [{"method": "pab", "settings": {"skip": 2}, "error": "needs a spatial-temporal block split"}] * 2 + [
        {"method": "tome", "settings": {"ratio": 0.9}, "error": "ratio too high"}]
    html = _refused_section(errs)
    assert html.count("<li>") == 2 and html.count("pab") == 1 and "(2 prompt/seed rows)" in html
