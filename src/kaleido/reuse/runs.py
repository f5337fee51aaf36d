"""Runs of channel groups: consecutive groups of one size and one reuse axis.

The torch float path (:mod:`kaleido.reuse.quant`, :mod:`kaleido.reuse.decide`) and the compiled
CPU kernels (:mod:`kaleido.reuse.cpu_kernels`) both walk an operand's groups a run at a time,
so the runs live below both (the kernels import no torch-path module, which imports them lazily).
"""

from __future__ import annotations

from .groups import ChannelGroups


def group_runs(groups: ChannelGroups) -> list[tuple[int, int, int]]:
    """``(first group, number of groups, size)`` of each run of consecutive groups of one size and axis.

    A run's channels are one contiguous block that views as ``(n, size)``, so work on all
    its groups is one tensor op instead of one per group (chunk groups are one run).
    """
    runs: list[tuple[int, int, int]] = []
    for g, (size, axis) in enumerate(zip(groups.sizes, groups.axes)):
        if runs and runs[-1][2] == size and groups.axes[runs[-1][0]] == axis:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1, size)
        else:
            runs.append((g, 1, size))
    return runs
