"""The HTML report shows each setting's measured wall time against dense and where its saving is real."""

import json

from kaleido.compare.analysis import aggregate
from kaleido.compare.points import SweepPoint

CPU = {"type": "cpu", "name": "Test CPU 9000", "threads": 2, "cpus": 2}


def _row(method, settings, prompt, wall, psnr=33.0, saved=0.4, device=None):
    p = SweepPoint("tiny", method, prompt, 0, settings, {"num_inference_steps": 4}, "tiny:abc")
    r = {"point": p.to_dict(), "wall_s": wall, "host": "h", "run": "run-1"}  # one sweep run: the times pair
    if method != "dense":
        r.update({"method": method, "settings": settings, "prompt": prompt, "seed": 0,
                  "quality": {"psnr": psnr, "ssim": 0.95},
                  "report": {"saved_fraction": {"self_qk": saved}, "total_saved_fraction": saved, "estimate_macs": 0,
                             "op_counts": {"self_qk": {"dense_macs": 100, "equiv8_macs": 100 * (1 - saved)}}},
                  "dense_wall_s": None})
    if device:
        r["device"] = device
    return r


def rows():
    """Dense 10 s and 20 s; taylorseer 5 s and 10 s (0.5x, measured on a named CPU); kaleido 15 s and 30 s
    (1.5x, rows without a device)."""
    out = [_row("dense", {}, "a", 10.0, device=CPU), _row("dense", {}, "b", 20.0, device=CPU)]
    out += [_row("taylorseer", {"cache_interval": 2}, p, t, saved=0.6, device=CPU)
            for p, t in (("a", 5.0), ("b", 10.0))]
    out += [_row("kaleido", {"theta1": 8}, p, t, saved=0.1) for p, t in (("a", 15.0), ("b", 30.0))]
    return out


def test_report_has_the_wall_ratio_and_where_the_saving_is_real(tmp_path):
    from kaleido.report import build_report

    d = tmp_path / "rows"
    d.mkdir()
    for r in rows():
        (d / f"{r['point']['key']}.json").write_text(json.dumps(r))
    page = build_report(d, tmp_path / "r.html", workloads=("wan-1.3b-480p",), accel_steps=2).read_text()
    ranking = page[page.index("Whole transformer saved at mean PSNR"):page.index("<h2>Quality vs savings")]
    assert "wall time vs dense, measured (runs)" in ranking and "where the saving is real" in ranking
    assert "0.50x" in ranking and "1.50x" in ranking
    assert "cpu: Test CPU 9000, 2 threads" in ranking and "unknown device" in ranking
    assert "today&#x27;s hardware" in ranking and "needs the accelerator" in ranking
    # the Kaleido rows carry no trace: the accelerator table falls back to the synthetic example profile,
    # which is no figure of these rows, so the ranking gives Kaleido no simulated speedup
    assert "simulated:" not in ranking
    settings = page[page.index("<h2>Every setting"):page.index("<h2>Side-by-side frames")]
    assert "wall time vs dense (runs)" in settings and "0.50x" in settings and "where the saving is real" in settings


def test_ranking_names_the_simulated_speedup_of_a_method_that_needs_the_accelerator():
    from kaleido.report.html import _ranking_section

    accel = {"kaleido": [{"workload": "wan-1.3b-480p", "speedup_vs_dense": 1.12, "figure": "measured profile"},
                         {"workload": "hunyuan-720p", "speedup_vs_dense": 1.14, "figure": "measured profile"}]}
    html = _ranking_section(aggregate(rows()), accel)
    assert "needs the accelerator (simulated: 1.12x wan-1.3b-480p, 1.14x hunyuan-720p)" in html
    assert "today&#x27;s hardware</td>" in html  # taylorseer: no simulated figure
