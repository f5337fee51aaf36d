"""docs/hardware.md §12's tables: every chip preset against the A100 on all 14 workloads, from one command.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/chip_tables.py [--workloads all] [--json OUT]

Profile: the shipped MEASURED ``tiny_wan_default`` (7-bit PARTIAL multiplier, carried to
each workload by the documented rule), pooled over its steps (``--per-step`` keeps its
per-step statistics; docs/hardware.md §12 says how far that moves the figures).  Array:
128x128 WS at 1 GHz with the default buffers; each preset's chip shares the A100's
HBM2e (:mod:`kaleido.hw.chip_presets`).  The A100 runs bf16 (the precision these models
run in).  Every number is a ``kaleido.hw.simulate`` result; nothing is typed in.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kaleido.atomic import write_atomic
from kaleido.hw.chip_presets import PRESETS, chip_preset
from kaleido.hw.arch.config import ArrayConfig
from kaleido.hw.inputs.profile import OpProfile, Profile
from kaleido.hw.designs.kaleido import DESIGN_LEVEL, simulate
from kaleido.hw.inputs.workloads import get_workload, workload_names

ROOT = Path(__file__).resolve().parent.parent
MEASURED = ROOT / "src" / "kaleido" / "assets" / "profiles" / "tiny_wan_default.json"


def pooled(p: Profile) -> Profile:
    """``p`` with its per-step statistics dropped (every step takes the pooled statistics)."""
    ops = {k: None if e is None else OpProfile(e.stats, [], e.axes, e.window_full, e.decided)
           for k, e in p.ops.items()}
    return Profile(p.model, p.grid, ops, p.label + " (pooled over steps)", p.source)


def rows(prof: Profile, names: list[str], preset: str) -> tuple[dict, list[dict]]:
    pre = chip_preset(preset, ArrayConfig(low_bits=7))
    out = []
    for name in names:
        r = simulate(get_workload(name), prof, energy=pre.energy, transfer=True, chip=pre.chip)
        s = r.summary()
        out.append({"workload": name, "time_s": s["time_s"], "speedup_vs_dense_chip": s["speedup"]["vs_dense_array"],
                    "energy_vs_dense_chip": s["energy_savings"]["vs_dense_array"], **s["chip"],
                    "utilisation": s["utilisation"][DESIGN_LEVEL], "dense_utilisation": s["utilisation"]["dense_array"]})
    return pre.to_dict(), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workloads", default="all")
    ap.add_argument("--presets", default=",".join(PRESETS))
    ap.add_argument("--per-step", action="store_true", help="keep the profile's per-step statistics")
    ap.add_argument("--json", help="also write every figure here")
    a = ap.parse_args()
    names = workload_names() if a.workloads == "all" else a.workloads.split(",")
    prof = Profile.load(MEASURED)
    if not a.per_step:
        prof = pooled(prof)
    res = {}
    for preset in a.presets.split(","):
        info, tab = rows(prof, names, preset)
        res[preset] = {"preset": info, "rows": tab}
        c = info["chip"]
        print(f"\n**{preset}**: {c['arrays']} arrays ({info['derivation']}), {c['peak_tops_int8']:.0f} int8 TOPS, "
              f"{c['dram_gbps']:.0f} GB/s shared; per array {info['array_dynamic_w']:.2f} W dynamic at full load + "
              f"{info['array_static_w']:.2f} W static; DRAM interface {info['dram_interface_w']:.1f} W at full bandwidth\n")
        print("| workload | Kaleido chip | dense chip | A100 bf16 | speedup vs dense chip | vs A100 | energy vs A100 "
              "| avg power (W) | PE util. | DRAM-bound share |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for t in tab:
            ts = t["time_s"]
            print(f"| {t['workload']} | {ts['kaleido']:.3g} s | {ts['dense_array']:.3g} s | {ts['a100']:.3g} s | "
                  f"{t['speedup_vs_dense_chip']:.2f}x | {t['vs_a100']:.2f}x | {t['energy_vs_a100']:.1f}x | "
                  f"{t['average_power_w']:.0f} | {100 * t['utilisation']:.1f}% | {100 * t['dram_bound_share_of_time']:.0f}% |")
    if a.json:
        write_atomic(a.json, json.dumps(res, indent=1, default=float))


if __name__ == "__main__":
    main()
