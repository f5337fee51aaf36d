"""Tables, JSON/CSV files and plots from :class:`~kaleido.hw.designs.kaleido.SimResult` objects (Kaleido, its dense
reference and the A100), and a table of a baseline's :class:`~kaleido.hw.designs.replay.ReplayResult`.

Every number printed or plotted is read from the results; nothing is typed twice.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from kaleido.atomic import open_atomic, write_atomic

from ..arch.dispatcher import LEVELS
from ..designs.replay import ReplayResult
from ..designs.kaleido import DESIGN_LEVEL, SimResult


def _fmt_time(s: float) -> str:
    return f"{s:.3g} s" if s < 3600 else f"{s / 3600:.3g} h"


def summary_tables(r: SimResult):
    """Rich tables: headline comparison, energy by component, utilisation, per op kind."""
    from rich.table import Table

    s = r.summary()
    w = r.workload
    head = Table(title=f"{w['name']}: grid {'x'.join(map(str, w['grid_thw']))} = {w['n_video_tokens']:,} video tokens, "
                       f"{w['steps']} steps x {w['cfg_passes']} pass(es); array {r.array['rows']}x{r.array['cols']} "
                       f"{r.array['dataflow']} @ {r.array['clock_ghz']} GHz"
                       + ("" if r.chip is None else f"; chip {r.chip['name']}: {r.chip['arrays']} arrays sharing "
                                                    f"{r.chip['dram_gbps']:.0f} GB/s DRAM"))
    area = s.get("area_mm2")

    def mm2(which: str) -> str:
        return "-" if area is None else f"{area[which]['total_mm2']:.2f}"

    for c in ("system", "time", "cycles", "PE utilisation", "energy (J)", "area (mm^2)", "speedup of Kaleido",
              "energy saving of Kaleido"):
        head.add_column(c, justify="right" if c != "system" else "left")
    head.add_row("Kaleido", _fmt_time(s["time_s"]["kaleido"]), f"{s['cycles'][f'kaleido[{DESIGN_LEVEL}]']:.4g}",
                 f"{100 * s['utilisation'][DESIGN_LEVEL]:.1f}%", f"{s['energy_j']['kaleido']:.4g}", mm2("kaleido"),
                 "1.00x", "1.00x")
    head.add_row("dense array", _fmt_time(s["time_s"]["dense_array"]), f"{s['cycles']['dense_array']:.4g}",
                 f"{100 * s['utilisation']['dense_array']:.1f}%", f"{s['energy_j']['dense_array']:.4g}",
                 mm2("dense_array"), f"{s['speedup']['vs_dense_array']:.2f}x",
                 f"{s['energy_savings']['vs_dense_array']:.2f}x")
    iso_a = s.get("iso_area")
    if iso_a is not None:
        head.add_row(f"dense array, iso-area ({iso_a['rows']}x{iso_a['cols']})", _fmt_time(iso_a["time_s"]), "-", "-",
                     "-", mm2("kaleido"), f"{iso_a['speedup_vs_dense_iso_area']:.2f}x", "-")
    head.add_row(f"A100 ({r.a100.precision}, raw)", _fmt_time(s["time_s"]["a100"]), "-", "-",
                 f"{s['energy_j']['a100']:.4g}", "-", f"{s['speedup']['vs_a100_raw']:.2f}x",
                 f"{s['energy_savings']['vs_a100']:.2f}x")
    head.add_row("A100 vs iso-peak Kaleido", "-", "-", "-", "-", "-", f"{s['speedup']['vs_a100_iso_peak']:.2f}x", "-")
    nz = s["normalisation"]
    who = (f"one {nz['array_peak_tops_int8']:.1f}-TOPS array" if r.chip is None else
           f"the {r.chip['peak_tops_int8']:.0f}-TOPS chip ({r.chip['arrays']} arrays; 'dense array' = the same chip dense)")
    head.caption = (f"raw: {who} vs one A100; iso-peak: Kaleido's compute "
                    f"time / {nz['iso_peak_factor']:.2f} (A100 {nz['a100_precision']} peak {nz['a100_peak_tops']:.0f} "
                    f"TOPS / {'array' if r.chip is None else 'chip'} int8 peak), DRAM time not scaled"
                    + ("" if area is None else "; area: one array with its buffers at 16 nm (synthesised PEs and "
                       "dispatcher, CACTI SRAM)" + ("" if iso_a is None else f"; iso-area: a dense array of "
                       f"{iso_a['pes']:,} PEs in Kaleido's area, the same buffers")))

    en = Table(title="energy by component (J)")
    en.add_column("component")
    en.add_column("Kaleido", justify="right")
    en.add_column("dense array", justify="right")
    for k in s["energy_by_component_j"]["kaleido"]:
        en.add_row(k, f"{s['energy_by_component_j']['kaleido'][k]:.4g}", f"{s['energy_by_component_j']['dense_array'][k]:.4g}")

    ut = Table(title="PE utilisation by dispatcher level")
    ut.add_column("level")
    ut.add_column("cycles", justify="right")
    ut.add_column("utilisation", justify="right")
    ut.add_row("dense array", f"{s['cycles']['dense_array']:.4g}", f"{100 * s['utilisation']['dense_array']:.1f}%")
    for lv in LEVELS:
        ut.add_row(f"Kaleido, {lv}", f"{s['cycles'][f'kaleido[{lv}]']:.4g}", f"{100 * s['utilisation'][lv]:.1f}%")
    exposed = s["dispatcher_exposed_cycles"]
    by_lv = ", ".join(f"{lv} {v:.4g}" for lv, v in s["dispatcher_exposed_cycles_by_level"].items())
    ut.caption = (f"decision unit: cycles exposed per level {by_lv} "
                  f"({'all hidden behind the array' if exposed == 0 else 'not hidden at ' + DESIGN_LEVEL}), "
                  f"{s['energy_by_component_j']['kaleido']['dispatcher']:.3g} J"
                  + ("" if area is None else f", {area['kaleido']['dispatcher_mm2']:.4f} mm^2"))

    ops = Table(title="per op kind")
    for c in ("op", "dense MACs", "8x8", "low-bit", "skipped", "speedup vs dense (cycles)", "A100 time"):
        ops.add_column(c, justify="right" if c != "op" else "left")
    for op, d in r.by_op().items():
        m = max(1.0, d["macs"])
        ops.add_row(op, f"{d['macs']:.3g}", f"{100 * d['mac8'] / m:.0f}%", f"{100 * d['mac_low'] / m:.0f}%",
                    f"{100 * d['skipped'] / m:.0f}%", f"{d['speedup_vs_dense']:.2f}x", _fmt_time(d["a100_s"]))
    return [head, en, ut, ops]


def print_report(r: SimResult, console=None) -> None:
    from rich.console import Console

    console = console or Console()
    for t in summary_tables(r):
        console.print(t)
    for n in r.notes:
        console.print(f"[yellow]note:[/] {n}")


def write_json(results: dict[str, SimResult], path: Path, full: bool = False) -> None:
    data = {name: (r.to_dict() if full else {k: v for k, v in r.to_dict().items() if k != "gemms"})
            for name, r in results.items()}
    write_atomic(path, json.dumps(data, indent=1, default=float))


def write_csv(results: dict[str, SimResult], out_dir: Path) -> list[Path]:
    out_dir = Path(out_dir)
    summ = out_dir / "summary.csv"
    with open_atomic(summ, newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["workload", "kaleido_s", "dense_array_s", "a100_s", "speedup_vs_dense", "speedup_vs_a100_raw",
                     "speedup_vs_a100_iso_peak", "energy_kaleido_j", "energy_dense_j", "energy_a100_j",
                     "energy_saving_vs_dense", "energy_saving_vs_a100"] + [f"util_{lv}" for lv in ("dense_array", *LEVELS)]
                    + ["area_kaleido_mm2", "area_dense_mm2", "iso_area_dense_pes", "speedup_vs_dense_iso_area"])
        for name, r in results.items():
            s = r.summary()
            wr.writerow([name, s["time_s"]["kaleido"], s["time_s"]["dense_array"], s["time_s"]["a100"],
                         s["speedup"]["vs_dense_array"], s["speedup"]["vs_a100_raw"], s["speedup"]["vs_a100_iso_peak"],
                         s["energy_j"]["kaleido"], s["energy_j"]["dense_array"], s["energy_j"]["a100"],
                         s["energy_savings"]["vs_dense_array"], s["energy_savings"]["vs_a100"]]
                        + [s["utilisation"][lv] for lv in ("dense_array", *LEVELS)]
                        + ([s["area_mm2"]["kaleido"]["total_mm2"], s["area_mm2"]["dense_array"]["total_mm2"]]
                           if "area_mm2" in s else ["", ""])
                        + ([s["iso_area"]["pes"], s["iso_area"]["speedup_vs_dense_iso_area"]] if "iso_area" in s
                           else ["", ""]))
    per_op = out_dir / "per_op.csv"
    with open_atomic(per_op, newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["workload", "op", "macs", "mac8", "mac_low", "skipped", "dense_cycles", "kaleido_cycles",
                     "speedup_vs_dense", "a100_s"])
        for name, r in results.items():
            for op, d in r.by_op().items():
                wr.writerow([name, op, d["macs"], d["mac8"], d["mac_low"], d["skipped"], d["dense_cycles"],
                             d["kaleido_cycles"], d["speedup_vs_dense"], d["a100_s"]])
    return [summ, per_op]


def _save_png(fig, path: Path) -> Path:
    """Write ``fig`` to ``path`` atomically and close it."""
    import matplotlib.pyplot as plt

    with open_atomic(path, "wb") as f:
        fig.savefig(f, format="png", dpi=120)
    plt.close(fig)
    return path


def plot_all(results: dict[str, SimResult], out_dir: Path) -> list[Path]:
    """Bars per workload, utilisation per dispatcher level, and the 480p -> 720p trend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    out_dir = Path(out_dir)
    names = list(results)
    sums = {n: results[n].summary() for n in names}
    files = []

    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(names)), 4))
    x = np.arange(len(names))
    bars = [("vs dense array", [sums[n]["speedup"]["vs_dense_array"] for n in names]),
            ("vs A100 (iso-peak)", [sums[n]["speedup"]["vs_a100_iso_peak"] for n in names]),
            ("energy saving vs A100", [sums[n]["energy_savings"]["vs_a100"] for n in names])]
    wdt = 0.8 / len(bars)
    for i, (lab, vals) in enumerate(bars):
        ax.bar(x + (i - 1) * wdt, vals, wdt, label=lab)
    ax.set_xticks(x, names, rotation=30, ha="right")
    ax.set_ylabel("x (higher is better)")
    ax.set_title("Kaleido per workload")
    ax.legend()
    fig.tight_layout()
    files.append(_save_png(fig, out_dir / "speedup_per_workload.png"))

    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(names)), 4))
    levels = ("dense_array", *LEVELS)
    wdt = 0.8 / len(levels)
    for i, lv in enumerate(levels):
        ax.bar(x + (i - 1.5) * wdt, [100 * sums[n]["utilisation"][lv] for n in names], wdt, label=lv)
    ax.set_xticks(x, names, rotation=30, ha="right")
    ax.set_ylabel("PE utilisation (%)")
    ax.set_ylim(0, 105)
    ax.set_title("PE utilisation: no dispatcher / scheduler / scheduler + matcher")
    ax.legend(fontsize=8)
    fig.tight_layout()
    files.append(_save_png(fig, out_dir / "utilisation.png"))

    models = sorted({n.rsplit("-", 1)[0] for n in names if n.endswith(("480p", "720p"))})
    pairs = [m for m in models if f"{m}-480p" in results and f"{m}-720p" in results]
    if pairs:
        fig, ax = plt.subplots(figsize=(6, 4))
        for m in pairs:
            ax.plot(["480p", "720p"], [sums[f"{m}-{r}"]["speedup"]["vs_dense_array"] for r in ("480p", "720p")],
                    marker="o", label=m)
        ax.set_ylabel("speedup vs dense array")
        ax.set_title("480p -> 720p trend")
        ax.legend(fontsize=8)
        fig.tight_layout()
        files.append(_save_png(fig, out_dir / "trend_480p_720p.png"))
    return files


def replay_tables(r: ReplayResult, pes: int):
    """Rich tables of one replayed baseline: its figures against the dense array, and each input's origin."""
    from rich.table import Table

    head = Table(title=f"{r.workload}: {r.design}, replayed from a recorded {r.method} trace {r.settings or ''}")
    head.add_column("figure")
    head.add_column("value", justify="right")
    for name, value in (("cycles", f"{r.cycles:,.0f}"), ("dense array cycles", f"{r.dense_cycles:,.0f}"),
                        ("speedup vs dense array", f"{r.speedup_vs_dense:.3f}x"),
                        ("upper bound (no utilisation costs)", f"{r.dense_cycles / max(1.0, r.upper_bound_cycles):.3f}x"),
                        ("PE utilisation", f"{r.utilisation(pes):.1%}"), ("time (with DRAM)", _fmt_time(r.time_s)),
                        ("dense array time", _fmt_time(r.dense_time_s)),
                        ("energy: MACs", f"{r.mac_energy_j:.4g} J"), ("energy: DRAM", f"{r.dram_energy_j:.4g} J"),
                        ("energy: side units", f"{r.side_energy_j:.4g} J")):
        head.add_row(name, value)
    inputs = Table(title="inputs and where they come from")
    inputs.add_column("input")
    inputs.add_column("origin")
    for k, v in r.inputs.items():
        inputs.add_row(k, v)
    return head, inputs


def print_replay(r: ReplayResult, pes: int, console=None) -> None:
    from rich.console import Console

    console = console or Console()
    for t in replay_tables(r, pes):
        console.print(t)
    for n in r.notes:
        console.print(f"[yellow]note:[/] {n}")


def write_replay_json(results: dict[str, ReplayResult], pes: int, path: Path) -> None:
    write_atomic(path, json.dumps({name: r.to_dict(pes) for name, r in results.items()}, indent=1, default=float))
