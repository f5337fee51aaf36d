"""What ``kaleido simulate`` runs, as a library call: reuse statistics from a trace, a profile file or a shipped
profile, through the one door of :mod:`kaleido.hw.inputs.from_trace`; one array (or a chip of several) built from
the command's options; the design the statistics belong to counted on each workload and priced with the run's
energy table - Kaleido's (``kaleido.hw.designs.get_design("kaleido")``, which reports its dense reference and the
A100 alongside) for Kaleido's statistics, or the baseline design that replays a recorded AdapTiV / EXION /
Cambricon-D trace (:func:`kaleido.hw.designs.baseline_replay.replay`, the same call the comparison's accelerator
table makes).

:func:`simulate_workloads` returns a :class:`SimulationRun` (results by workload name - ``results`` for Kaleido,
``replays`` for a baseline - the notes every result carries, and which workloads the statistics were carried to
by the documented rule, docs/hardware.md §8).
Every problem a user can cause is a ``ValueError`` with one line naming it and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .inputs.baseline_profile import BaselineProfile
from .inputs.profile import Profile


def shipped_profiles() -> dict[str, str]:
    """Profiles shipped in the package, by name: the file stem, and 'example' for the synthetic one."""
    from importlib.resources import files

    root = files("kaleido") / "assets" / "profiles"
    out = {p.name[: -len(".json")]: str(p) for p in root.iterdir() if p.name.endswith(".json")}
    out["example"] = out["synthetic_correlated"]
    return out


def load_stats_source(trace: str | None, profile: str | None, wl):
    """``(statistics or None, notes)`` from a ``ReuseTrace`` file (Kaleido's or a baseline's), a profile JSON of
    either kind or a shipped profile's name (:mod:`kaleido.hw.inputs.from_trace`)."""
    from .inputs.from_trace import load_stats, stats_from_trace

    if trace and profile:
        raise ValueError("give --trace or --profile, not both: a trace is converted to a profile")
    if profile:
        shipped = shipped_profiles()
        path = shipped.get(profile, profile)
        if not Path(path).is_file():
            raise ValueError(f"--profile {profile!r} does not exist: give a profile JSON file or a shipped profile name "
                             f"({', '.join(sorted(shipped))})")
        return load_stats(path), []
    if trace:
        from kaleido.trace import ReuseTrace

        try:
            loaded = ReuseTrace.load(trace)
        except ValueError as e:
            raise ValueError(f"--trace: {e} (kaleido generate writes one: OUT/trace.safetensors)") from None
        return stats_from_trace(loaded, wl)
    return None, ["no --trace/--profile: Kaleido runs with no reuse (equal to the dense array)"]


def array_low_bits(prof) -> tuple[int, str | None]:
    """The PARTIAL multiplier width an array needs for ``prof`` (the widest difference any op uses; narrower
    ones run on it unchanged, sign-extended; 4 without reuse statistics) and a note when the ops differ."""
    lbs = {e.stats.low_bits for e in prof.ops.values() if e is not None} if isinstance(prof, Profile) else set()
    low_bits = max(lbs) if lbs else 4
    note = None
    if len(lbs) > 1:
        note = (f"ops use PARTIAL widths {sorted(lbs)}; the array is built for the widest, {low_bits} bits, and every "
                "PARTIAL MAC is costed at that width")
    return low_bits, note


def parse_buffers(buffers: str) -> list[int]:
    """``"ifmap,filter,ofmap"`` KiB sizes -> three ints."""
    try:
        kib = [int(x) for x in buffers.split(",")]
        if len(kib) != 3:
            raise ValueError
    except ValueError:
        raise ValueError(f"--buffers {buffers!r} must be three KiB sizes: ifmap,filter,ofmap (e.g. 1536,1536,512)") from None
    return kib


@dataclass
class SimulationRun:
    """The results of :func:`simulate_workloads`."""

    results: dict = field(default_factory=dict)  # workload name -> kaleido.hw.designs.kaleido.SimResult (Kaleido)
    replays: dict = field(default_factory=dict)  # workload name -> a baseline's priced ReplayResult
    pes: int = 0  # the array's PEs (a replay's utilisation is per PE)
    notes: list[str] = field(default_factory=list)
    carried: list = field(default_factory=list)  # workloads the statistics were carried to
    profile: object = None

    def carry_message(self) -> str | None:
        """One line naming the carry, or ``None`` when the statistics were measured on every workload."""
        if not self.carried:
            return None
        p = self.profile
        what = f"{p.method}'s recorded decisions" if isinstance(p, BaselineProfile) else "reuse statistics"
        return (f"{what} measured on {p.model} at grid {'x'.join(map(str, p.grid))} carried to "
                + ", ".join(f"{wl.name} ({'x'.join(map(str, wl.grid_thw))})" for wl in self.carried)
                + " by the documented carry-over rule (docs/hardware.md §8)")


def simulate_workloads(workload: str, *, trace: str | None = None, profile: str | None = None, array: str = "128x128",
                       clock: float = 1.0, dataflow: str = "ws", timing: str = "default", steps: int | None = None,
                       buffers: str = "1536,1536,512", dram_gbps: float = 256.0, static_w: float | None = None,
                       chip_name: str | None = None, arrays: int | None = None, a100_precision: str = "bf16",
                       anchor_pricing: str = "mapped", complementary: bool = True) -> SimulationRun:
    """Run ``workload`` (a name, a comma-separated list, or ``"all"``) with the statistics of ``trace`` /
    ``profile`` on the array the options describe (or a ``chip_name`` preset / ``arrays`` copies of it)."""
    from .arch.chip import ChipConfig
    from .chip_presets import chip_preset
    from .arch.config import ArrayConfig, BufferConfig, parse_array
    from .designs import get_design
    from .arch.energy import EnergyTable
    from .arch.gpu import A100Config
    from .inputs.workloads import get_workload, workload_names

    names = workload_names() if workload == "all" else [w.strip() for w in workload.split(",") if w.strip()]
    wls = [get_workload(n, steps) for n in names]
    R, C = parse_array(array)
    prof, notes = load_stats_source(trace, profile, wls[0])
    low_bits, note = array_low_bits(prof)
    if note:
        notes.append(note)
    kib = parse_buffers(buffers)
    cfg = ArrayConfig(R, C, clock, dataflow, timing, BufferConfig(*kib, dram_gbps=dram_gbps), low_bits)
    if isinstance(prof, BaselineProfile):
        kaleido_only = [flag for flag, given in (("--anchor-pricing", anchor_pricing != "mapped"),
                                                 ("--no-complementary-pairs", not complementary),
                                                 ("--a100-precision", a100_precision != "bf16")) if given]
        if kaleido_only:
            raise ValueError(f"{', '.join(kaleido_only)}: Kaleido's design only; a {prof.method} trace is replayed by "
                             "its own design, so drop it")
        return _replay_workloads(wls, prof, notes, cfg, static_w, chip_name, arrays)
    a100 = A100Config(precision=a100_precision)
    chip = None
    if chip_name and arrays is not None:
        raise ValueError("give --chip or --arrays, not both: a preset fixes the number of arrays")
    if chip_name:
        preset = chip_preset(chip_name, cfg, EnergyTable(), a100, static_w)
        chip, energy = preset.chip, preset.energy
        notes.append(f"chip {chip_name}: {chip.arrays} arrays ({preset.derivation}), shared DRAM "
                     f"{chip.bandwidth_gbps:.0f} GB/s, static {energy.static_w:.2f} W per array")
    else:
        energy = EnergyTable(static_w=0.0 if static_w is None else static_w)
        if arrays is not None:
            chip = ChipConfig(arrays, cfg, dram_gbps=dram_gbps, name=f"{arrays} arrays")
    run = SimulationRun(notes=notes, profile=prof)
    run.carried = [wl for wl in wls if prof is not None
                   and (prof.model != wl.model.name or tuple(prof.grid) != tuple(wl.grid_thw))]
    kaleido = get_design("kaleido")
    for wl in wls:
        # as measured where model and grid match; carried by the documented rule where they do not
        counts = kaleido.count(wl, prof, None if chip else cfg, a100=a100, transfer=True,
                               anchor_pricing=anchor_pricing, complementary=complementary, chip=chip)
        res = counts.detail.priced_by(energy)  # the SimResult: Kaleido, its dense reference and the A100
        res.notes[:0] = notes
        if prof is not None and "SYNTHETIC" in prof.label:
            res.notes.append("the reuse statistics come from SYNTHETIC data (see the profile's label)")
        run.results[wl.name] = res
    return run


def _replay_workloads(wls, prof: BaselineProfile, notes: list[str], cfg, static_w, chip_name, arrays) -> SimulationRun:
    """A baseline's recorded decisions replayed by its design on one array, workload by workload."""
    from .arch.energy import EnergyTable
    from .designs.baseline_replay import replay

    if chip_name or arrays is not None:
        raise ValueError(f"a {prof.method} trace is replayed on one array: drop --chip / --arrays")
    energy = EnergyTable(static_w=0.0 if static_w is None else static_w)
    run = SimulationRun(notes=notes, profile=prof, pes=cfg.rows * cfg.cols)
    run.carried = [wl for wl in wls if tuple(prof.grid) != tuple(wl.grid_thw)]  # shares kept, extents re-derived
    for wl in wls:
        r = replay(wl, prof, cfg, energy)
        r.notes[:0] = notes
        run.replays[wl.name] = r
    return run
