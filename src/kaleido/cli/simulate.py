"""``kaleido simulate``: a vDiT workload on the Kaleido accelerator, the dense array and an A100.

Reuse statistics (``--trace`` or ``--profile``) measured on another model or token grid than the
workload's - the shipped ``tiny_wan_default`` profile and any trace of the miniature model, for every
published workload - are carried to it by the documented carry-over rule (``kaleido.hw.profile``, docs/hardware.md §8),
with one line on stderr saying so. ``--transfer`` is still accepted and changes nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import click


def _shipped_profiles() -> dict[str, str]:
    """Profiles shipped in the package, by name: the file stem, and 'example' for the synthetic one."""
    from importlib.resources import files

    root = files("kaleido") / "assets" / "profiles"
    out = {p.name[: -len(".json")]: str(p) for p in root.iterdir() if p.name.endswith(".json")}
    out["example"] = out["synthetic_correlated"]
    return out


def _load_stats_source(trace: str | None, profile: str | None, wl):
    from kaleido.hw.profile import Profile

    if trace and profile:
        raise click.UsageError("give --trace or --profile, not both: a trace is converted to a profile")
    if profile:
        shipped = _shipped_profiles()
        profile = shipped.get(profile, profile)
        if not Path(profile).is_file():
            raise click.BadParameter(
                f"{profile!r} does not exist: give a profile JSON file or a shipped profile name "
                f"({', '.join(sorted(shipped))})",
                param_hint="--profile")
        return Profile.load(profile), []
    if trace:
        try:
            from kaleido.integrations.trace import ReuseTrace
        except ImportError:
            raise click.UsageError("reuse traces are not supported in this install (kaleido.integrations.trace is "
                                   "missing); convert the trace to a profile or pass --profile") from None
        from kaleido.hw.trace_adapter import profile_from_trace

        try:
            loaded = ReuseTrace.load(trace)
        except ValueError as e:
            raise click.BadParameter(f"{e} (kaleido generate writes one: OUT/trace.safetensors)",
                                     param_hint="--trace") from None
        return profile_from_trace(loaded, wl)
    return None, ["no --trace/--profile: Kaleido runs with no reuse (equal to the dense array)"]


@click.command("simulate")
@click.option("--workload", "-w", required=True,
              help="model-resolution, e.g. hunyuan-720p; comma-separated list, or 'all'.")
@click.option("--trace", "trace", type=click.Path(dir_okay=False), help="a ReuseTrace (.safetensors) for the reuse statistics.")
@click.option("--profile", "profile", help="a profile JSON for the reuse statistics, or a shipped one: 'tiny_wan_default' (measured on the "
                   "shipped miniature Wan pipeline), 'example' (synthetic).")
@click.option("--transfer", is_flag=True, hidden=True,
              help="accepted for compatibility: statistics from another model or grid are always carried by the "
                   "documented rule (docs/hardware.md §8), said in one line.")
@click.option("--array", "array", default="128x128", show_default=True, help="PE array RxC.")
@click.option("--clock", "clock", type=float, default=1.0, show_default=True, help="clock in GHz (an assumption).")
@click.option("--dataflow", type=click.Choice(["ws", "os", "is"]), default="ws", show_default=True,
              help="weight-, output- or input-stationary (is: dense runs only; the dispatcher is modelled for ws/os).")
@click.option("--timing", type=click.Choice(["default", "scalesim_compat"]), default="default", show_default=True)
@click.option("--steps", type=int, default=None, help="denoising steps (default: the model's).")
@click.option("--buffers", default="1536,1536,512", show_default=True,
              help="ifmap,filter,ofmap SRAM sizes in KiB.")
@click.option("--dram-gbps", type=float, default=256.0, show_default=True, help="accelerator DRAM bandwidth.")
@click.option("--static-w", type=float, default=None,
              help="static power of one array (W); default 0 for one array, and for a chip the stated assumption "
                   "(0.2 x the array's full-load dynamic power, docs/hardware.md §12).")
@click.option("--chip", "chip_name", type=click.Choice(["iso-peak-int8", "iso-peak-bf16", "iso-power", "iso-memory"]),
              help="a chip of several arrays sharing the A100's HBM2e, on equal terms with the A100 (docs/hardware.md §12).")
@click.option("--arrays", type=int, default=None,
              help="a chip of this many arrays sharing one DRAM of --dram-gbps (instead of --chip).")
@click.option("--a100-precision", type=click.Choice(["bf16", "int8"]), default="bf16", show_default=True)
@click.option("--anchor-pricing", type=click.Choice(["mapped", "register", "sram_1m"]), default="mapped",
              show_default=True, help="where FULL/PARTIAL reference partials are read from: as the stream order "
              "places them (register one row back, else an SRAM store), always a PE register, or a 1 MB SRAM "
              "(docs/hardware.md §9b).")
@click.option("--no-complementary-pairs", "no_pairs", is_flag=True,
              help="the WS matcher pairs only rows reusing the same groups (no split partial-sum chains).")
@click.option("--out", "out", type=click.Path(file_okay=False), help="directory for result.json, CSVs and plots.")
@click.option("--json", "as_json", is_flag=True, help="print JSON instead of tables.")
def simulate(workload, trace, profile, transfer, array, clock, dataflow, timing, steps, buffers, dram_gbps, static_w,
             chip_name, arrays, a100_precision, anchor_pricing, no_pairs, out, as_json):
    """Cycles, time, utilisation and energy of a vDiT run on Kaleido vs a dense array and an A100."""
    from kaleido.hw.chip import ChipConfig
    from kaleido.hw.chip_presets import chip_preset
    from kaleido.hw.config import ArrayConfig, BufferConfig, parse_array
    from kaleido.hw.energy import EnergyTable
    from kaleido.hw.gpu import A100Config
    from kaleido.hw.report import plot_all, print_report, write_csv, write_json
    from kaleido.hw.simulate import simulate as run
    from kaleido.hw.workloads import get_workload, workload_names

    try:
        names = workload_names() if workload == "all" else [w.strip() for w in workload.split(",") if w.strip()]
        wls = [get_workload(n, steps) for n in names]
        R, C = parse_array(array)
        prof, notes = _load_stats_source(trace, profile, wls[0])
        low_bits = 4
        if prof is not None:
            lbs = {e.stats.low_bits for e in prof.ops.values() if e is not None}
            # The array has one PARTIAL multiplier width: the widest difference any op
            # uses; narrower differences run on it unchanged (sign-extended).
            low_bits = max(lbs) if lbs else 4
            if len(lbs) > 1:
                notes.append(f"ops use PARTIAL widths {sorted(lbs)}; the array is built for the widest, "
                             f"{low_bits} bits, and every PARTIAL MAC is costed at that width")
        try:
            kib = [int(x) for x in buffers.split(",")]
            if len(kib) != 3:
                raise ValueError
        except ValueError:
            raise ValueError(f"--buffers {buffers!r} must be three KiB sizes: ifmap,filter,ofmap (e.g. 1536,1536,512)") from None
        cfg = ArrayConfig(R, C, clock, dataflow, timing, BufferConfig(*kib, dram_gbps=dram_gbps), low_bits)
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
        carried = [wl for wl in wls if prof is not None
                   and (prof.model != wl.model.name or tuple(prof.grid) != tuple(wl.grid_thw))]
        if carried and not as_json:  # with --json the carry is in each result's "notes"
            click.echo(f"reuse statistics measured on {prof.model} at grid {'x'.join(map(str, prof.grid))} carried to "
                       + ", ".join(f"{wl.name} ({'x'.join(map(str, wl.grid_thw))})" for wl in carried)
                       + " by the documented carry-over rule (docs/hardware.md §8)", err=True)
        results = {}
        for wl in wls:
            # as measured where model and grid match; carried by the documented rule where they do not
            res = run(wl, prof, None if chip else cfg, energy=energy, a100=a100, transfer=True,
                      anchor_pricing=anchor_pricing, complementary=not no_pairs, chip=chip)
            res.notes[:0] = notes
            if prof is not None and "SYNTHETIC" in prof.label:
                res.notes.append("the reuse statistics come from SYNTHETIC data (see the profile's label)")
            results[wl.name] = res
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    if as_json:
        click.echo(json.dumps({n: {k: v for k, v in r.to_dict().items() if k != "gemms"} for n, r in results.items()},
                              indent=1, default=float))
    else:
        for r in results.values():
            print_report(r)
    if out:
        d = Path(out)
        d.mkdir(parents=True, exist_ok=True)
        write_json(results, d / "result.json", full=True)
        files = [d / "result.json", *write_csv(results, d), *plot_all(results, d)]
        if not as_json:
            click.echo("wrote " + ", ".join(str(f) for f in files))
