"""Mutation check of the RTL-against-model tests: each mutation changes one mode's cycle cost in
``kaleido.hw`` or one multiplexer of the RTL PE, and the RTL-against-model tests must fail.

    python benchmarks/rtl_mutations.py [--only TEXT] [--tests TESTS...]

Each mutation is applied to a scratch copy of ``src/kaleido`` (the working tree is never
touched), the tests run against that copy (``PYTHONPATH`` first), and the script prints per
mutation whether they failed and the first failing test.  Exit status 1 when a mutation
survives.  Needs the ``rtl`` extra; takes about 10 minutes on 2 cores (hypothesis shrinks each failure).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: (name, file under src/kaleido, text, replacement): each text occurs exactly once in its file
MUTATIONS = [
    ("hw: COMPUTE costs half a slot", "hw/arch/kaleido_pe.py",
     "    if mode == PEMode.COMPUTE:\n        return 1.0", "    if mode == PEMode.COMPUTE:\n        return 0.5"),
    ("hw: packed PARTIAL costs a whole slot", "hw/arch/kaleido_pe.py",
     "return 0.5 if packed_available else 1.0", "return 1.0"),
    ("hw: FULL costs a slot", "hw/arch/kaleido_pe.py",
     "        return 0.5\n    return 0.0", "        return 0.5\n    return 1.0"),
    ("rtl: PARTIAL's low field not sign-extended", "hw/rtl/pe.py",
     "Mux(is_partial | is_packed, Cat(lo, lo[lb - 1]), 0)", "Mux(is_partial | is_packed, Cat(lo, Const(0, 1)), 0)"),
    ("rtl: single product onto the other lane", "hw/rtl/pe.py",
     "Mux(self.sel_in, 0, single)", "Mux(self.sel_in, single, 0)"),
    ("rtl: packed high field dropped", "hw/rtl/pe.py",
     "Mux(is_compute, a[lb:8], Mux(is_packed, hi_packed, 0))", "Mux(is_compute, a[lb:8], 0)"),
    # (PARTIAL through the 8-bit product path is an equivalent mutant: op_hi is 0 in PARTIAL, so p8 == p_lo)
    ("rtl: PARTIAL product doubled", "hw/rtl/pe.py",
     "Mux(is_compute, p8, Mux(is_partial, p_lo, 0))", "Mux(is_compute, p8, Mux(is_partial, p_lo << 1, 0))"),
    # (FULL adding p8 or p_lo is an equivalent mutant too: both operand halves are already 0 in FULL)
    ("rtl: FULL decoded as PARTIAL", "hw/rtl/pe.py",
     "is_partial = mode == int(PEMode.PARTIAL)",
     "is_partial = (mode == int(PEMode.PARTIAL)) | (mode == int(PEMode.FULL))"),
]


def first_failure(out: str) -> str:
    for line in out.splitlines():
        if line.startswith("FAILED "):
            return line.split(" ", 1)[1].split(" - ")[0]
    return "(no FAILED line)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # the behaviour tests only: the synthesis test would also fail on any RTL edit (its cell counts change)
    ap.add_argument("--only", default="", help="run the mutations whose name contains this text")
    ap.add_argument("--tests", nargs="+", default=["tests/hw/rtl/test_pe.py", "tests/hw/rtl/test_tile_against_model.py"])
    a = ap.parse_args()
    survivors = 0
    with tempfile.TemporaryDirectory() as tmp:
        chosen = [mu for mu in MUTATIONS if a.only in mu[0]]
        for name, rel, old, new in chosen:
            dst = Path(tmp) / "kaleido"
            if dst.exists():
                shutil.rmtree(dst)
            shutil.copytree(ROOT / "src" / "kaleido", dst, ignore=shutil.ignore_patterns("__pycache__"))
            text = (dst / rel).read_text()
            if text.count(old) != 1:
                sys.exit(f"mutation {name!r}: its text occurs {text.count(old)} times in src/kaleido/{rel}; "
                         "update MUTATIONS to the current source")
            (dst / rel).write_text(text.replace(old, new))
            env = {**os.environ, "PYTHONPATH": tmp + os.pathsep + os.environ.get("PYTHONPATH", ""),
                   "OMP_WAIT_POLICY": "PASSIVE", "HF_HUB_OFFLINE": "1"}
            t0 = time.perf_counter()
            r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *a.tests],
                               cwd=ROOT, env=env, capture_output=True, text=True)
            dt = time.perf_counter() - t0
            # the copy must be what the tests imported, or a pass proves nothing
            probe = subprocess.run([sys.executable, "-c", "import kaleido; print(kaleido.__file__)"], env=env,
                                   capture_output=True, text=True).stdout.strip()
            if not probe.startswith(tmp):
                sys.exit(f"the tests imported {probe}, not the mutated copy; run from an editable install")
            killed = r.returncode != 0
            survivors += not killed
            print(f"{'killed ' if killed else 'SURVIVED'} {name:45s} {dt:5.1f} s  "
                  f"{first_failure(r.stdout) if killed else ''}")
    print(f"{len(chosen) - survivors} of {len(chosen)} mutations killed by {' '.join(a.tests)}")
    sys.exit(1 if survivors else 0)


if __name__ == "__main__":
    main()
