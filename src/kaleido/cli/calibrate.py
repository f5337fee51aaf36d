"""``kaleido calibrate``: calibrate a KaleidoConfig on a few generations.

Without a target (the original behaviour): choose the reuse axis of chunk groups per
layer.  Runs the calibration prompts (never the evaluation prompts) once per candidate
axis and writes a KaleidoConfig whose per-layer overrides hold, for each chunk-group
switch (``cross_qk``, ``proj``, ``ffn``), the axis with the largest 8-bit-equivalent
saving, plus ``calibration.json`` with the measured savings per switch, layer and axis.

With ``--target-psnr DB`` or ``--target-savings FRAC`` and ``--prompts FILE``:
characterise the calibration prompts (which also gives their dense references), search
reuse axes, thresholds, dense warm-up steps and per-layer settings for the target
(:mod:`kaleido.calibration.target`), then measure the chosen config, the base
config and the base thresholds scaled to the target on HELD-OUT prompts (``--heldout
FILE``, else the second half of ``--prompts``).  Writes the config and a JSON report
with the search trace and the held-out results; a missed target is reported with its
shortfall, never hidden.  Both runs are :mod:`kaleido.calibration`'s.
"""

from __future__ import annotations

import contextlib
import os

import click

from kaleido.cli._paths import output_file, output_folder
from kaleido.cli._pipeline import generation_options, parse_seeds


def _builtin_count(value: str | None) -> int | None:
    if value is None:
        return None
    v = value.strip()
    return int(v) if v.isdigit() else None


@click.command()
@click.option("--model", default="tiny", show_default=True, help="'tiny' or 'tiny-96' (shipped), a local pipeline folder, or a hub id.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None, help="Base KaleidoConfig.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), required=True, callback=output_file,
              help="Calibrated config (.yaml/.json).")
@click.option("--prompts", "prompts_arg", default=None,
              help="Calibration prompts: a FILE (one per line or a JSON list), or N = the first N (1-3) built-in "
                   "calibration prompts (axis calibration only; default 2).")
@click.option("--seed", type=int, default=100, show_default=True, help="Seed of the axis calibration.")
@click.option("--seeds", default=None, help="Comma-separated seeds of the target calibration (default: --seed).")
@click.option("--target-psnr", type=float, default=None, help="Target mean PSNR vs dense (dB); maximise savings.")
@click.option("--target-savings", type=float, default=None,
              help="Target 8-bit-equivalent MAC savings (fraction in (0, 1)); maximise PSNR.")
@click.option("--savings-of", type=click.Choice(["self_qk", "whole_transformer", "reusable_ops"]), default="self_qk",
              show_default=True, help="Which savings --target-savings and the PSNR search's objective count.")
@click.option("--margin", type=click.FloatRange(min=0.0), default=0.0, show_default=True,
              help="Guard band in the target's unit (dB, or a fraction for --target-savings): the search aims at "
                   "target + margin on the calibration prompts; held-out prompts are judged against the target.")
@click.option("--heldout", "heldout_path", type=click.Path(dir_okay=False), default=None,
              help="Held-out prompts (default: the second half of --prompts).")
@click.option("--budget", type=click.IntRange(2, 200), default=16, show_default=True,
              help="Most candidate configs the search evaluates (each = one generation per calibration prompt/seed).")
@click.option("--bisect-steps", type=click.IntRange(1, 10), default=3, show_default=True)
@click.option("--op-min-saving", type=click.FloatRange(0.0, 1.0, max_open=True), default=0.01, show_default=True,
              help="Last search stage: an op (other than self-attention q.k^T) is switched off when the target "
                   "still holds and that costs less than this fraction of the target's saving (0: keep every op).")
@click.option("--report", "report_path", type=click.Path(dir_okay=False), default=None, callback=output_file,
              help="JSON report of the target search (default: calibration_target.json beside --out).")
@click.option("--results-dir", "results_dir", type=click.Path(file_okay=False), default=None, callback=output_folder,
              help="Where the target search's runs are kept, as `kaleido compare` rows (default: calibration_runs/ "
                   "beside --out); a rerun computes only what is missing.")
@click.option("--workers", type=click.IntRange(0), default=1, show_default=True,
              help="Local Dask worker processes that run the target search's candidates; 0: run them in this "
                   "process (with --device / --dtype, e.g. on a GPU).")
@click.option("--scheduler", default=None, help="A Dask scheduler address (tcp://HOST:PORT) to run the candidates on.")
@generation_options
@click.option("--threads", type=click.IntRange(1), default=None, help="torch CPU threads (default: torch's).")
def calibrate(model, config_path, out_path, prompts_arg, seed, seeds, target_psnr, target_savings, savings_of, margin,
              heldout_path, budget, bisect_steps, op_min_saving, report_path, results_dir, workers, scheduler, steps, sampler,
              frames, height, width, device, dtype, threads):
    """Calibrate chunk-group reuse axes, or a whole config to --target-psnr / --target-savings."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    from kaleido.cli._prompts import prompt_warnings_shown
    from kaleido.techniques.kaleido_reuse import KaleidoConfig

    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    try:
        base = KaleidoConfig.load(config_path) if config_path else KaleidoConfig()
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--config") from None
    if target_psnr is not None and target_savings is not None:
        raise click.UsageError("give one of --target-psnr and --target-savings, not both")
    if target_psnr is None and target_savings is None:
        if heldout_path or seeds or margin:
            raise click.UsageError("--heldout, --seeds and --margin belong to --target-psnr / --target-savings")
        with prompt_warnings_shown():
            _calibrate_axes(model, base, out_path, prompts_arg, seed, steps, sampler, frames, height, width, device, dtype)
        return
    with prompt_warnings_shown():
        _calibrate_target(model, base, out_path, prompts_arg, seeds or str(seed), target_psnr, target_savings,
                          savings_of, margin, heldout_path, budget, bisect_steps, report_path, steps, sampler, frames, height,
                          width, device, dtype, results_dir, workers, scheduler, op_min_saving)


def _calibrate_axes(model, base, out_path, prompts_arg, seed, steps, sampler, frames, height, width, device, dtype):
    from kaleido.calibration import calibrate_axes_on_prompts
    from kaleido.cli._pipeline import load_pipeline_arg
    from kaleido.cli._prompts import echo_prompt_problems
    from kaleido.evaluation.generate import CALIBRATION_PROMPTS, settings_for
    from kaleido.prompts import read_prompts

    n = _builtin_count(prompts_arg)
    if prompts_arg is None or n is not None:
        n = 2 if n is None else n
        if not 1 <= n <= len(CALIBRATION_PROMPTS):
            raise click.BadParameter(f"{n} built-in calibration prompts: use 1..{len(CALIBRATION_PROMPTS)}, "
                                     "or give a prompt FILE", param_hint="--prompts")
        prompts = list(CALIBRATION_PROMPTS[:n])
    else:
        try:
            prompts = read_prompts(prompts_arg)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--prompts") from None
    settings = settings_for(model, num_inference_steps=steps, num_frames=frames, height=height, width=width,
                            sampler=sampler)
    pipe = load_pipeline_arg(model, device, dtype, settings)
    pipe.set_progress_bar_config(disable=True)
    echo_prompt_problems(pipe, prompts, settings.max_sequence_length)
    try:
        res = calibrate_axes_on_prompts(pipe, prompts, seed, settings, base)
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    res.save(out_path)
    for sw, chosen in res.chosen_axes().items():
        click.echo(f"{sw}: " + ", ".join(f"layer {k} -> {a}" for k, a in sorted(chosen.items(), key=lambda kv: int(kv[0]))))
    click.echo(f"-> {out_path}")


def _read_prompt_sets(prompts_arg, heldout_path) -> tuple[list[str], list[str]]:
    from kaleido.calibration import split_prompts
    from kaleido.prompts import read_prompts

    if prompts_arg is None:
        raise click.BadParameter("a calibration target needs calibration prompts: --prompts FILE "
                                 "(one prompt per line, or a JSON list)", param_hint="--prompts")
    if _builtin_count(prompts_arg) is not None:
        raise click.BadParameter(f"{prompts_arg!r}: with a target, --prompts takes a FILE of prompts (one per line "
                                 "or a JSON list), not a count", param_hint="--prompts")
    try:
        prompts = read_prompts(prompts_arg)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--prompts") from None
    heldout = None
    if heldout_path:
        try:
            heldout = read_prompts(heldout_path)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--heldout") from None
    try:
        return split_prompts(prompts, heldout)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--heldout" if heldout_path else "--prompts") from None


def _calibrate_target(model, base, out_path, prompts_arg, seeds, target_psnr, target_savings, savings_of, margin,
                      heldout_path, budget, bisect_steps, report_path, steps, sampler, frames, height, width, device,
                      dtype, results_dir, workers, scheduler, op_min_saving):
    from pathlib import Path

    from kaleido.calibration import calibrate_to_target_on_prompts
    from kaleido.compare.config_evaluator import SweepEvaluator
    from kaleido.cli._pipeline import load_pipeline_arg
    from kaleido.cli._prompts import echo_prompt_problems
    from kaleido.calibration.target import Target
    from kaleido.evaluation.generate import settings_for

    kind, value = ("psnr", target_psnr) if target_psnr is not None else ("savings", target_savings)
    try:
        target = Target(kind, value, savings_of)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--target-psnr" if target_psnr is not None else "--target-savings") from None
    try:
        search_target = target.raised_by(margin)
    except ValueError as e:
        raise click.BadParameter(f"target + margin: {e}", param_hint="--margin") from None
    calib, heldout = _read_prompt_sets(prompts_arg, heldout_path)
    seed_list = parse_seeds(seeds)
    settings = settings_for(model, num_inference_steps=steps, num_frames=frames, height=height, width=width,
                            sampler=sampler)
    pipe = load_pipeline_arg(model, device, dtype, settings)
    pipe.set_progress_bar_config(disable=True)
    echo_prompt_problems(pipe, [*calib, *heldout], settings.max_sequence_length)

    evaluator = None
    if workers or scheduler:
        if device != "cpu" or dtype != "fp32":
            raise click.UsageError(f"--device {device} --dtype {dtype}: the Dask workers run on the CPU in fp32; "
                                   "add --workers 0 to run the search in this process")
        runs = Path(results_dir) if results_dir else Path(out_path).parent / "calibration_runs"
        evaluator = SweepEvaluator(model, runs, settings.call_kwargs(), scheduler, max(1, workers))
        click.echo(f"candidates run through the Dask sweep ({scheduler or f'{max(1, workers)} local worker(s)'}), "
                   f"rows in {runs}")
    click.echo(f"target: {target.describe()}" + (f" (searched for {search_target.describe()})" if margin else "")
               + f"; {len(calib)} calibration and {len(heldout)} held-out prompts x seeds {seed_list}")
    try:
        with evaluator or contextlib.nullcontext():
            run = calibrate_to_target_on_prompts(pipe, base, target, calib, heldout, seed_list, settings, margin=margin,
                                                 budget=budget, bisect_steps=bisect_steps, meta={"model": model},
                                                 log=click.echo, evaluator=evaluator, op_min_saving=op_min_saving)
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    report_file = run.save(out_path, report_path)

    click.echo("")
    click.echo(f"{'config':42s} {'PSNR mean':>10s} {'PSNR min':>9s} {'SSIM':>6s} {'q.k^T saved':>12s} {'transformer':>12s}")
    for label, m in run.heldout.items():
        click.echo(f"{label:42s} {m.psnr_mean_db:10.2f} {m.psnr_min_db:9.2f} {m.ssim_mean:6.3f} "
                   f"{m.saved('self_qk'):12.1%} {m.saved('whole_transformer'):12.1%}")
    if not run.search.met_on_calibration:
        unit = "dB" if target.kind == "psnr" else ""
        click.echo(f"no candidate met {search_target.describe()} on the calibration prompts; wrote the closest "
                   f"(short by {search_target.shortfall(run.search.chosen.measure):.3g}{unit})")
    click.echo(f"held-out: target {target.describe()} {run.verdict()}")
    click.echo(f"-> {out_path}, {report_file}")
