"""The Kaleido accelerator simulator (SPEC §5); see ``docs/hardware.md``.

Layers: :mod:`.config` (array, buffers) -> :mod:`.workloads` (published vDiT shapes ->
GEMMs) -> :mod:`.mapping` (folds) -> :mod:`.compute` (cycle model, SCALE-Sim compat) and
:mod:`.kaleido_pe` (PE modes, bit-exact tile) and :mod:`.dispatcher` (scheduler +
matcher) -> :mod:`.memory` -> :mod:`.energy` (cited table) -> :mod:`.simulate` ->
:mod:`.report`.  Several arrays sharing one DRAM: :mod:`.chip` (the split of each GEMM) and
:mod:`.chip_presets` (iso-peak / iso-power / iso-memory with the A100).  Designs: :mod:`.designs` - one
protocol (:mod:`.designs.protocol`: a design counts actions, an energy table prices them) and one registry
(``designs.DESIGNS``) of the dense array, the A100 roofline (:mod:`.gpu`), Kaleido and the AdapTiV- / EXION- /
Cambricon-D-class designs, whose recorded traces :mod:`.baseline_replay` replays.
Reuse statistics: :mod:`.profile` (format, loader, carry-over rule),
:mod:`.trace_adapter` (``ReuseTrace`` -> profile), :mod:`.example_profile`; what the paper's
figures would need: :mod:`.requirements`.
"""

import importlib

#: public name -> submodule; imported on first use so ``import kaleido.hw.compute`` stays light
_EXPORTS = {
    "ArrayConfig": "config", "BufferConfig": "config", "ChipConfig": "chip", "chip_preset": "chip_presets", "ActionCounts": "energy", "EnergyTable": "energy",
    "A100Config": "gpu", "OpProfile": "profile", "Profile": "profile", "DESIGN_LEVEL": "simulate",
    "GemmResult": "simulate", "SimResult": "simulate", "simulate": "simulate", "simulate_gemm": "simulate",
    "Gemm": "workloads", "Workload": "workloads", "get_workload": "workloads", "workload_names": "workloads",
    "DESIGNS": "designs", "Design": "designs", "evaluate": "designs", "get_design": "designs",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
