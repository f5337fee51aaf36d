"""Speed of the accelerator simulator against its time budgets, measured in one run.

1. One 4096x128x4096 GEMM on a 128x128 array, dense and with an exact random mode
   map (4096 rows x 3 RoPE groups), both dataflows: budget 1 s each.
2. HunyuanVideo 720p, 50 steps, with the shipped (synthetic) profile carried over,
   and with a 50-entry per-step profile (50 distinct statistics per op kind, the
   worst case): budget 30 s each.
3. All 14 workloads x 50 steps with per-step statistics (the shipped MEASURED profile
   ``tiny_wan_default``, its 25 measured steps carried to 50): budget 10 s for all of
   them; and the same on one chip preset (``iso-peak-bf16``, 10 arrays sharing the
   A100's HBM2e; the preset's derivation included): budget 10 s.

Run: ``OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_sim.py``.  Prints the measured
time and its ratio to the budget (< 1 meets it).
"""

from __future__ import annotations

import time
from importlib.resources import files

import numpy as np

from kaleido.hw.chip_presets import chip_preset
from kaleido.hw.arch.compute import dense_cycles
from kaleido.hw.arch.config import ArrayConfig
from kaleido.hw.arch.dispatcher import RowStats
from kaleido.hw.inputs.profile import OpProfile, Profile
from kaleido.hw.designs.kaleido import simulate, simulate_gemm
from kaleido.hw.inputs.workloads import get_workload, workload_names
from kaleido.reuse import ModeStats


def timed(fn, repeat=3):
    best = float("inf")
    out = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def report(what, seconds, budget):
    print(f"{what:<62s} {seconds * 1e3:9.1f} ms   budget {budget:5.1f} s   ratio {seconds / budget:.4f}")


def per_step_profile(p: Profile, steps: int, seed: int = 0) -> Profile:
    """The same ops with ``steps`` distinct per-step statistics (rows moved between modes at random)."""
    rng = np.random.default_rng(seed)
    ops = {}
    for k, e in p.ops.items():
        if e is None:
            ops[k] = None
            continue
        st = e.stats
        per = []
        for _ in range(steps):
            mc = st.mode_counts.copy()
            shift = rng.integers(0, max(1, st.n_rows // 10), size=mc.shape[0])
            mc[:, 0] += shift
            mc[:, 1] -= np.minimum(shift, mc[:, 1])
            mc[:, 0] -= np.maximum(0, mc.sum(1) - st.n_rows)
            per.append(ModeStats(st.group_sizes, st.group_names, st.low_bits, mc, None))
        pooled = per[0]
        for s in per[1:]:
            pooled = pooled + s
        ops[k] = OpProfile(pooled, per)
    return Profile(p.model, p.grid, ops, p.label, p.source)


def main() -> None:
    M, K, N = 4096, 128, 4096
    rng = np.random.default_rng(0)
    rows = rng.choice(3, size=(1, M, 3), p=[0.3, 0.5, 0.2]).astype(np.uint8)
    for flow in ("os", "ws"):
        cfg = ArrayConfig(dataflow=flow)
        t, cyc = timed(lambda: dense_cycles(M, K, N, cfg))
        report(f"GEMM {M}x{K}x{N} dense, {flow} ({cyc:.0f} cycles)", t, 1.0)
        t, r = timed(lambda: simulate_gemm(M, K, N, RowStats.from_rows(rows, (44, 42, 42)), cfg))
        report(f"GEMM {M}x{K}x{N} Kaleido, exact map, {flow} ({r.kaleido_cycles['scheduler+matcher']:.0f} cyc)", t, 1.0)
    p = Profile.load(files("kaleido") / "assets" / "profiles" / "synthetic_correlated.json")
    wl = get_workload("hunyuan-720p", steps=50)
    for flow in ("ws", "os"):
        cfg = ArrayConfig(dataflow=flow)
        t, r = timed(lambda: simulate(wl, p, cfg, transfer=True), repeat=1)
        report(f"HunyuanVideo 720p, 50 steps, pooled profile, {flow} "
               f"({r.summary()['speedup']['vs_dense_array']:.2f}x)", t, 30.0)
    ps = per_step_profile(p, 50)
    for flow in ("ws", "os"):
        cfg = ArrayConfig(dataflow=flow)
        t, r = timed(lambda: simulate(wl, ps, cfg, transfer=True), repeat=1)
        report(f"HunyuanVideo 720p, 50 steps, 50 per-step stats, {flow} ({len(r.gemms)} GEMM runs)", t, 30.0)
    measured = Profile.load(files("kaleido") / "assets" / "profiles" / "tiny_wan_default.json")
    wls = [get_workload(n, steps=50) for n in workload_names()]
    cfg = ArrayConfig(low_bits=7)

    def all_workloads(**kw):
        return [simulate(wl, measured, transfer=True, **kw) for wl in wls]

    t, rs = timed(lambda: all_workloads(cfg=cfg), repeat=1)
    report(f"14 workloads x 50 steps, measured per-step stats, ws ({sum(len(r.gemms) for r in rs)} GEMM runs)", t, 10.0)

    def on_chip():
        p = chip_preset("iso-peak-bf16", cfg)
        return all_workloads(chip=p.chip, energy=p.energy)

    t, rs = timed(on_chip, repeat=1)
    report(f"same on the iso-peak-bf16 chip ({rs[0].arrays} arrays; {rs[0].summary()['chip']['vs_a100']:.2f}x "
           f"vs A100 on {rs[0].workload['name']})", t, 10.0)


if __name__ == "__main__":
    main()
