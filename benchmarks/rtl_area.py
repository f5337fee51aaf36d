"""Synthesise the RTL (Yosys, transistor estimate) and write the 16 nm area table: docs/results/rtl_area.json.

    python benchmarks/rtl_area.py [--tile 16] [--out docs/results/rtl_area.json]

Designs: the dense and the Kaleido PE (for every PARTIAL width 1..7 bits; 4 in the
tile and the chip below) with the accumulator a 128-row chain
needs (17-bit products + log2(128) = 24 bits; wider sums across K-folds live in the ofmap
accumulator), each in the Yosys flow that maps it smallest (``synthesize_best``); dense
and Kaleido WS tiles of ``tile x tile`` such PEs in their PE's flow (the Kaleido tile with
three channel groups, as a RoPE head's q.k^T K-fold has); the dispatcher (scheduler +
matcher, three groups) for windows of 16 and 64 tokens. The 128 x 128 array is 16,384
stand-alone PEs: inside a small tile Yosys removes the adders of each chain's first row
(its partial sum is 0) and narrows short chains, which a 128-row array does not allow, so
the tile's per-PE figure is a cross-check, not the estimate. The dispatcher of the cost
model's window (half the ifmap buffer of K = 128 rows) is the 64-token logic plus its
next-pointer list as SRAM; the anchor store is the one :class:`kaleido.hw.arch.kaleido_pe.AnchorPlan`
sizes for Wan 2.1's self-attention at 480p and 720p. Every synthesis prints its time.

It also writes the figures the simulator prices area with, ``kaleido/assets/synthesis.json``
(:func:`kaleido.hw.arch.area.synthesis_figures`).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from kaleido.atomic import write_atomic
from kaleido.hw.arch.area import (LOGIC_SOURCE, SRAM_SOURCE, SYNTHESIS_FILE, dense_array_area, iso_area_pes,
                             kaleido_array_area, logic_mm2, pointer_list_kib, psum_bits, sram_mm2,
                             synthesis_figures)
from kaleido.hw.arch.config import ArrayConfig
from kaleido.hw.arch.kaleido_pe import AnchorPlan
from kaleido.hw.designs.kaleido import window_rows
from kaleido.hw.rtl.dispatcher import Dispatcher
from kaleido.hw.rtl.pe import DensePE, KaleidoPE
from kaleido.hw.rtl.synth import synthesize_best
from kaleido.hw.rtl.tile import DenseTile, KaleidoTile


def _groups(rows: int) -> tuple[int, int, int]:
    h = w = 2 * (rows // 6)
    return (rows - h - w, h, w)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tile", type=int, default=16)
    ap.add_argument("--out", default="docs/results/rtl_area.json")
    args = ap.parse_args()
    t0 = time.perf_counter()
    cfg = ArrayConfig()
    acc = psum_bits(cfg.rows)
    synth = {}

    def run(name, design, flows=None):
        r = synthesize_best(design, name) if flows is None else synthesize_best(design, name, flows)
        synth[name] = r.to_dict() | {"mm2_16nm": logic_mm2(r.transistors)}
        print(f"{name:22s} {r.cells:8d} cells {r.transistors:10d} transistors  flow {r.flow:9s} {r.seconds:6.1f} s",
              flush=True)
        return r

    d_pe = run("dense_pe", DensePE(acc))
    k_pes = {lb: run(f"kaleido_pe_lb{lb}", KaleidoPE(lb, acc)) for lb in range(1, 8)}
    k_pe = k_pes[4]
    run(f"dense_tile_{args.tile}", DenseTile(args.tile, args.tile, acc), (d_pe.flow,))
    run(f"kaleido_tile_{args.tile}", KaleidoTile(args.tile, args.tile, _groups(args.tile), 4, acc), (k_pe.flow,))
    run("dispatcher_w16", Dispatcher(16, 3, 4), ("default", "noalumacc"))
    run("dispatcher_w64", Dispatcher(64, 3, 4), ("default", "noalumacc"))
    n2 = args.tile ** 2
    pe_d, pe_k = float(d_pe.transistors), float(k_pe.transistors)
    tile_d = synth[f"dense_tile_{args.tile}"]["transistors"] / n2  # per PE, tile edge (skew, valid lines, taps) included
    tile_k = synth[f"kaleido_tile_{args.tile}"]["transistors"] / n2
    figures = {"acc_bits": acc, "dense_pe": synth["dense_pe"],
               "kaleido_pe": {str(lb): synth[f"kaleido_pe_lb{lb}"] for lb in k_pes},
               "dispatcher": synth["dispatcher_w64"] | {"window_tokens": 64}, "logic_source": LOGIC_SOURCE,
               "written_by": "benchmarks/rtl_area.py"}
    write_atomic(SYNTHESIS_FILE, json.dumps(figures, indent=1) + "\n")
    fig = synthesis_figures(SYNTHESIS_FILE)
    window = window_rows(cfg, 128)  # the cost model's dispatch window at K = 128 (a head's q.k^T)
    ptr_kib = pointer_list_kib(window)
    disp_tr = fig.dispatcher_transistors
    stores = {}
    for label, grid in (("wan_480p", (21, 30, 52)), ("wan_720p", (21, 45, 80))):
        plan = AnchorPlan(np.array([[0, 0, 1], [1, 0, 0], [1, 0, 0]], float), grid, (0, 0, 0), cfg.cols)
        stores[label] = float(plan.store_kib().max())
    buffers = (cfg.buffers.ifmap_kib, cfg.buffers.filter_kib, cfg.buffers.ofmap_kib)
    dense = dense_array_area(cfg.n_pes, buffers, fig)
    chips = {}
    for label, kib in stores.items():
        kal = kaleido_array_area(cfg.n_pes, buffers, fig, kib, window, 4)
        chips[label] = {"anchor_store_kib": kib, "kaleido": kal.to_dict(),
                        "overhead_pct": 100 * kal.total_mm2 / dense.total_mm2 - 100,
                        "iso_area_dense_pes": iso_area_pes(kal, dense, fig.dense_pe_transistors)}
    out = {
        "sources": {"logic": LOGIC_SOURCE, "sram": SRAM_SOURCE},
        "synthesis": synth,
        "pe": {"acc_bits": acc, "dense_transistors": pe_d, "kaleido_transistors": pe_k,
               "overhead_pct": 100 * pe_k / pe_d - 100,
               "kaleido_overhead_pct_by_low_bits": {lb: 100 * r.transistors / pe_d - 100 for lb, r in k_pes.items()},
               "in_tile_dense_transistors": tile_d, "in_tile_kaleido_transistors": tile_k,
               "in_tile_overhead_pct": 100 * tile_k / tile_d - 100},
        "array_128": {"dense_pe_array_mm2": dense.pe_array_mm2, "kaleido_pe_array_mm2": kal.pe_array_mm2},
        "dispatcher": {"window_rows": window, "logic_w64_mm2": logic_mm2(disp_tr), "pointer_list_kib": ptr_kib,
                       "pointer_list_mm2": sram_mm2(ptr_kib),
                       "pct_of_kaleido_array": 100 * kal.dispatcher_mm2 / kal.pe_array_mm2},
        "buffers_mm2": dense.buffers_mm2, "dense_chip": dense.to_dict(), "kaleido_chip": chips,
        "seconds": time.perf_counter() - t0,
    }
    write_atomic(args.out, json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: out[k] for k in ("pe", "array_128", "dispatcher", "dense_chip", "kaleido_chip")}, indent=1))
    print(f"total {out['seconds']:.1f} s -> {args.out}")


if __name__ == "__main__":
    main()
