"""Entry point of the ``kaleido`` command.

Each subcommand lives in its own module and is imported only when it runs, so
``kaleido --help`` stays fast and one heavy dependency never slows another command.
"""

from __future__ import annotations

import importlib
import os

import click

#: subcommand name -> "module:attribute" of a click command
COMMANDS: dict[str, str] = {
    "demo": "kaleido.cli.demo:demo",
    "compare": "kaleido.cli.compare:compare",
    "report": "kaleido.cli.report:report",
    "train-tiny": "kaleido.cli.train_tiny:train_tiny",
    "simulate": "kaleido.cli.simulate:simulate",
    "generate": "kaleido.cli.generate:generate",
    "sweep": "kaleido.cli.sweep:sweep",
    "calibrate": "kaleido.cli.calibrate:calibrate",
    "characterize": "kaleido.cli.characterize:characterize",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module, attr = target.split(":")
        return getattr(importlib.import_module(module), attr)


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
