"""What a row records about the code and machine that computed it, so a later run can judge drift.

:func:`device_info` is the machine a row's wall time was measured on (used to pair wall times);
:func:`environment` is what decides whether its *figures* can be expected to reproduce bit for bit:
the code (package version and, in a git checkout, the commit), torch and numpy versions, the CPU's
vector capability as torch dispatches on it (a kernel choice changes float rounding), its ISA flags,
torch's thread count and the sampler the row ran. Both live outside the row's point, so a row's key
never depends on them (:meth:`kaleido.compare.points.SweepPoint.identity`).
"""

from __future__ import annotations

import functools
import os
import platform
import subprocess
from pathlib import Path

#: the ISA extensions whose presence changes which float kernels torch and numpy run
CPU_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "amx_bf16",
             "amx_int8", "asimd", "sve")


def _cpuinfo() -> dict[str, str]:
    """The first processor's ``/proc/cpuinfo`` fields (empty where there is none)."""
    out: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break
                k, _, v = line.partition(":")
                out[k.strip()] = v.strip()
    except OSError:
        pass
    return out


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux), else what :mod:`platform` knows."""
    return _cpuinfo().get("model name") or platform.processor() or platform.machine() or "unknown CPU"


def cpu_flags() -> list[str]:
    """The :data:`CPU_FLAGS` this CPU has (``flags`` on x86, ``Features`` on Arm)."""
    info = _cpuinfo()
    have = set((info.get("flags") or info.get("Features") or "").split())
    return [f for f in CPU_FLAGS if f in have]


def device_info(pipe) -> dict:
    """The machine a row's wall time is measured on: ``type`` (``cpu``, ``cuda``, ...), ``name`` (the GPU's
    or the CPU's model), ``threads`` (torch's intra-op threads) and ``cpus`` (logical CPUs of the machine)."""
    import torch

    dev = torch.device(getattr(pipe, "_execution_device", None) or pipe.device)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else cpu_name()
    return {"type": dev.type, "name": name, "threads": torch.get_num_threads(), "cpus": os.cpu_count()}


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """``kaleido <version>`` and, when the package runs from a git checkout, ``@<commit>`` (``+dirty`` when
    tracked files differ from it)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        out = f"kaleido {version('kaleido-vdit')}"
    except PackageNotFoundError:  # run from a source tree that is not installed
        out = "kaleido (not installed)"
    root = Path(__file__).resolve().parents[3]  # src/kaleido/compare/provenance.py -> the checkout
    if not (root / ".git").exists():
        return out
    try:
        commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return out
    return f"{out}@{commit}" + ("+dirty" if dirty else "")


def environment(sampler: str | None) -> dict:
    """What a row's figures depend on besides its point (see the module docstring)."""
    import numpy
    import torch

    return {"code": code_version(), "torch": torch.__version__, "numpy": numpy.__version__,
            "python": platform.python_version(), "cpu": cpu_name(),
            "cpu_capability": torch.backends.cpu.get_cpu_capability(), "cpu_flags": cpu_flags(),
            "threads": torch.get_num_threads(), "sampler": sampler}


#: the :func:`environment` fields whose difference can move a figure (``code`` and ``python`` only name the run)
NUMERIC_FIELDS = ("torch", "numpy", "cpu_capability", "threads", "sampler")


def environment_difference(then: dict | None, now: dict) -> str:
    """One phrase naming the :data:`NUMERIC_FIELDS` that differ between a stored row's environment and today's,
    ``"same"`` when none does, ``"not recorded"`` for a row written before rows recorded it."""
    if not then:
        return "not recorded"
    diff = [f"{k} {then.get(k)} -> {now.get(k)}" for k in NUMERIC_FIELDS if then.get(k) != now.get(k)]
    return "; ".join(diff) or "same"
