"""Prompt checks the model-running subcommands share: each problem printed once, as one line, up front."""

from __future__ import annotations

import contextlib
import warnings

import click


def echo_prompt_problems(pipe, prompts, max_sequence_length: int | None) -> None:
    """``warning: <problem>`` on stderr for each prompt the pipeline will not read as written
    (:func:`kaleido.integrations.evaluation.prompt_problems`)."""
    from kaleido.integrations.evaluation import prompt_problems

    for p in dict.fromkeys(prompts):
        for msg in prompt_problems(pipe, p, max_sequence_length):
            click.echo(f"warning: {msg}", err=True)


@contextlib.contextmanager
def prompt_warnings_shown():
    """Inside: the library's :class:`~kaleido.tiny.pipeline.PromptWarning` stays quiet, since
    :func:`echo_prompt_problems` already printed each problem once (instead of once per generation,
    with a source line)."""
    from kaleido.tiny.pipeline import PromptWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PromptWarning)
        yield
