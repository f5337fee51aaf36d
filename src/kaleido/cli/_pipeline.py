"""Pieces the model-running subcommands share."""

from __future__ import annotations

import click


def generation_options(command):
    """The generation-setting options every model-running subcommand takes: ``--steps``, ``--frames``,
    ``--height``, ``--width`` (default: the model's demo settings, :func:`kaleido.evaluation.generate.settings_for`),
    ``--sampler``, ``--device`` and ``--dtype``."""
    for opt in reversed((
        click.option("--steps", type=click.IntRange(1, 1000), default=None,
                      help="Denoising steps (default: the model's demo setting)."),
        sampler_option(),
        click.option("--frames", type=click.IntRange(1), default=None, help="Frames (default: the model's)."),
        click.option("--height", type=click.IntRange(8), default=None, help="Height in pixels (default: the model's)."),
        click.option("--width", type=click.IntRange(8), default=None, help="Width in pixels (default: the model's)."),
        click.option("--device", default="cpu", show_default=True, callback=_check_device_option,
                     help="cpu, cuda, cuda:N or mps; one this machine lacks is refused before anything loads."),
        click.option("--dtype", type=click.Choice(["fp32", "bf16", "fp16"]), default="fp32", show_default=True),
    )):
        command = opt(command)
    return command


def sampler_option():
    """``--sampler {euler,consistency}`` (default: the model's own; :mod:`kaleido.sampling`)."""
    from kaleido.sampling import SAMPLERS

    return click.option("--sampler", type=click.Choice(SAMPLERS), default=None,
                        help="euler: deterministic ODE steps; consistency: x0 predicted and re-noised with fresh "
                             "noise each step, as TurboDiffusion samples (default: the model's own).")


def _check_device_option(ctx, param, value: str) -> str:
    if value == "cpu":
        return value
    from kaleido.device import check_device

    try:
        check_device(value)
    except ValueError as e:
        raise click.BadParameter(str(e), ctx=ctx, param=param) from None
    return value


def parse_seeds(text: str, param_hint: str = "--seeds") -> list[int]:
    try:
        seeds = [int(s) for s in text.replace(" ", "").split(",") if s]
    except ValueError:
        raise click.BadParameter(f"{text!r}: give comma-separated integer seeds, e.g. '0,1'", param_hint=param_hint) from None
    if not seeds:
        raise click.BadParameter("give at least one seed, e.g. '0'", param_hint=param_hint)
    return seeds


def load_pipeline_arg(model: str, device: str, dtype: str, settings=None):
    """:func:`kaleido.tiny.pipeline.load_pipeline`, with a bad ``--model``, a ``--dtype`` the ``--device`` cannot run
    (fp16 on the CPU: refused before loading) and, given the run's ``settings``, a ``--height`` / ``--width`` the
    loaded pipeline cannot generate (:meth:`~kaleido.generation_settings.GenerationSettings.check_for`) as usage
    errors; a distilled student run off its step count or guidance gets one warning line."""
    from kaleido.evaluation.generate import show_progress
    from kaleido.tiny.pipeline import check_dtype, load_pipeline

    try:
        check_dtype(device, dtype)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--dtype") from None

    if not show_progress(None):  # a log, not a terminal: no loading bars from diffusers / transformers either
        import diffusers.utils.logging
        import transformers.utils.logging

        diffusers.utils.logging.disable_progress_bar()
        transformers.utils.logging.disable_progress_bar()
    try:
        pipe = load_pipeline(model, device=device, dtype=dtype)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--model") from None
    if settings is not None and settings.sampler is not None:
        from kaleido.sampling import make_sampler

        try:
            make_sampler(pipe.scheduler, settings.sampler)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--sampler") from None
    if settings is not None:
        try:
            settings.check_for(pipe)
        except ValueError as e:
            from kaleido.generation_settings import size_rule

            multiple = size_rule(pipe)[0]
            bad = [f"--{n}" for n in ("height", "width") if (getattr(settings, n) or multiple) % multiple]
            raise click.BadParameter(str(e), param_hint="/".join(bad)) from None
        from kaleido.cli._prompts import echo_settings_problems

        echo_settings_problems(pipe, settings)
    return pipe
