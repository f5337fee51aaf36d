"""Side by side with the real SCALE-Sim v3 (PyPI ``scalesim==3.0.0``): os / ws / is, CALC and USER bandwidth.

SCALE-Sim is never a dependency of this project.  This script installs it into a
throwaway virtual environment (``--venv``, default ``/tmp/ssim3``; ``numpy<2.4`` is
pinned there because v3.0.0 as published fails with numpy 2.4 inside
``double_buffered_scratchpad_mem.py``), runs every case in that interpreter (a worker
process: ``--worker`` reads cases as JSON on stdin), and compares here::

    python benchmarks/validate_scalesim.py                       # install if needed, run, compare
    python benchmarks/validate_scalesim.py --write-table tests/hw/arch/data/scalesim_v3.json
    python benchmarks/validate_scalesim.py --table tests/hw/arch/data/scalesim_v3.json --markdown   # docs tables

Cases: dense GEMMs (``Layer, M, N, K`` topology, ``-i gemm``; v3 also wants a layout
file, passed as ``-l``) on small arrays -

* ``CALC`` (``InterfaceBandwidth: CALC``, 64 KiB buffers): stall-free.  Compared with
  :func:`kaleido.hw.arch.compute.dense_cycles` and :func:`~kaleido.hw.arch.compute.scalesim_sram_counts`
  (``timing="scalesim_compat"``); they must be exact.
* ``USER`` (``InterfaceBandwidth: USER``, ``bw`` words per cycle on each of the ifmap,
  filter and ofmap ports: v3.0.0 takes the ifmap / filter port widths from the
  ``[layout]`` section's ``*SRAMBankBandwidth`` and the ofmap one from ``Bandwidth``,
  so all three are set; 1 KiB ifmap / filter and 4 KiB (or 1 KiB) ofmap buffers, so
  operands refill): compared with :func:`kaleido.hw.arch.memory.bandwidth_stalls` in
  ``scalesim_compat`` timing (``model="scalesim_v3"``, v3's refill accounting), and,
  in the ``phys`` column, with its ``model="physical"`` double-buffer model on the
  same fold schedule (how far v3's re-fetches are from a plain double buffer).

Printed per case: total cycles (v3's ``Total Cycles``: compute + stalls, the first
buffer load excluded; its ``Total Cycles (incl. prefetch)`` goes to the table too),
stall cycles, SRAM ifmap/filter reads and ofmap writes, DRAM ifmap/filter reads and
ofmap writes, v3's and ours.  ``--write-table`` stores v3's raw outputs (with the
version and the case list) for ``tests/hw/arch/test_scalesim_reference.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace

SCALESIM = "scalesim==3.0.0"
NUMPY_PIN = "numpy<2.4"

CFG = """[general]
run_name = v3

[architecture_presets]
ArrayHeight:    {R}
ArrayWidth:     {C}
IfmapSramSzkB:    {ikb}
FilterSramSzkB:   {fkb}
OfmapSramSzkB:    {okb}
IfmapOffset:    0
FilterOffset:   10000000
OfmapOffset:    20000000
Dataflow : {df}
Bandwidth : {bw}
ReadRequestBuffer: 32
WriteRequestBuffer: 32

[layout]
IfmapCustomLayout: False
IfmapSRAMBankBandwidth: {bw}
IfmapSRAMBankNum: 1
IfmapSRAMBankPort: 2
FilterCustomLayout: False
FilterSRAMBankBandwidth: {bw}
FilterSRAMBankNum: 1
FilterSRAMBankPort: 2

[sparsity]
SparsitySupport : false
SparseRep : ellpack_block
OptimizedMapping : false
BlockSize : 8
RandomNumberGeneratorSeed : 40

[run_presets]
InterfaceBandwidth: {mode}
UseRamulatorTrace: False
"""
LAYOUT = "Layer,a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q,r,s,t,\ng0,1,1,1,1,1,1,0,1,2,0,1,2,0,1,2,3,0,1,2,3,\n"
FLOWS = ("os", "ws", "is")


def cases() -> list[dict]:
    out = []
    for M, K, N in [(16, 8, 12), (37, 20, 9), (64, 64, 64), (100, 33, 70)]:
        for R, C in [(8, 8), (16, 4)]:
            for df in FLOWS:
                out.append(dict(M=M, K=K, N=N, R=R, C=C, df=df, mode="CALC", bw=10, ikb=64, fkb=64, okb=64))
    for df in FLOWS:
        out.append(dict(M=128, K=48, N=96, R=32, C=32, df=df, mode="CALC", bw=10, ikb=64, fkb=64, okb=64))
    for M, K, N, R, C in [(200, 24, 20, 8, 8), (300, 16, 16, 16, 16), (256, 16, 32, 8, 8), (64, 64, 64, 8, 8)]:
        for df in FLOWS:
            for bw in (2, 8):
                out.append(dict(M=M, K=K, N=N, R=R, C=C, df=df, mode="USER", bw=bw, ikb=1, fkb=1, okb=4))
    # a 1 KiB ofmap buffer, so that partial-sum writes (ws, is) stall too
    for M, K, N, R, C in [(128, 48, 96, 16, 16), (100, 33, 70, 16, 4)]:
        for df in FLOWS:
            for bw in (1, 4):
                out.append(dict(M=M, K=K, N=N, R=R, C=C, df=df, mode="USER", bw=bw, ikb=1, fkb=1, okb=1))
    return out


# ------------------------------------------------------------------ worker (v3's interpreter)

def _run_v3(case: dict, wd: str) -> dict:
    from scalesim.scale_sim import scalesim

    cfg, topo, lay = (os.path.join(wd, n) for n in ("c.cfg", "t.csv", "l.csv"))
    with open(cfg, "w") as f:
        f.write(CFG.format(**case))
    with open(topo, "w") as f:
        f.write("Layer, M, N, K,\ng0, %d, %d, %d,\n" % (case["M"], case["N"], case["K"]))
    with open(lay, "w") as f:
        f.write(LAYOUT)
    out = os.path.join(wd, "out")
    with contextlib.redirect_stdout(io.StringIO()):
        sim = scalesim(save_disk_space=True, verbose=False, config=cfg, topology=topo, layout=lay, input_type_gemm=True)
        sim.run_scale(top_path=out)
    rows = {}
    for name in ("COMPUTE_REPORT", "DETAILED_ACCESS_REPORT"):
        with open(os.path.join(out, "v3", name + ".csv")) as f:
            r = list(csv.reader(f))
        rows[name] = dict(zip([h.strip() for h in r[0]], [x.strip() for x in r[1]]))
    c, d = rows["COMPUTE_REPORT"], rows["DETAILED_ACCESS_REPORT"]
    i = lambda x: int(float(x))  # noqa: E731
    return {
        "total_cycles_incl_prefetch": i(c["Total Cycles (incl. prefetch)"]), "total_cycles": i(c["Total Cycles"]),
        "stall_cycles": i(c["Stall Cycles"]),
        "sram_ifmap_reads": i(d["SRAM IFMAP Reads"]), "sram_filter_reads": i(d["SRAM Filter Reads"]),
        "sram_ofmap_writes": i(d["SRAM OFMAP Writes"]),
        "dram_ifmap_reads": i(d["DRAM IFMAP Reads"]), "dram_filter_reads": i(d["DRAM Filter Reads"]),
        "dram_ofmap_writes": i(d["DRAM OFMAP Writes"]),
    }


def worker() -> int:
    todo = json.load(sys.stdin)
    res = []
    with tempfile.TemporaryDirectory() as wd:
        for case in todo:
            t = time.perf_counter()
            v3 = _run_v3(case, wd)
            res.append({**case, "v3": v3, "v3_seconds": round(time.perf_counter() - t, 3)})
    json.dump(res, sys.stdout)
    return 0


def ensure_venv(venv: str) -> str:
    py = os.path.join(venv, "bin", "python")
    probe = [py, "-c", "import importlib.metadata as m; assert m.version('scalesim') == '3.0.0'"]
    if os.path.exists(py) and subprocess.run(probe, capture_output=True).returncode == 0:
        return py
    print(f"installing {SCALESIM} ({NUMPY_PIN}) into {venv} ...", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    subprocess.run([py, "-m", "pip", "install", "-q", SCALESIM, NUMPY_PIN], check=True)
    return py


# ------------------------------------------------------------------ comparison (this project's interpreter)

def ours(case: dict) -> dict:
    """Our model's figures for one case, in v3's report fields."""
    from kaleido.hw.arch.compute import dense_cycles, scalesim_sram_counts
    from kaleido.hw.arch.config import ArrayConfig, BufferConfig
    from kaleido.hw.arch.memory import bandwidth_stalls

    bufs = BufferConfig(ifmap_kib=case["ikb"], filter_kib=case["fkb"], ofmap_kib=case["okb"])
    cfg = ArrayConfig(case["R"], case["C"], dataflow=case["df"], timing="scalesim_compat", buffers=bufs)
    M, K, N = case["M"], case["K"], case["N"]
    sram = scalesim_sram_counts(M, K, N, cfg)
    if case["mode"] == "USER":
        b = bandwidth_stalls(M, K, N, cfg, words_per_cycle=case["bw"])
        pb = bandwidth_stalls(M, K, N, cfg, words_per_cycle=case["bw"], model="physical")
        phys, phys_reads = pb.total_cycles, (pb.dram_words["ifmap"], pb.dram_words["filter"])
    else:  # CALC: v3 sizes the read ports so that nothing stalls; its ofmap port is C words wide
        b = bandwidth_stalls(M, K, N, cfg, words_per_cycle=1e5, model="physical")
        assert b.total_cycles == dense_cycles(M, K, N, cfg)
        phys, phys_reads = b.total_cycles, (b.dram_words["ifmap"], b.dram_words["filter"])
        of = bandwidth_stalls(M, K, N, cfg, words_per_cycle=case["C"], model="scalesim_v3").dram_words["ofmap"]
        b = replace(b, dram_words={**b.dram_words, "ofmap": of})
    return {"physical_total_cycles": phys, "physical_dram_reads": phys_reads,
        "total_cycles": b.total_cycles, "stall_cycles": b.stall_cycles,
        "sram_ifmap_reads": sram["ifmap_reads"], "sram_filter_reads": sram["filter_reads"],
        "sram_ofmap_writes": sram["ofmap_writes"],
        "dram_ifmap_reads": b.dram_words["ifmap"], "dram_filter_reads": b.dram_words["filter"],
        "dram_ofmap_writes": b.dram_words["ofmap"], "total_cycles_incl_prefetch": b.total_cycles_incl_prefetch,
    }


def compare(rows: list[dict]) -> int:
    keys = ("total_cycles", "stall_cycles", "sram_ifmap_reads", "sram_filter_reads", "sram_ofmap_writes")
    dram = ("dram_ifmap_reads", "dram_filter_reads", "dram_ofmap_writes")
    hdr = (f"{'mode':4} {'df':2} {'M x K x N':>11} {'array':>5} {'bw':>3} | {'v3 total':>8} {'ours':>8} {'err%':>6} | "
           f"{'v3 stall':>8} {'ours':>7} | {'phys':>6} {'err%':>6} | {'v3 incl':>7} {'ours':>7} | "
           "SRAM if/fl/of v3 = ours | DRAM if/fl/of v3 ; ours")
    print(hdr)
    worst, exact = {}, {}
    bad_calc = 0
    for r in rows:
        v, o = r["v3"], ours(r)
        err = 100.0 * (o["total_cycles"] - v["total_cycles"]) / v["total_cycles"]
        incl = "-" if o["total_cycles_incl_prefetch"] is None else f"{o['total_cycles_incl_prefetch']:.0f}"
        sram_ok = all(o[k] == v[k] for k in keys[2:])
        if r["mode"] == "CALC":
            bad_calc += not (sram_ok and o["total_cycles"] == v["total_cycles"] and v["stall_cycles"] == 0)
        key = (r["mode"], r["df"])
        worst[key] = max(worst.get(key, 0.0), abs(err))
        n_ok, n = exact.get(key, (0, 0))
        same = o["total_cycles"] == v["total_cycles"] and o["stall_cycles"] == v["stall_cycles"]
        if r["mode"] == "CALC":
            same = same and all(o[k] == v[k] for k in dram)
        else:
            same = same and o["total_cycles_incl_prefetch"] == v["total_cycles_incl_prefetch"] and all(
                o[k] == v[k] for k in dram)
        exact[key] = (n_ok + same, n + 1)
        print(f"{r['mode']:4} {r['df']:2} {r['M']:>3}x{r['K']:>3}x{r['N']:>3} {r['R']:>2}x{r['C']:<2} "
              f"{r['bw'] if r['mode'] == 'USER' else '-':>3} | {v['total_cycles']:>8} {o['total_cycles']:>8.0f} {err:>+6.1f} | "
              f"{v['stall_cycles']:>8} {o['stall_cycles']:>7.0f} | {o['physical_total_cycles']:>6.0f} "
              f"{100.0 * (o['physical_total_cycles'] - v['total_cycles']) / v['total_cycles']:>+6.1f} | "
              f"{v['total_cycles_incl_prefetch']:>7} "
              f"{incl:>7} | "
              f"{'exact' if sram_ok else 'DIFFER':>5} {v['sram_ifmap_reads']}/{v['sram_filter_reads']}/{v['sram_ofmap_writes']} | "
              + "/".join(str(v[k]) for k in dram) + " ; " + "/".join(f"{o[k]:.0f}" for k in dram))
    print()
    for (mode, df), e in sorted(worst.items()):
        n_ok, n = exact[(mode, df)]
        what = "total, stall, incl.-prefetch cycles and DRAM counts" if mode == "USER" else "total and stall cycles, DRAM counts"
        print(f"{mode} {df}: {what} exact in {n_ok}/{n} cases, worst |total-cycle error| {e:.2f}%")
    print(f"CALC (stall-free) cases not exact: {bad_calc}")
    return 1 if bad_calc else 0


def markdown(rows: list[dict]) -> None:
    """The side-by-side tables of docs/hardware.md, from the same rows."""
    print("| flow | M x K x N | array | total cycles v3 = ours | stalls | SRAM ifmap / filter / ofmap (v3 = ours) "
          "| DRAM ifmap / filter / ofmap (v3 = ours) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        if r["mode"] != "CALC":
            continue
        v, o = r["v3"], ours(r)
        eq = lambda k: f"{v[k]:,}" if o[k] == v[k] else f"{v[k]:,} (ours {o[k]:,.0f})"  # noqa: E731
        print(f"| {r['df']} | {r['M']}x{r['K']}x{r['N']} | {r['R']}x{r['C']} | {eq('total_cycles')} | {eq('stall_cycles')} | "
              f"{eq('sram_ifmap_reads')} / {eq('sram_filter_reads')} / {eq('sram_ofmap_writes')} | "
              f"{eq('dram_ifmap_reads')} / {eq('dram_filter_reads')} / {eq('dram_ofmap_writes')} |")
    print()
    print("| flow | M x K x N | array | ofmap KiB | bw | total cycles v3 / ours | stall cycles v3 / ours "
          "| incl. prefetch v3 / ours | DRAM ifmap / filter / ofmap, v3 = ours | `physical`: total (vs v3), DRAM reads |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["mode"] != "USER":
            continue
        v, o = r["v3"], ours(r)
        pair = lambda a, b: f"{a:,} / {b:,.0f}"  # noqa: E731
        dram = " / ".join(f"{v[k]:,}" + ("" if o[k] == v[k] else f" ({o[k]:,.0f})")
                          for k in ("dram_ifmap_reads", "dram_filter_reads", "dram_ofmap_writes"))
        phys = o["physical_total_cycles"]
        print(f"| {r['df']} | {r['M']}x{r['K']}x{r['N']} | {r['R']}x{r['C']} | {r['okb']} | {r['bw']} | "
              f"{pair(v['total_cycles'], o['total_cycles'])} | {pair(v['stall_cycles'], o['stall_cycles'])} | "
              f"{pair(v['total_cycles_incl_prefetch'], o['total_cycles_incl_prefetch'])} | {dram} | "
              f"{phys:,.0f} ({100.0 * (phys - v['total_cycles']) / v['total_cycles']:+.0f}%), "
              f"{o['physical_dram_reads'][0]:,.0f} / {o['physical_dram_reads'][1]:,.0f} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", action="store_true", help="run the cases on stdin with SCALE-Sim (its interpreter)")
    ap.add_argument("--venv", default="/tmp/ssim3", help="throwaway venv holding scalesim 3.0.0")
    ap.add_argument("--table", help="compare against a stored table instead of running SCALE-Sim")
    ap.add_argument("--write-table", help="write SCALE-Sim's raw outputs to this JSON file")
    ap.add_argument("--markdown", action="store_true", help="print the tables of docs/hardware.md instead")
    a = ap.parse_args()
    if a.worker:
        return worker()
    if a.table:
        with open(a.table) as f:
            rows = json.load(f)["cases"]
    else:
        py = ensure_venv(a.venv)
        t = time.perf_counter()
        p = subprocess.run([py, os.path.abspath(__file__), "--worker"], input=json.dumps(cases()),
                           capture_output=True, text=True, check=True)
        rows = json.loads(p.stdout)
        print(f"SCALE-Sim v3.0.0 ran {len(rows)} cases in {time.perf_counter() - t:.0f} s", file=sys.stderr)
        if a.write_table:
            table = {"scalesim": SCALESIM, "numpy": NUMPY_PIN,
                     "command": "python benchmarks/validate_scalesim.py --write-table " + a.write_table,
                     "fields": "v3: COMPUTE_REPORT / DETAILED_ACCESS_REPORT of one GEMM layer (words of 1 byte)",
                     "cases": rows}
            with open(a.write_table, "w") as f:
                json.dump(table, f, indent=1)
                f.write("\n")
    if a.markdown:
        markdown(rows)
        return 0
    return compare(rows)


if __name__ == "__main__":
    sys.exit(main())
