"""The figures of docs/hardware.md's cost-model audit, from one command.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/cost_audit.py [--workloads wan-1.3b-480p,hunyuan-720p] [--json OUT]

For each workload, with the shipped MEASURED profile (``tiny_wan_default``, 7-bit
PARTIAL multiplier, carried by the documented rule), it prints Kaleido's speedup and
energy saving over the dense array under each way of pricing an anchor's partial
result (``mapped``, ``register``, ``sram_1m``), with and without the matcher's
complementary pairs, the iso-peak comparison with the A100 (DRAM unscaled; factor from
the A100's bf16 and int8 peaks), the decision-unit cycles exposed per dispatcher level,
and the model's ceiling: every video row that has a reference FULL in every group of
every reusable op (rows at position 0 on their reuse axis and text rows compute), with
the default reuse axes and with every group of q.k^T along one axis (the P.V row skip).
Nothing is typed in: every number is a ``kaleido.hw.simulate`` result.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from kaleido.hw.arch.config import ArrayConfig
from kaleido.hw.arch.gpu import A100Config
from kaleido.hw.inputs.profile import LINEAR_CHUNK, OpProfile, Profile
from kaleido.hw.designs.kaleido import simulate
from kaleido.hw.inputs.workloads import Workload, get_workload
from kaleido.reuse import ModeStats

ROOT = Path(__file__).resolve().parent.parent
MEASURED = ROOT / "src" / "kaleido" / "assets" / "profiles" / "tiny_wan_default.json"
_DIM = {"t": 0, "h": 1, "w": 2}


def ceiling_profile(wl: Workload, qk_axes: tuple[str, str, str] = ("w", "t", "t"), chunk_axis: str = "t",
                    boundary: bool = True) -> Profile:
    """Every video row with a reference FULL in every group of every op that may reuse.

    A row at position 0 on its group's reuse axis has no reference and computes
    (``1/L_axis`` of the rows); text rows compute (the simulator adds them).
    ``boundary=False`` makes those rows FULL too - not reachable, the literal "100% FULL".
    """
    n = wl.n_video
    ops: dict[str, OpProfile | None] = {}
    for g in wl.gemms:
        if g.op in ops or g.op == "cross_proj_kv":
            continue
        if g.op == "self_attn_qk" and wl.model.rope_thw is not None and sum(wl.model.rope_thw) == g.K:
            sizes, names, axes = tuple(wl.model.rope_thw), ("t", "h", "w"), qk_axes
        else:
            c = min(LINEAR_CHUNK, g.K)
            sizes = tuple([c] * (g.K // c) + ([g.K % c] if g.K % c else []))
            names, axes = tuple(f"c{i}" for i in range(len(sizes))), (chunk_axis,) * len(sizes)
        b = np.array([n // wl.grid_thw[_DIM[a]] if boundary else 0 for a in axes])  # rows without a reference
        mc = np.stack([b, np.zeros_like(b), n - b], axis=1).astype(np.int64)
        pc = None
        if len(sizes) <= 8:
            # rows at position 0 on an axis compute in the groups on that axis (the first frame
            # for t, the first column for w ...); count the patterns row by row on the grid
            T, H, W = wl.grid_thw
            pos = np.stack(np.meshgrid(np.arange(T), np.arange(H), np.arange(W), indexing="ij"), -1).reshape(-1, 3)
            modes = np.stack([np.where((pos[:, _DIM[a]] == 0) & boundary, 0, 2) for a in axes], axis=1)
            codes = (modes * (3 ** np.arange(len(sizes)))).sum(1)
            pc = np.bincount(codes, minlength=3 ** len(sizes)).astype(np.int64)
        ops[g.op] = OpProfile(ModeStats(sizes, names, 4, mc, pc), axes=axes)
    return Profile(wl.model.name, wl.grid_thw, ops, label="CEILING: every row with a reference FULL")


def figures(name: str, measured: Profile) -> dict:
    wl = get_workload(name)
    cfg = ArrayConfig(low_bits=7)
    out: dict = {"workload": name}
    for pricing in ("mapped", "register", "sram_1m"):
        s = simulate(wl, measured, cfg, transfer=True, anchor_pricing=pricing).summary()
        out[f"measured/{pricing}"] = {"speedup": s["speedup"]["vs_dense_array"],
                                      "energy": s["energy_savings"]["vs_dense_array"]}
        if pricing == "mapped":
            base = simulate(wl, measured, cfg, transfer=True)
            out["exposed_by_level"] = base.summary()["dispatcher_exposed_cycles_by_level"]
            out["utilisation"] = base.summary()["utilisation"]
            out["iso_peak"] = {
                "bf16 (factor %.2f)" % base.iso_peak_factor(): base.summary()["speedup"]["vs_a100_iso_peak"],
                "raw": base.summary()["speedup"]["vs_a100_raw"],
            }
            r8 = simulate(wl, measured, cfg, transfer=True, a100=A100Config(precision="int8"))
            out["iso_peak"]["A100 bf16 time, int8 factor %.2f" % r8.iso_peak_factor()] = (
                base.a100_time_s() / base.time_s("scheduler+matcher", arrays=r8.iso_peak_factor()))
            out["iso_peak"]["old shortcut: whole time / %.2f" % r8.iso_peak_factor()] = (
                base.a100_time_s() / (base.time_s("scheduler+matcher") / r8.iso_peak_factor()))
    s = simulate(wl, measured, cfg, transfer=True, complementary=False).summary()
    out["measured/no complementary pairs"] = {"speedup": s["speedup"]["vs_dense_array"],
                                              "energy": s["energy_savings"]["vs_dense_array"]}
    s = simulate(wl, ceiling_profile(wl, boundary=False), ArrayConfig()).summary()
    out["every row FULL, rows without a reference included (not reachable), default axes"] = {
        "speedup": s["speedup"]["vs_dense_array"], "energy": s["energy_savings"]["vs_dense_array"]}
    for label, axes in (("default axes", ("w", "t", "t")), ("q.k^T along t only (P.V row skip)", ("t", "t", "t"))):
        prof = ceiling_profile(wl, axes)
        for pricing in ("mapped", "register"):
            r = simulate(wl, prof, ArrayConfig(), anchor_pricing=pricing)
            s = r.summary()
            out[f"ceiling {label}/{pricing}"] = {
                "speedup": s["speedup"]["vs_dense_array"], "energy": s["energy_savings"]["vs_dense_array"],
                "vs_a100_raw": s["speedup"]["vs_a100_raw"], "vs_a100_iso_peak": s["speedup"]["vs_a100_iso_peak"],
                "energy_vs_a100": s["energy_savings"]["vs_a100"],
                "dram_bound_share_of_time": _dram_bound_share(r),
            }
    return out


def _dram_bound_share(r) -> float:
    """Share of Kaleido's time spent in GEMMs whose DRAM time exceeds their compute time."""
    bw = r.array["buffers"]["dram_gbps"] * 1e9
    clk = r.array["clock_ghz"] * 1e9
    tot = bound = 0.0
    for g in r.gemms:
        c, d = g.kaleido_cycles["scheduler+matcher"] / clk, g.dram_bytes / bw
        tot += max(c, d)
        bound += d if d > c else 0.0
    return bound / max(tot, 1e-30)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workloads", default="wan-1.3b-480p,hunyuan-720p")
    p.add_argument("--json", help="also write the figures here")
    a = p.parse_args()
    measured = Profile.load(MEASURED)
    res = [figures(w, measured) for w in a.workloads.split(",")]
    for r in res:
        print(f"== {r['workload']}")
        for k, v in r.items():
            if k == "workload":
                continue
            if isinstance(v, dict):
                print(f"  {k}: " + ", ".join(f"{kk} {vv:.3f}" if isinstance(vv, float) else f"{kk} {vv}"
                                             for kk, vv in v.items()))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1, default=float))


if __name__ == "__main__":
    main()
