"""The HTML report: one self-contained file built from rows only."""

import re

import pytest
from click.testing import CliRunner

from kaleido.compare.grids import build_points
from kaleido.compare.worker import run_point
from kaleido.report import build_report


@pytest.fixture(scope="module")
def rows_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("rows")
    grid = {"tome": [{"ratio": 0.3}, {"ratio": 0.6}], "block_topk": [{"density": 0.3, "block_size": 8}],
            "taylorseer": [{"cache_interval": 2}], "kaleido": [{"theta1": 8, "theta2": 8, "low_bits": 4}],
            "exion": [{"attn_density": 0.5}], "adaptiv": [{"tau": 0.6}], "cambricon_d": [{"delta_bits": 4}]}
    for p in build_points("random-wan", list(grid), 1, (0,), {"num_inference_steps": 2, "max_sequence_length": 16}, grid):
        run_point(p.to_dict(), str(d))
    return d


def test_report_is_one_self_contained_file(rows_dir, tmp_path):
    out = build_report(rows_dir, tmp_path / "r.html", workloads=("wan-1.3b-480p",), accel_steps=2)
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    # nothing is loaded from elsewhere: every image is inline
    assert not re.search(r'src="(?!data:)', page) and "<link" not in page and "<script src" not in page
    assert page.count("data:image/png;base64,") >= 1 + 1 + 7  # pareto + dense + one strip per method
    for section in ("matched self-attention", "Whole transformer saved at mean PSNR", "Quality vs savings",
                    "Side-by-side frames", "Accelerators",
                    "from the paper"):
        assert section in page
    assert "tome ratio=0.3" in page and "taylorseer cache_interval=2" in page
    # the accelerator table has every design, with skip statistics measured on this sweep
    for design in ("dense 128x128", "Kaleido (scheduler + matcher)", "AdapTiV-class", "EXION-class", "Cambricon-D-class"):
        assert design in page
    assert "measured: kaleido" in page and "simulation failed" not in page
    assert "At matched quality" in page


def test_matched_quality_picks_the_most_saving_setting_above_the_bar():
    from kaleido.compare.analysis import SettingAggregate
    from kaleido.report.accel import representatives

    def agg(method, label, psnr, qk, total):
        return SettingAggregate(method, {"k": label}, 1, psnr, 0.9, psnr, qk, qk, total)

    aggs = [agg("kaleido", 1, 40.0, 0.5, 0.2), agg("kaleido", 2, 31.0, 0.8, 0.4), agg("kaleido", 3, 25.0, 0.9, 0.6),
            agg("adaptiv", 1, 29.0, 0.5, 0.3), agg("tome", 1, 35.0, 0.45, 0.1)]
    default = {a.method: a.settings["k"] for a in representatives(aggs)}
    assert default == {"kaleido": 1, "adaptiv": 1, "tome": 1}  # nearest 50% q.k^T, quality ignored
    at30 = {a.method: a.settings["k"] for a in representatives(aggs, min_psnr=30.0)}
    assert at30 == {"kaleido": 2, "tome": 1}  # most total savings at >= 30 dB; adaptiv never reaches 30 dB


def test_accel_designs_use_the_measured_fractions(rows_dir):
    import json

    from kaleido.hw.designs import evaluate, get_design
    from kaleido.hw.designs.common import MeasuredSkips
    from kaleido.hw.inputs.workloads import get_workload

    wl = get_workload("wan-1.3b-480p", steps=2)
    rows = [json.loads(f.read_text()) for f in rows_dir.glob("*.json")]
    by = {r["point"]["settings"].get("ratio"): r for r in rows if r.get("method") == "tome"}
    more, less = (evaluate(get_design("adaptiv"), wl, MeasuredSkips.from_report(by[r]["report"])) for r in (0.6, 0.3))
    assert more.counts.speedup_vs_dense > less.counts.speedup_vs_dense > 1.0
    assert more.counts.dense_cycles == less.counts.dense_cycles
    assert more.energy_pj["mac"] < less.energy_pj["mac"]


def test_report_cli_and_missing_results(rows_dir, tmp_path):
    from kaleido.cli.report import report

    r = CliRunner().invoke(report, ["--results", str(rows_dir), "--out", str(tmp_path / "x.html"),
                                    "--workloads", "wan-1.3b-480p", "--accel-steps", "2"])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "x.html").stat().st_size > 10_000
    r = CliRunner().invoke(report, ["--results", str(tmp_path / "nothing"), "--out", str(tmp_path / "y.html")])
    assert r.exit_code != 0 and "does not exist" in r.output


def test_compare_prints_the_accelerator_table(rows_dir):
    import json

    from kaleido.cli.compare import compare

    r = CliRunner().invoke(compare, ["--results", str(rows_dir), "--plot-only", "--json", "--workloads", "wan-1.3b-480p"])
    assert r.exit_code == 0, r.output
    tables = json.loads(r.output)["accelerators"]
    assert [t["workload"] for t in tables] == ["wan-1.3b-480p"]
    designs = {d["design"]: d for d in tables[0]["designs"]}
    replayed = [d for d in designs.values() if d.get("replayed")]
    assert len(replayed) == 3  # AdapTiV, EXION, Cambricon-D rows carry traces: replayed, not upper bounds
    for d in replayed:
        assert d["speedup_vs_dense"] <= d["upper_bound_speedup_vs_dense"] + 1e-9
    matched = json.loads(r.output)["accelerators_matched_quality"]
    assert matched["min_psnr_db"] == 30.0
    assert matched["tables"]  # random-wan settings reach 30 dB (kaleido 8/8 at least)
    for t in matched["tables"]:
        assert t["workload"] == "wan-1.3b-480p" and t["designs"][0]["design"].startswith("dense")
    r = CliRunner().invoke(compare, ["--results", str(rows_dir), "--plot-only", "--workloads", "nope"])
    assert r.exit_code != 0 and "unknown workload" in r.output


def test_compacted_rows_give_the_same_report(tmp_path):
    import json

    from kaleido.compare.analysis import aggregate, compact_rows, load_rows

    grid = {"kaleido": [{"theta1": 8, "theta2": 8, "low_bits": 4}], "adaptiv": [{"tau": 0.6}]}
    for p in build_points("random-wan", list(grid), 1, (0, 1), {"num_inference_steps": 2, "max_sequence_length": 16}, grid):
        run_point(p.to_dict(), str(tmp_path))
    before = {(a.method, a.label): (a.psnr, a.self_qk_saved, a.thumbs) for a in aggregate(load_rows(tmp_path))}
    n, size_before, size_after = compact_rows(tmp_path)
    assert n == 2 and size_after < size_before  # the seed-1 row of each setting
    rows = load_rows(tmp_path)
    after = {(a.method, a.label): (a.psnr, a.self_qk_saved, a.thumbs) for a in aggregate(rows)}
    assert after == before  # quality, savings and the shown frames are unchanged
    for r in rows:
        if r.get("seed") == 1 and r.get("method") == "kaleido":
            assert "hw_profile" not in r["report"]["extra"] and "thumbs" not in r and r["compacted"]
        if r.get("seed") == 0 and r.get("method") == "adaptiv":
            assert "accel_profile" in r["report"]["extra"]
    page = build_report(tmp_path, tmp_path / "r.html", workloads=("wan-1.3b-480p",), accel_steps=2).read_text()
    assert "TRACE-REPLAYED" in page and "simulation failed" not in page
    assert compact_rows(tmp_path)[0] == 0  # idempotent
    assert json.loads(next(tmp_path.glob("*.json")).read_text())  # still valid rows


def test_compare_says_when_it_has_no_accelerator_table(rows_dir, tmp_path):
    import json

    from kaleido.cli.compare import compare

    for f in rows_dir.glob("*.json"):  # only the token-merging rows and the dense references
        if json.loads(f.read_text())["point"]["method"] in ("dense", "tome"):
            (tmp_path / f.name).write_text(f.read_text())
    r = CliRunner().invoke(compare, ["--results", str(tmp_path), "--plot-only", "--json"])
    assert r.exit_code == 0, r.output
    assert "no accelerator table" in r.output
