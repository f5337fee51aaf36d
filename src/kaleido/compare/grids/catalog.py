"""The one registry of sweep grids: which settings of each technique the comparison sweeps, and which stacks.

:data:`GRIDS` maps a technique's name (:data:`kaleido.techniques.TECHNIQUES`) to its grid (:data:`~.policy.Grid`);
:data:`STACKS` maps a step cache's name to its stacks with Kaleido, which the ``stack`` technique's grid
(:func:`stack`) gathers.  A new technique registers its grid here (:func:`register_grid`); a technique without
one is left out of the default sweep (a test wants one for every built-in technique).
"""

from __future__ import annotations

from . import reuse_and_sparsity as rs
from . import step_caches as sc
from .policy import Grid, GridUnavailable

#: technique name -> its grid
GRIDS: dict[str, Grid] = {}
#: step cache name -> its stacks with Kaleido (``{"techniques": [...]}`` settings of the ``stack`` technique)
STACKS: dict[str, Grid] = {}


def register_grid(name: str, grid: Grid, stacks: Grid | None = None) -> None:
    """Sweep ``grid(pipeline, steps, sampler)`` for the technique ``name`` (and ``stacks``, a step cache's stacks
    with Kaleido); a name may be registered once."""
    if name in GRIDS:
        raise ValueError(f"technique {name!r} already has a sweep grid")
    GRIDS[name] = grid
    if stacks is not None:
        STACKS[name] = stacks


def stack(pipeline: str, steps: int | None, sampler: str | None = None) -> list[dict]:
    """The stacks the step caches register (a cache without points at ``steps``, e.g. MagCache without calibrated
    ratios, heads none), in the techniques' registration order."""
    from kaleido.techniques import TECHNIQUES

    out: list[dict] = []
    for name in TECHNIQUES:
        if name in STACKS:
            try:
                out += STACKS[name](pipeline, steps, sampler)
            except GridUnavailable:
                pass
    return out


for _name, _grid, _stacks in (
        ("kaleido", rs.kaleido, None), ("sparse_videogen", rs.sparse_videogen, None),
        ("block_topk", rs.block_topk, None), ("tome", rs.tome, None), ("adaptiv", rs.adaptiv, None),
        ("exion", rs.exion, None), ("cambricon_d", rs.cambricon_d, None),
        ("pab", sc.pab, None), ("fbcache", sc.fbcache, None), ("taylorseer", sc.taylorseer, sc.taylorseer_stacks),
        ("magcache", sc.magcache, sc.magcache_stacks), ("cache_dit", sc.cache_dit, sc.cache_dit_stacks),
        ("stack", stack, None)):
    register_grid(_name, _grid, _stacks)
del _name, _grid, _stacks
