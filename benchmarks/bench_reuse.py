"""Speed of the reuse core against dense SDPA on a Wan-like attention head.

Shape: head_dim 128 with RoPE groups 44/42/42 (Wan's rule), grid 8x32x32 (8192
tokens), 2 heads, batch 1, one thread; q/k/v from the demo's seeded synthetic scene.
Every timing is the median of ``--repeats`` runs, interleaved so that load from
other processes hits all variants alike.  Printed ratios (all measured in this run):

* decision / dense: ``decide_effective`` on q (quantise, decide and write the effective q in
  one pass: everything the float path adds before its single SDPA call); target <= 0.25;
* float path / dense: ``reuse_attention`` (float path) end to end; target <= 2.0;
* int8 path / dense: ``reuse_attention(exact_int8=True)`` end to end (reported).

Run: ``OMP_WAIT_POLICY=PASSIVE python benchmarks/bench_reuse.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from kaleido.reuse import (  # noqa: E402
    ChannelGroups,
    ReuseConfig,
    TokenGrid,
    decide,
    decide_effective,
    quantize,
    reuse_attention,
)
from kaleido.reuse.example import synthetic_qkv  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--theta1", type=float, default=3.0)
    ap.add_argument("--theta2", type=float, default=8.0)
    ap.add_argument("--grid", type=int, nargs=3, default=(8, 32, 32), metavar=("T", "H", "W"))
    ap.add_argument("--json", action="store_true", help="also print the result as JSON")
    args = ap.parse_args()
    torch.set_num_threads(1)

    grid = TokenGrid(*args.grid)
    head_dim = 128
    hw = 2 * (head_dim // 6)
    rope = (head_dim - 2 * hw, hw, hw)  # 44/42/42
    groups = ChannelGroups.from_rope(*rope)
    config = ReuseConfig(args.theta1, args.theta2)
    q, k, v = synthetic_qkv(grid, rope, heads=2, seed=0)
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)

    def dense():
        return F.scaled_dot_product_attention(qt, kt, vt).transpose(1, 2)

    def decision():
        return decide_effective(qt, grid, groups, config)[1]

    def decide_only():
        q_q, _ = quantize(qt, groups, config.granularity)
        return decide(q_q, grid, groups, config)

    def float_path():
        return reuse_attention(q, k, v, grid, groups, config)

    def int8_path():
        return reuse_attention(q, k, v, grid, groups, config, exact_int8=True)

    variants = {"dense_sdpa": dense, "decision": decision, "quantize_decide": decide_only,
                "float_path": float_path, "int8_path": int8_path}
    times: dict[str, list[float]] = {name: [] for name in variants}
    results = {}
    for _ in range(args.repeats):
        for name, fn in variants.items():
            t0 = time.perf_counter()
            results[name] = fn()
            times[name].append(time.perf_counter() - t0)
    med = {name: statistics.median(ts) for name, ts in times.items()}

    ref = results["dense_sdpa"]
    out_f, stats = results["float_path"]
    out_i, stats_i = results["int8_path"]
    assert torch.equal(stats.qk_modes.modes, stats_i.qk_modes.modes)
    rel = lambda o: float((o - ref).norm() / ref.norm())  # noqa: E731
    fr = stats.qk_modes.fractions()
    report = {
        "shape": {"grid": list(grid.shape), "tokens": grid.seq_len, "heads": 2, "head_dim": head_dim,
                  "groups": list(groups.sizes), "threads": torch.get_num_threads()},
        "config": config.to_dict(),
        "median_seconds": med,
        "repeats": args.repeats,
        "ratios": {
            "decision_over_dense": med["decision"] / med["dense_sdpa"],
            "quantize_decide_over_dense": med["quantize_decide"] / med["dense_sdpa"],
            "float_path_over_dense": med["float_path"] / med["dense_sdpa"],
            "int8_path_over_dense": med["int8_path"] / med["dense_sdpa"],
        },
        "mode_fractions": {n: [float(x) for x in fr[g]] for g, n in enumerate(groups.names)},
        "qk_saved_fraction": stats.qk_ops.saved_fraction,
        "relative_error": {"float_path": rel(out_f), "int8_path": rel(out_i)},
    }

    r = report["ratios"]
    print(f"Wan-like head: grid {args.grid[0]}x{args.grid[1]}x{args.grid[2]} ({grid.seq_len} tokens), "
          f"2 heads x {head_dim} ({'/'.join(map(str, groups.sizes))}), 1 thread, median of {args.repeats}")
    print(f"theta1={config.theta1} theta2={config.theta2} low_bits={config.low_bits}: q.k^T modes "
          + ", ".join(f"{n} C/P/F {fr[g, 0]:.2f}/{fr[g, 1]:.2f}/{fr[g, 2]:.2f}" for g, n in enumerate(groups.names))
          + f"; 8-bit-equivalent q.k^T saving {100 * stats.qk_ops.saved_fraction:.1f}%")
    for name in variants:
        print(f"  {name:16s} {1000 * med[name]:9.1f} ms")
    print(f"decision / dense   = {r['decision_over_dense']:.3f}  (target <= 0.25; "
          f"quantise+decide alone {r['quantize_decide_over_dense']:.3f})")
    print(f"float path / dense = {r['float_path_over_dense']:.3f}  (target <= 2.0)")
    print(f"int8 path / dense  = {r['int8_path_over_dense']:.3f}  (reported)")
    print(f"relative error vs dense: float {rel(out_f):.4f}, int8 {rel(out_i):.4f}")
    if args.json:
        print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
