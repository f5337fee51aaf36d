"""Cross-check ``scalesim_compat`` against the real SCALE-Sim v2 (optional, not a test).

SCALE-Sim is not a dependency of this project.  To run this check, install it in a
separate virtual environment (``python -m venv /tmp/ssim && /tmp/ssim/bin/pip install
"scalesim<3"``) and run this script with that interpreter, with ``src/`` on the path::

    PYTHONPATH=src /tmp/ssim/bin/python benchmarks/validate_scalesim.py

It runs small GEMMs through SCALE-Sim v2 (stall-free: ``InterfaceBandwidth: CALC``) on
both dataflows and compares its total cycles, stall cycles, and SRAM ifmap/filter reads
and ofmap writes with :func:`kaleido.hw.compute.dense_cycles` and
:func:`kaleido.hw.compute.scalesim_sram_counts`, and prints how long each took.
"""

from __future__ import annotations

import csv
import itertools
import os
import sys
import tempfile
import time

from kaleido.hw.compute import dense_cycles, scalesim_sram_counts
from kaleido.hw.config import ArrayConfig

CFG = """[general]
run_name = check

[architecture_presets]
ArrayHeight:    {R}
ArrayWidth:     {C}
IfmapSramSzkB:    1024
FilterSramSzkB:   1024
OfmapSramSzkB:    1024
IfmapOffset:    0
FilterOffset:   10000000
OfmapOffset:    20000000
Dataflow : {df}
Bandwidth : 10

[run_presets]
InterfaceBandwidth: CALC
"""


def run_scalesim(M, K, N, R, C, df, workdir):
    from scalesim.scale_sim import scalesim

    cfg = os.path.join(workdir, "c.cfg")
    topo = os.path.join(workdir, "t.csv")
    with open(cfg, "w") as f:
        f.write(CFG.format(R=R, C=C, df=df))
    with open(topo, "w") as f:
        f.write("Layer, M, N, K,\ng0, %d, %d, %d,\n" % (M, N, K))
    out = os.path.join(workdir, "out")
    sim = scalesim(save_disk_space=True, verbose=False, config=cfg, topology=topo, input_type_gemm=True)
    t = time.perf_counter()
    sim.run_scale(top_path=out)
    dt = time.perf_counter() - t
    rows = {}
    for name in ("COMPUTE_REPORT", "DETAILED_ACCESS_REPORT"):
        with open(os.path.join(out, "check", name + ".csv")) as f:
            r = list(csv.reader(f))
            rows[name] = dict(zip([h.strip() for h in r[0]], [x.strip() for x in r[1]]))
    c, d = rows["COMPUTE_REPORT"], rows["DETAILED_ACCESS_REPORT"]
    return {
        "cycles": int(float(c["Total Cycles"])), "stalls": int(float(c["Stall Cycles"])),
        "ifmap_reads": int(float(d["SRAM IFMAP Reads"])), "filter_reads": int(float(d["SRAM Filter Reads"])),
        "ofmap_writes": int(float(d["SRAM OFMAP Writes"])),
    }, dt


def main() -> int:
    shapes = [(16, 8, 12), (37, 20, 9), (64, 64, 64), (100, 33, 70), (128, 48, 96)]
    arrays = [(8, 8), (16, 4), (32, 32)]
    bad = 0
    with tempfile.TemporaryDirectory() as wd:
        for (M, K, N), (R, C), df in itertools.product(shapes, arrays, ("os", "ws")):
            ref, dt = run_scalesim(M, K, N, R, C, df, wd)
            cfg = ArrayConfig(R, C, dataflow=df, timing="scalesim_compat")
            t = time.perf_counter()
            ours = {"cycles": int(dense_cycles(M, K, N, cfg)), "stalls": 0, **scalesim_sram_counts(M, K, N, cfg)}
            dt_ours = time.perf_counter() - t
            ok = ours == ref
            bad += not ok
            print(f"{df} {M}x{K}x{N} on {R}x{C}: {'match' if ok else 'DIFFER'}  scalesim {ref}  ours {ours}  "
                  f"({dt * 1e3:.0f} ms vs {dt_ours * 1e6:.0f} us)")
    print(f"{bad} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
