"""``kaleido simulate``: a vDiT workload on the Kaleido accelerator, the dense array and an A100.

Reuse statistics (``--trace`` or ``--profile``) measured on another model or token grid than the
workload's - the shipped ``tiny_wan_default`` profile and any trace of the miniature model, for every
published workload - are carried to it by the documented carry-over rule (``kaleido.hw.inputs.profile``, docs/hardware.md §8),
with one line on stderr saying so. ``--transfer`` is still accepted and changes nothing. A trace (or profile)
of an accelerator baseline's decisions - AdapTiV, EXION, Cambricon-D - is replayed by that baseline's design
on the array instead, as the comparison's accelerator table does.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from kaleido.cli._paths import output_folder


@click.command("simulate")
@click.option("--workload", "-w", required=True,
              help="model-resolution, e.g. hunyuan-720p; comma-separated list, or 'all'.")
@click.option("--trace", "trace", type=click.Path(dir_okay=False), help="a ReuseTrace (.safetensors): Kaleido's (its reuse statistics) or an accelerator baseline's (replayed by its design).")
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
@click.option("--out", "out", type=click.Path(file_okay=False), callback=output_folder,
              help="directory for result.json, CSVs and plots.")
@click.option("--json", "as_json", is_flag=True, help="print JSON instead of tables.")
def simulate(workload, trace, profile, transfer, array, clock, dataflow, timing, steps, buffers, dram_gbps, static_w,
             chip_name, arrays, a100_precision, anchor_pricing, no_pairs, out, as_json):
    """Cycles, time, utilisation and energy of a vDiT run on Kaleido (or a replayed baseline) vs a dense array."""
    from kaleido.hw.outputs.report import plot_all, print_replay, print_report, write_csv, write_json, write_replay_json
    from kaleido.hw.run import simulate_workloads

    try:
        run = simulate_workloads(workload, trace=trace, profile=profile, array=array, clock=clock, dataflow=dataflow,
                                 timing=timing, steps=steps, buffers=buffers, dram_gbps=dram_gbps, static_w=static_w,
                                 chip_name=chip_name, arrays=arrays, a100_precision=a100_precision,
                                 anchor_pricing=anchor_pricing, complementary=not no_pairs)
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    if run.carry_message() and not as_json:  # with --json the carry is in each result's "notes"
        click.echo(run.carry_message(), err=True)
    if run.replays:
        pes = run.pes
        if as_json:
            click.echo(json.dumps({n: r.to_dict(pes) for n, r in run.replays.items()}, indent=1, default=float))
        else:
            for r in run.replays.values():
                print_replay(r, pes)
        if out:
            Path(out).mkdir(parents=True, exist_ok=True)
            write_replay_json(run.replays, pes, Path(out) / "result.json")
            if not as_json:
                click.echo(f"wrote {Path(out) / 'result.json'}")
        return
    results = run.results
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
