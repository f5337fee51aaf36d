"""Entry point of the ``kaleido`` command.

Each subcommand lives in its own module and is imported only when it runs, so
``kaleido --help`` stays fast and one heavy dependency never slows another command.
"""

from __future__ import annotations

import os
from typing import Callable

import click


def _demo() -> click.Command:
    from kaleido.cli.demo import demo

    return demo


def _compare() -> click.Command:
    from kaleido.cli.compare import compare

    return compare


def _report() -> click.Command:
    from kaleido.cli.report import report

    return report


def _train_tiny() -> click.Command:
    from kaleido.cli.train_tiny import train_tiny

    return train_tiny


def _simulate() -> click.Command:
    from kaleido.cli.simulate import simulate

    return simulate


def _generate() -> click.Command:
    from kaleido.cli.generate import generate

    return generate


def _sweep() -> click.Command:
    from kaleido.cli.sweep import sweep

    return sweep


def _calibrate() -> click.Command:
    from kaleido.cli.calibrate import calibrate

    return calibrate


def _characterize() -> click.Command:
    from kaleido.cli.characterize import characterize

    return characterize


#: subcommand name -> the function that imports its module and returns its click command
COMMANDS: dict[str, Callable[[], click.Command]] = {
    "demo": _demo,
    "compare": _compare,
    "report": _report,
    "train-tiny": _train_tiny,
    "simulate": _simulate,
    "generate": _generate,
    "sweep": _sweep,
    "calibrate": _calibrate,
    "characterize": _characterize,
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        load = COMMANDS.get(name)
        return None if load is None else load()


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kaleido-vdit")
def cli() -> None:
    """Kaleido: channel-wise reuse for video diffusion transformers, and its accelerator."""


def main() -> None:
    # Small ops on a 2-core machine suffer badly from OpenMP spin-waits.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    cli()


if __name__ == "__main__":
    main()
