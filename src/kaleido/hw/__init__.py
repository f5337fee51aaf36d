"""The Kaleido accelerator simulator (SPEC §5); see ``docs/hardware.md``.

Layers: :mod:`.config` (array, buffers) -> :mod:`.workloads` (published vDiT shapes ->
GEMMs) -> :mod:`.mapping` (folds) -> :mod:`.compute` (cycle model, SCALE-Sim compat) and
:mod:`.kaleido_pe` (PE modes, bit-exact tile) and :mod:`.dispatcher` (scheduler +
matcher) -> :mod:`.memory` -> :mod:`.energy` (cited table) -> :mod:`.simulate` ->
:mod:`.report`.  Baselines: :mod:`.gpu` (A100 roofline), :mod:`.baselines` (registry).
Reuse statistics: :mod:`.profile` (format, loader, carry-over rule),
:mod:`.trace_adapter` (``ReuseTrace`` -> profile), :mod:`.example_profile`.
"""

from .config import ArrayConfig, BufferConfig
from .energy import ActionCounts, EnergyTable
from .gpu import A100Config
from .profile import OpProfile, Profile
from .simulate import DESIGN_LEVEL, GemmResult, SimResult, simulate, simulate_gemm
from .workloads import Gemm, Workload, get_workload, workload_names

__all__ = [
    "ArrayConfig", "BufferConfig", "ActionCounts", "EnergyTable", "A100Config", "OpProfile", "Profile",
    "DESIGN_LEVEL", "GemmResult", "SimResult", "simulate", "simulate_gemm", "Gemm", "Workload",
    "get_workload", "workload_names",
]
