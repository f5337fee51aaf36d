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
            "taylorseer": [{"cache_interval": 2}]}
    for p in build_points("random-wan", list(grid), 1, (0,), {"num_inference_steps": 2, "max_sequence_length": 16}, grid):
        run_point(p.to_dict(), str(d))
    return d


def test_report_is_one_self_contained_file(rows_dir, tmp_path):
    out = build_report(rows_dir, tmp_path / "r.html")
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    # nothing is loaded from elsewhere: every image is inline
    assert not re.search(r'src="(?!data:)', page) and "<link" not in page and "<script src" not in page
    assert page.count("data:image/png;base64,") >= 1 + 1 + 3  # pareto + dense + one strip per method
    for section in ("matched self-attention", "Quality vs savings", "Side-by-side frames", "Accelerators",
                    "from the paper"):
        assert section in page
    assert "tome ratio=0.3" in page and "taylorseer cache_interval=2" in page


def test_report_cli_and_missing_results(rows_dir, tmp_path):
    from kaleido.cli.report import report

    r = CliRunner().invoke(report, ["--results", str(rows_dir), "--out", str(tmp_path / "x.html")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "x.html").stat().st_size > 10_000
    r = CliRunner().invoke(report, ["--results", str(tmp_path / "nothing"), "--out", str(tmp_path / "y.html")])
    assert r.exit_code != 0 and "does not exist" in r.output
