"""Wall time of each method the ranking picks at >= 30 dB, timed back to back with dense in one process.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/retime_ranking.py docs/results/compare --runs 2

Rows of a results folder may come from several sweep runs; a method's wall time is only compared with a dense time
measured in the same run (:func:`kaleido.compare.analysis.wall_ratios`). This re-runs, for each ranked method, its
chosen setting on ``--runs`` of its (prompt, seed) points - dense then the method, in this process, one torch thread
- and keeps the times in ``<folder>/timing/wall-time.json``, which ``kaleido compare``, ``kaleido report`` and
``benchmarks/few_step_tables.py`` read. Run it with nothing else on the machine.
"""

from __future__ import annotations

import argparse
import sys
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", help="results folders of `kaleido compare`")
    ap.add_argument("--runs", type=int, default=2, help="(prompt, seed) points per setting (default 2)")
    ap.add_argument("--min-psnr", type=float, default=30.0, help="the ranking's quality level (dB)")
    a = ap.parse_args(argv)
    from kaleido.compare.retime import retime

    for d in a.results:
        t0 = time.perf_counter()
        try:
            out = retime(d, runs=a.runs, min_psnr=a.min_psnr)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(f"{d}: {len(out['points'])} points timed in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
