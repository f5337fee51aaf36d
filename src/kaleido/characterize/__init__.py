"""Characterisation of a vDiT's latent space (the paper's first contribution).

For every reuse operand (self-attention q and k after RoPE, cross-attention q, the
inputs of the projections and the feed-forward), layer, head, channel group and
denoising step: how alike neighbouring tokens are along t, h and w - the SPEC's Delta in
int8 units and the cosine similarity - which axis is best per group, and whether the
paper's claim (t-group alike along space, h/w-groups alike along time) holds.

* :mod:`.neighbours` - the statistics of one tensor (pure functions);
* :mod:`.capture` - the observer that collects them during a generation;
* :mod:`.result` - tables, best axes, the claim check, ``characterization.json``;
* :mod:`.plots` - the heatmaps.
"""

from .capture import OperandRecorder, capture_config, characterize_runs
from .neighbours import AXES, NeighbourStats, hist_quantile, neighbour_stats
from .result import Characterization, ClaimCheck, OperandTable, best_axis, check_claim

__all__ = [
    "AXES",
    "NeighbourStats",
    "neighbour_stats",
    "hist_quantile",
    "OperandRecorder",
    "capture_config",
    "characterize_runs",
    "Characterization",
    "OperandTable",
    "ClaimCheck",
    "best_axis",
    "check_claim",
]
