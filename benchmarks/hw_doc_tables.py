"""Markdown tables of docs/hardware.md §9 / §9a from the JSON of `kaleido simulate -w all ... --json`.

    kaleido simulate -w all --profile example --transfer --json > /tmp/example.json
    python benchmarks/hw_doc_tables.py /tmp/example.json [--components hunyuan-720p]
    python benchmarks/hw_doc_tables.py /tmp/example.json --area

Prints one row per workload (every figure read from the JSON) and, with
``--components``, that workload's energy by component (kJ); ``--area`` prints the §13 area and
iso-area table instead.
"""

from __future__ import annotations

import argparse
import json


def _t(s: float) -> str:
    return f"{s:.0f} s"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("json")
    p.add_argument("--components", help="workload whose energy by component to print")
    p.add_argument("--short", action="store_true", help="the §9a columns (no times)")
    p.add_argument("--area", action="store_true", help="the §13 columns: area and the iso-area dense array")
    a = p.parse_args()
    text = open(a.json).read()
    data = json.loads(text[text.index("{"):])  # the CLI may print a note line before the JSON
    for name, r in data.items():
        s = r["summary"]
        u = s["utilisation"]
        util = f"{100 * u['none']:.1f} / {100 * u['scheduler']:.1f} / {100 * u['scheduler+matcher']:.1f}%"
        sp, es = s["speedup"], s["energy_savings"]
        if a.area:
            ar, iso = s["area_mm2"], s["iso_area"]
            print(f"| {name} | {r['array']['low_bits']} | {ar['kaleido']['anchor_store_mm2']:.2f} | "
                  f"{ar['kaleido']['total_mm2']:.2f} | {ar['dense_array']['total_mm2']:.2f} | "
                  f"{ar['kaleido_over_dense']:.2f}x | {iso['rows']} x {iso['cols']} ({iso['pes']:,}) | "
                  f"{sp['vs_dense_array']:.2f}x | {iso['speedup_vs_dense_iso_area']:.2f}x |")
        elif a.short:
            print(f"| {name} | {sp['vs_dense_array']:.2f}x | {sp['vs_a100_raw']:.2f}x | {sp['vs_a100_iso_peak']:.2f}x | "
                  f"{es['vs_dense_array']:.2f}x | {es['vs_a100']:.1f}x | {util} |")
        else:
            t = s["time_s"]
            print(f"| {name} | {_t(t['kaleido'])} | {_t(t['dense_array'])} | {_t(t['a100'])} | {sp['vs_dense_array']:.2f}x | "
                  f"{sp['vs_a100_raw']:.2f}x | {sp['vs_a100_iso_peak']:.2f}x | {es['vs_dense_array']:.2f}x | "
                  f"{es['vs_a100']:.1f}x | {util} ({100 * u['dense_array']:.1f}%) |")
    if a.components:
        c = data[a.components]["summary"]["energy_by_component_j"]
        print()
        print("| component | Kaleido | dense array |")
        print("|---|---|---|")
        for k in c["kaleido"]:
            kv, dv = c["kaleido"][k] / 1e3, c["dense_array"][k] / 1e3
            print(f"| {k} | {kv:.3g} | {dv:.3g} |")
        m = data[a.components]["summary"]["macs"]
        print(f"\nOf the dense MACs, {100 * m['mac8'] / m['dense']:.0f}% run at 8x8, "
              f"{100 * m['mac_low'] / m['dense']:.0f}% at low bits and {100 * m['skipped'] / m['dense']:.0f}% are skipped.")


if __name__ == "__main__":
    main()
