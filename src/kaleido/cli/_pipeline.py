"""Pieces the model-running subcommands share."""

from __future__ import annotations

import click


def load_pipeline_arg(model: str, device: str, dtype: str):
    """:func:`kaleido.integrations.evaluation.load_any_pipeline`, with a bad ``--model`` as a usage error."""
    from kaleido.integrations.evaluation import load_any_pipeline

    try:
        return load_any_pipeline(model, device=device, dtype=dtype)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--model") from None
