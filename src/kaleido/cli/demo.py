"""``kaleido demo``: the reuse core on its built-in synthetic example (:mod:`kaleido.reuse.example`)."""

from __future__ import annotations

import json

import click
import torch


@click.command("demo")
@click.option("--theta1", type=float, default=3.0, show_default=True, help="FULL threshold (int8 units).")
@click.option("--theta2", type=float, default=8.0, show_default=True, help="PARTIAL threshold (int8 units).")
@click.option("--low-bits", type=int, default=4, show_default=True, help="Width of a PARTIAL multiply's difference.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the synthetic example.")
@click.option("--exact-int8", is_flag=True, help="Use the bit-exact int8 path instead of the float path.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON instead of tables.")
def demo(theta1: float, theta2: float, low_bits: int, seed: int, exact_int8: bool, as_json: bool) -> None:
    """Run the reuse core on a built-in RoPE-like attention example and print its savings and error."""
    from kaleido.reuse.example import run_example

    torch.set_num_threads(1)
    try:
        res = run_example(theta1, theta2, low_bits, seed, exact_int8)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None
    if as_json:
        click.echo(json.dumps(res, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    g = res["grid"]
    table = Table(
        title=f"q.k^T reuse on a synthetic {g['T']}x{g['H']}x{g['W']} RoPE head "
        f"(theta1={theta1}, theta2={theta2}, low_bits={low_bits})"
    )
    for col in ("group", "channels", "axis", "COMPUTE", "PARTIAL", "FULL", "saved (8-bit eq.)"):
        table.add_column(col, justify="right")
    groups = res["groups"]
    for name, size, axis in zip(groups["names"], groups["sizes"], groups["axes"]):
        f = res["mode_fractions"][name]
        table.add_row(
            name, str(size), axis, f"{100 * f['compute']:.1f}%", f"{100 * f['partial']:.1f}%",
            f"{100 * f['full']:.1f}%", f"{100 * res['group_saved_fraction'][name]:.1f}%",
        )
    console = Console()
    console.print(table)
    console.print(f"q.k^T MACs: {res['qk_summary']}")
    console.print(
        f"output vs dense SDPA ({'int8' if exact_int8 else 'float'} path): "
        f"max abs error {res['max_abs_error']:.3g}, relative error {res['relative_error']:.3g}"
    )
