"""What the paper's figures would need: the FULL share at which this cost model reaches each, per workload.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/paper_requirements.py [--workloads all] [--jobs 2] \
        [--json OUT.json] [--figure docs/hw/required_vs_measured.png]

For every workload and scope (``all`` ops but P.V, ``attention`` q.k^T only;
:mod:`kaleido.hw.outputs.requirements`), a SYNTHETIC uniform profile with FULL share ``f`` on a
grid of 11 values (PARTIAL 0) is simulated on three machines:

* the single 128x128 array (speedup over the dense array, in cycles, as
  ``docs/baselines.md`` compares designs) - the paper's **5.9x over AdapTiV / EXION-class
  designs** needs ``5.9 x`` the design's replayed speedup over the dense array, replayed
  here from the shipped sweep's traces (``docs/results/compare``, the representative
  settings ``kaleido compare`` uses);
* the ``iso-peak-bf16`` chip (the A100's bf16 peak, its HBM2e) - **6.6x over the A100** at
  iso-peak and **16x energy** against it;
* the ``iso-power`` chip (400 W) - **6.6x over the A100** at iso-power.

Each target's required share is the first grid crossing, interpolated
(:func:`kaleido.hw.outputs.requirements.first_reaching`); "unreachable" gives the best the grid
reached.  The same sweep over the PARTIAL share (FULL 0, 4-bit differences, packed) gives
the PARTIAL share each target needs.
The measured shares are those of the shipped profile ``tiny_wan_default`` carried to the
workload (:func:`kaleido.hw.outputs.requirements.measured_fractions`).  The figure is written
through ``kaleido.atomic``.
"""

from __future__ import annotations

import argparse
import functools
import json
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from kaleido.atomic import open_atomic, write_atomic
from kaleido.hw.chip_presets import chip_preset
from kaleido.hw.arch.config import ArrayConfig
from kaleido.hw.inputs.profile import Profile
from kaleido.hw.outputs.requirements import SCOPES, first_reaching, measured_fractions, uniform_profile
from kaleido.hw.inputs.workloads import get_workload, workload_names

ROOT = Path(__file__).resolve().parent.parent
MEASURED = ROOT / "src" / "kaleido" / "assets" / "profiles" / "tiny_wan_default.json"
COMPARE = ROOT / "docs" / "results" / "compare"
SHARES = np.linspace(0.0, 1.0, 11)
#: the paper's figures (its abstract): speedup over AdapTiV/EXION-class designs, over an A100, energy vs an A100
PAPER = {"over_design": 5.9, "over_a100": 6.6, "energy_vs_a100": 16.0}
TARGETS = ("5.9x over AdapTiV-class", "5.9x over EXION-class", "6.6x over A100, iso-peak", "6.6x over A100, iso-power",
           "16x energy vs A100")


def baseline_speedups(names: list[str]) -> dict[str, dict[str, float]]:
    """Replayed speedup over the dense array (cycles) of the AdapTiV- and EXION-class designs, per workload."""
    from kaleido.compare.analysis import aggregate, load_rows
    from kaleido.hw.designs.baseline_replay import BaselineProfile, replay
    from kaleido.report.accel import design_rows

    rows = load_rows(COMPARE)
    _, base = design_rows(rows, aggregate(rows))
    out: dict[str, dict[str, float]] = {}
    for name in names:
        wl = get_workload(name)
        out[name] = {}
        for method in ("adaptiv", "exion"):
            row = base.get(method)
            prof = None if row is None else row["report"].get("extra", {}).get("accel_profile")
            if prof is None:
                raise ValueError(f"{COMPARE}: no {method} row with a recorded trace; rerun the sweep "
                                 "(docs/baselines.md) before this benchmark")
            r = replay(wl, BaselineProfile.from_dict(prof, where=f"{method} row's accel_profile"), ArrayConfig())
            out[name][method] = r.dense_cycles / max(1.0, r.cycles)
    return out


@functools.lru_cache(maxsize=None)
def _preset(name: str):
    return chip_preset(name)


def _metrics(name: str, scope: str, full: float, partial: float) -> dict[str, float]:
    from kaleido.hw.designs.kaleido import simulate

    wl = get_workload(name, steps=1)  # a pooled profile: every ratio is the same for any step count
    prof = uniform_profile(wl, full, partial, scope)
    s = simulate(wl, prof, ArrayConfig()).summary()
    out = {"speedup_vs_dense_cycles": s["cycles"]["dense_array"] / s["cycles"]["kaleido[scheduler+matcher]"]}
    for preset in ("iso-peak-bf16", "iso-power"):
        p = _preset(preset)
        c = simulate(wl, prof, energy=p.energy, chip=p.chip).summary()["chip"]
        out[f"{preset}/vs_a100"] = c["vs_a100"]
        out[f"{preset}/energy_vs_a100"] = c["energy_vs_a100"]
    return out


def _sweep(args) -> dict:
    name, scope = args
    return {"workload": name, "scope": scope, "grid": [_metrics(name, scope, float(f), 0.0) for f in SHARES],
            "grid_partial": [_metrics(name, scope, 0.0, float(f)) for f in SHARES]}


def analyse(g: list[dict], base: dict[str, float]) -> dict:
    """Each target's required share on one grid (FULL or PARTIAL)."""

    def col(k):
        return [x[k] for x in g]

    sp = col("speedup_vs_dense_cycles")
    req = {
        TARGETS[0]: first_reaching(SHARES, [v / base["adaptiv"] for v in sp], PAPER["over_design"]),
        TARGETS[1]: first_reaching(SHARES, [v / base["exion"] for v in sp], PAPER["over_design"]),
        TARGETS[2]: first_reaching(SHARES, col("iso-peak-bf16/vs_a100"), PAPER["over_a100"]),
        TARGETS[3]: first_reaching(SHARES, col("iso-power/vs_a100"), PAPER["over_a100"]),
        TARGETS[4]: first_reaching(SHARES, col("iso-peak-bf16/energy_vs_a100"), PAPER["energy_vs_a100"]),
    }
    return {k: v.to_dict() | {"label": v.label()} for k, v in req.items()}


def figure(results: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 1, figsize=(12, 9), sharex=True)
    names = list(dict.fromkeys(r["workload"] for r in results))
    x = np.arange(len(names))
    marks = ["o", "s", "^", "v", "D"]
    for ax, scope in zip(axes, SCOPES):
        rs = {r["workload"]: r for r in results if r["scope"] == scope}
        ax.bar(x, [rs[n]["measured"]["full"] for n in names], color="0.8", label="measured FULL share (tiny_wan_default)")
        for j, t in enumerate(TARGETS):
            xs = x + (j - 2) * 0.12
            ys = [rs[n]["required"][t]["share"] for n in names]
            ok = [(a, b) for a, b in zip(xs, ys) if b is not None]
            no = [a for a, b in zip(xs, ys) if b is None]
            line = ax.scatter([a for a, _ in ok], [b for _, b in ok], marker=marks[j], label=f"needed for {t}")
            if no:
                ax.scatter(no, [1.08] * len(no), marker="x", color=line.get_facecolor()[0])
        ax.axhline(1.0, color="k", lw=0.5)
        ax.set_ylim(0, 1.15)
        ax.set_ylabel(f"FULL share ({scope})")
        ax.set_title(f"reuse {'on every op but P.V' if scope == 'all' else 'on attention q.k^T only'}: "
                     "required (markers; x at the top = unreachable) vs measured (bars)")
    axes[-1].set_xticks(x, names, rotation=45, ha="right")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, ncol=3, loc="lower center")
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    with open_atomic(path, "wb") as f:
        fig.savefig(f, format="png", dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workloads", default="all")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json")
    ap.add_argument("--figure")
    a = ap.parse_args()
    names = workload_names() if a.workloads == "all" else a.workloads.split(",")
    base = baseline_speedups(names)
    measured = Profile.load(MEASURED)
    work = [(n, s) for n in names for s in SCOPES]
    with ProcessPoolExecutor(max_workers=max(1, a.jobs)) as ex:
        sweeps = list(ex.map(_sweep, work))
    results = []
    for sw in sweeps:
        wl = get_workload(sw["workload"])
        b = base[sw["workload"]]
        results.append({"workload": sw["workload"], "scope": sw["scope"], "baselines": b,
                        "measured": measured_fractions(measured, wl, sw["scope"]),
                        "required": analyse(sw["grid"], b), "required_partial": analyse(sw["grid_partial"], b),
                        "grid": sw["grid"], "grid_partial": sw["grid_partial"], "shares": SHARES.tolist()})
    for key, what in (("required", "FULL share needed (PARTIAL 0)"), ("required_partial", "PARTIAL share needed (FULL 0)")):
        print(f"\n{what}:\n")
        print("| workload | scope | measured FULL / PARTIAL | " + " | ".join(TARGETS) + " |")
        print("|---|---|---|" + "---|" * len(TARGETS))
        for r in results:
            m = r["measured"]
            print(f"| {r['workload']} | {r['scope']} | {m['full']:.2f} / {m['partial']:.2f} | "
                  + " | ".join(r[key][t]["label"] for t in TARGETS) + " |")
    print("\nreplayed design speedups over the dense array: "
          + "; ".join(f"{n} AdapTiV {b['adaptiv']:.2f}x, EXION {b['exion']:.2f}x" for n, b in base.items()))
    if a.json:
        write_atomic(a.json, json.dumps(results, indent=1, default=float))
    if a.figure:
        Path(a.figure).parent.mkdir(parents=True, exist_ok=True)
        figure(results, a.figure)


if __name__ == "__main__":
    main()
