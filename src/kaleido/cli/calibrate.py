"""``kaleido calibrate``: choose the reuse axis of chunk groups per layer from a few generations.

Runs the calibration prompts (never the evaluation prompts) once per candidate axis and
writes a KaleidoConfig whose per-layer overrides hold, for each chunk-group switch
(``cross_qk``, ``proj``, ``ffn``), the axis with the largest 8-bit-equivalent saving,
plus ``calibration.json`` with the measured savings per switch, layer and axis.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import click


@click.command()
@click.option("--model", default="tiny", show_default=True, help="'tiny', a local pipeline folder, or a hub id.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None, help="Base KaleidoConfig.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), required=True, help="Calibrated config (.yaml/.json).")
@click.option("--prompts", "n_prompts", type=click.IntRange(1, 3), default=2, show_default=True)
@click.option("--seed", type=int, default=100, show_default=True)
@click.option("--steps", type=click.IntRange(1, 1000), default=None)
@click.option("--frames", type=click.IntRange(1), default=None)
@click.option("--height", type=click.IntRange(8), default=None)
@click.option("--width", type=click.IntRange(8), default=None)
@click.option("--device", default="cpu", show_default=True)
@click.option("--dtype", type=click.Choice(["fp32", "bf16", "fp16"]), default="fp32", show_default=True)
def calibrate(model, config_path, out_path, n_prompts, seed, steps, frames, height, width, device, dtype):
    """Calibrate chunk-group reuse axes; write the calibrated config and calibration.json."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    from kaleido.integrations import KaleidoConfig
    from kaleido.integrations.calibrate import calibrate_axes
    from kaleido.cli._pipeline import load_pipeline_arg
    from kaleido.integrations.evaluation import CALIBRATION_PROMPTS, generate, settings_for

    try:
        base = KaleidoConfig.load(config_path) if config_path else KaleidoConfig()
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--config") from None
    settings = settings_for(model, steps=steps, frames=frames, height=height, width=width)
    pipe = load_pipeline_arg(model, device, dtype)
    pipe.set_progress_bar_config(disable=True)

    def run():
        for p in CALIBRATION_PROMPTS[:n_prompts]:
            generate(pipe, p, seed, settings)

    try:
        cfg, table = calibrate_axes(pipe.transformer, run, base)
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    out = Path(out_path)
    cfg.save(out)
    (out.parent / "calibration.json").write_text(json.dumps({"prompts": list(CALIBRATION_PROMPTS[:n_prompts]),
                                                             "seed": seed, "saved_fraction": table}, indent=1))
    for sw, per_layer in table.items():
        chosen = {layer: max(v, key=v.get) for layer, v in per_layer.items()}
        click.echo(f"{sw}: " + ", ".join(f"layer {k} -> {a}" for k, a in sorted(chosen.items(), key=lambda kv: int(kv[0]))))
    click.echo(f"-> {out}")
