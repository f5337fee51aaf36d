"""The Kaleido accelerator simulator (SPEC §5); see ``docs/hardware.md``.

Its folders follow the data path, each importing only the ones before it:

1. :mod:`.inputs` - what a simulation is given: the workloads' GEMMs (:mod:`.inputs.workloads`, from the
   families' declarations), Kaleido's reuse statistics (:mod:`.inputs.profile`: format, loader and the rule
   that carries a profile to another model or grid; :mod:`.inputs.trace_adapter`: ``ReuseTrace`` -> profile;
   :mod:`.inputs.example_profile`) and the baselines' recorded traces (:mod:`.inputs.baseline_profile`).
2. :mod:`.arch` - the architecture models: array and buffers (:mod:`.arch.config`), folds (:mod:`.arch.mapping`),
   cycles with SCALE-Sim compatibility (:mod:`.arch.compute`), DRAM and SRAM traffic (:mod:`.arch.memory`),
   the PE modes (:mod:`.arch.kaleido_pe`), the scheduler + matcher (:mod:`.arch.dispatcher`), the cited energy
   table (:mod:`.arch.energy`), the A100 roofline (:mod:`.arch.gpu`), several arrays on one DRAM
   (:mod:`.arch.chip`) and area (:mod:`.arch.area`).
3. :mod:`.simulate` - every GEMM of a workload counted on the array: Kaleido at each dispatcher level, its
   dense reference and the A100 beside it.
4. :mod:`.designs` - one protocol (a design counts actions, an energy table prices them) and one registry
   (``designs.DESIGNS``) of the dense array, the A100, Kaleido and the AdapTiV- / EXION- / Cambricon-D-class
   designs, whose recorded traces :mod:`.designs.baseline_replay` replays.
5. :mod:`.chip_presets` (iso-peak / iso-power / iso-memory chips beside the A100) and :mod:`.run` (what
   ``kaleido simulate`` runs).
6. :mod:`.outputs` - report files (:mod:`.outputs.report`) and what the paper's figures would need
   (:mod:`.outputs.requirements`).
"""

import importlib

#: public name -> submodule; imported on first use so ``import kaleido.hw.arch.compute`` stays light
_EXPORTS = {
    "ArrayConfig": "arch.config", "BufferConfig": "arch.config", "ChipConfig": "arch.chip",
    "chip_preset": "chip_presets", "ActionCounts": "arch.energy", "EnergyTable": "arch.energy",
    "A100Config": "arch.gpu", "OpProfile": "inputs.profile", "Profile": "inputs.profile",
    "DESIGN_LEVEL": "simulate", "GemmResult": "simulate", "SimResult": "simulate", "simulate": "simulate",
    "simulate_gemm": "simulate", "Gemm": "inputs.workloads", "Workload": "inputs.workloads",
    "get_workload": "inputs.workloads", "workload_names": "inputs.workloads",
    "DESIGNS": "designs", "Design": "designs", "evaluate": "designs", "get_design": "designs",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
