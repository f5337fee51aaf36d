"""Prompt checks the model-running subcommands share: each problem printed once, as one line, up front."""

from __future__ import annotations

import contextlib
import warnings

import click


def echo_prompt_problems(pipe, prompts, max_sequence_length: int | None) -> None:
    """``warning: <problem>`` on stderr for each prompt the pipeline will not read as written
    (:func:`kaleido.evaluation.generate.prompt_problems`)."""
    from kaleido.evaluation.generate import prompt_problems

    for p in dict.fromkeys(prompts):
        for msg in prompt_problems(pipe, p, max_sequence_length):
            click.echo(f"warning: {msg}", err=True)


def echo_settings_problems(pipe, settings) -> None:
    """``warning: <problem>`` once on stderr when a distilled student runs at a step count, guidance or sampler it
    was not distilled for (:func:`kaleido.tiny.pipeline.distillation_message`)."""
    from kaleido.tiny.pipeline import distillation_message

    if getattr(pipe, "distilled", False):
        msg = distillation_message(pipe.demo, settings.num_inference_steps, settings.guidance_scale,
                                   settings.sampler, getattr(pipe, "made_for", "euler"))
        if msg:
            click.echo(f"warning: {msg}", err=True)


@contextlib.contextmanager
def prompt_warnings_shown():
    """Inside: the library's :class:`~kaleido.tiny.pipeline.PromptWarning` and ``DistillationWarning`` stay quiet,
    since :func:`echo_prompt_problems` / :func:`echo_settings_problems` already printed each problem once (instead of once per generation,
    with a source line)."""
    from kaleido.tiny.pipeline import DistillationWarning, PromptWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PromptWarning)
        warnings.simplefilter("ignore", DistillationWarning)
        yield
