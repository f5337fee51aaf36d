"""The resolution study (benchmarks/resolution_study.py) runs end to end on its smoke setting and
reports every part for both grids."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _study():
    spec = importlib.util.spec_from_file_location("resolution_study", ROOT / "benchmarks" / "resolution_study.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_resolution_study_smoke_end_to_end(tmp_path):
    out = tmp_path / "res.json"
    _study().main(["--smoke", "--threads", "1", "--work", str(tmp_path / "work"), "--json", str(out),
                   "--plot", str(tmp_path / "sweep.png")])
    res = json.loads(out.read_text())
    assert set(res["grids"]) == {"16x16", "24x24"}
    # the smoke setting generates 5 frames (2 latent frames)
    assert res["grids"]["16x16"]["grid"] == [2, 16, 16] and res["grids"]["24x24"]["grid"] == [2, 24, 24]
    for g in res["grids"].values():
        d = g["default"]
        assert d["runs"] == 1 and 0 < d["self_qk"]["mean"] < 1 and d["psnr"]["mean"] > 0
        assert set(g["characterisation"]) == {"self_q", "self_k"}
        assert len(g["sweep"]) == 4
        assert any(k.startswith("tiny-wan") for k in g["designs"])
    carry = res["carry_rule"]
    assert {"tiny-wan-2x24x24", "wan-1.3b-480p", "hunyuan-720p"} <= set(carry)
    assert all(abs(c["cycles"]["relative_error_mean"]) < 10 for c in carry.values())
    assert (tmp_path / "sweep.png").stat().st_size > 1000
