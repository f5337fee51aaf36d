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
3. :mod:`.designs` - one protocol (a design counts actions, an energy table prices them) and one registry
   (``designs.DESIGNS``) of the dense array, the A100, Kaleido and the AdapTiV- / EXION- / Cambricon-D-class
   designs. Each design holds its own costing: Kaleido's (:mod:`.designs.kaleido`: every GEMM at each
   dispatcher level beside its dense reference, on one array or a chip, with area), the dense array's
   (:mod:`.designs.dense`), the baselines' replay of their recorded traces (:mod:`.designs.replay`, run by
   :mod:`.designs.baseline_replay`).
4. :mod:`.chip_presets` (iso-peak / iso-power / iso-memory chips beside the A100) and :mod:`.run` (what
   ``kaleido simulate`` runs).
5. :mod:`.outputs` - report files (:mod:`.outputs.report`) and what the paper's figures would need
   (:mod:`.outputs.requirements`).
6. :mod:`.rtl` - the PE modes, tiles and dispatcher as circuits (Amaranth HDL), checked against the core and
   :mod:`.arch`.
"""

import importlib

#: public name -> submodule; imported on first use so ``import kaleido.hw.arch.compute`` stays light
_EXPORTS = {
    "ArrayConfig": "arch.config", "BufferConfig": "arch.config", "ChipConfig": "arch.chip",
    "chip_preset": "chip_presets", "ActionCounts": "arch.energy", "EnergyTable": "arch.energy",
    "A100Config": "arch.gpu", "OpProfile": "inputs.profile", "Profile": "inputs.profile",
    "DESIGN_LEVEL": "designs.kaleido", "GemmResult": "designs.kaleido", "SimResult": "designs.kaleido",
    "simulate": "designs.kaleido", "simulate_gemm": "designs.kaleido", "Gemm": "inputs.workloads", "Workload": "inputs.workloads",
    "get_workload": "inputs.workloads", "workload_names": "inputs.workloads",
    "DESIGNS": "designs", "Design": "designs", "evaluate": "designs", "get_design": "designs",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
