"""Synthesise the RTL (Yosys, transistor estimate) and write the 16 nm area table: docs/results/rtl_area.json.

    python benchmarks/rtl_area.py [--tile 16] [--out docs/results/rtl_area.json]

Designs: the dense and the Kaleido PE (low_bits 4), dense and Kaleido WS tiles of
``tile x tile`` PEs (the Kaleido tile with three channel groups, as a RoPE head's
q.k^T K-fold has), the dispatcher (scheduler + matcher, three groups) for windows of 16 and
64 tokens. The whole array scales the tile's per-PE area to 128 x 128; the dispatcher of the
cost model's window (half the ifmap buffer of K = 128 rows) is the 64-token logic plus its
next-pointer list as SRAM; the anchor store is the one :class:`kaleido.hw.kaleido_pe.AnchorPlan`
sizes for Wan 2.1's self-attention at 480p and 720p. Every synthesis prints its time.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

from kaleido.atomic import write_atomic
from kaleido.hw.area import LOGIC_SOURCE, SRAM_SOURCE, chip_area, logic_mm2, sram_mm2
from kaleido.hw.config import ArrayConfig
from kaleido.hw.kaleido_pe import AnchorPlan
from kaleido.rtl.dispatcher import Dispatcher
from kaleido.rtl.pe import DensePE, KaleidoPE
from kaleido.rtl.synth import synthesize
from kaleido.rtl.tile import DenseTile, KaleidoTile


def _groups(rows: int) -> tuple[int, int, int]:
    h = w = 2 * (rows // 6)
    return (rows - h - w, h, w)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tile", type=int, default=16)
    ap.add_argument("--out", default="docs/results/rtl_area.json")
    args = ap.parse_args()
    t0 = time.perf_counter()
    designs = {
        "dense_pe": DensePE(), "kaleido_pe": KaleidoPE(4),
        f"dense_tile_{args.tile}": DenseTile(args.tile, args.tile),
        f"kaleido_tile_{args.tile}": KaleidoTile(args.tile, args.tile, _groups(args.tile), 4),
        "dispatcher_w16": Dispatcher(16, 3, 4), "dispatcher_w64": Dispatcher(64, 3, 4),
    }
    synth = {}
    for name, d in designs.items():
        r = synthesize(d, name)
        synth[name] = r.to_dict() | {"mm2_16nm": logic_mm2(r.transistors)}
        print(f"{name:22s} {r.cells:8d} cells {r.transistors:10d} transistors  {r.seconds:6.1f} s", flush=True)
    n2 = args.tile ** 2
    pe_d = synth[f"dense_tile_{args.tile}"]["transistors"] / n2  # per PE, tile edge (skew, valid lines, taps) included
    pe_k = synth[f"kaleido_tile_{args.tile}"]["transistors"] / n2
    cfg = ArrayConfig()
    window = cfg.buffers.usable_bytes("ifmap") // 128  # the cost model's dispatch window at K = 128
    ptr_kib = window * math.ceil(math.log2(window)) / 8 / 1024
    disp_tr = synth["dispatcher_w64"]["transistors"]
    stores = {}
    for label, grid in (("wan_480p", (21, 30, 52)), ("wan_720p", (21, 45, 80))):
        plan = AnchorPlan(np.array([[0, 0, 1], [1, 0, 0], [1, 0, 0]], float), grid, (0, 0, 0), cfg.cols)
        stores[label] = float(plan.store_kib().max())
    buffers = (cfg.buffers.ifmap_kib, cfg.buffers.filter_kib, cfg.buffers.ofmap_kib)
    dense = chip_area(cfg.n_pes, pe_d, buffers)
    chips = {}
    for label, kib in stores.items():
        kal = chip_area(cfg.n_pes, pe_k, buffers, disp_tr, kib)
        kal_disp = kal.dispatcher_mm2 + sram_mm2(ptr_kib)
        chips[label] = {"anchor_store_kib": kib, "kaleido": kal.to_dict() | {"dispatcher_mm2": kal_disp,
                        "total_mm2": kal.total_mm2 + sram_mm2(ptr_kib)},
                        "overhead_pct": 100 * (kal.total_mm2 + sram_mm2(ptr_kib)) / dense.total_mm2 - 100}
    out = {
        "sources": {"logic": LOGIC_SOURCE, "sram": SRAM_SOURCE},
        "synthesis": synth,
        "pe": {"dense_transistors": synth["dense_pe"]["transistors"], "kaleido_transistors": synth["kaleido_pe"]["transistors"],
               "overhead_pct": 100 * synth["kaleido_pe"]["transistors"] / synth["dense_pe"]["transistors"] - 100,
               "in_tile_dense_transistors": pe_d, "in_tile_kaleido_transistors": pe_k,
               "in_tile_overhead_pct": 100 * pe_k / pe_d - 100},
        "array_128": {"dense_pe_array_mm2": dense.pe_array_mm2, "kaleido_pe_array_mm2": cfg.n_pes * logic_mm2(pe_k)},
        "dispatcher": {"window_rows": window, "logic_w64_mm2": logic_mm2(disp_tr), "pointer_list_kib": ptr_kib,
                       "pointer_list_mm2": sram_mm2(ptr_kib),
                       "pct_of_kaleido_array": 100 * (logic_mm2(disp_tr) + sram_mm2(ptr_kib)) / (cfg.n_pes * logic_mm2(pe_k))},
        "buffers_mm2": dense.buffers_mm2, "dense_chip": dense.to_dict(), "kaleido_chip": chips,
        "iso_area_dense_pes": {k: int(round((v["kaleido"]["total_mm2"] - dense.buffers_mm2) / logic_mm2(pe_d)))
                               for k, v in chips.items()},
        "seconds": time.perf_counter() - t0,
    }
    write_atomic(args.out, json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: out[k] for k in ("pe", "array_128", "dispatcher", "dense_chip", "kaleido_chip", "iso_area_dense_pes")}, indent=1))
    print(f"total {out['seconds']:.1f} s -> {args.out}")


if __name__ == "__main__":
    main()
