"""The channel-wise reuse core (SPEC §2-4): plain functions on tensors.

Shared types live here: :class:`TokenGrid`, :class:`ChannelGroups`,
:class:`ModeMap` / :class:`ModeStats` / :class:`Mode`, :class:`OpCounts`.
The core: :class:`ReuseConfig`, :func:`quantize`, :func:`decide`,
:func:`anchor_index`, :func:`reuse_matmul`, :func:`reuse_attention`,
:func:`reuse_linear`.
"""

from .grid import Axis, TokenGrid
from .groups import ROPE_DEFAULT_AXES, ChannelGroups
from .modes import MAX_PATTERN_GROUPS, Mode, ModeMap, ModeStats
from .opcounts import OpCounts
from .config import GRANULARITIES, METRICS, ReuseConfig
from .quant import quantize, quantize_columns
from .decide import anchor_index, decide, decide_effective, decide_with_anchors, effective_operand
from .matmul import dequantize_group_products, int8_group_products, reuse_matmul
from .attention import AttentionStats, head_saved_fractions, reuse_attention
from .linear import reuse_linear

__all__ = [
    "Axis",
    "TokenGrid",
    "ChannelGroups",
    "ROPE_DEFAULT_AXES",
    "Mode",
    "ModeMap",
    "ModeStats",
    "MAX_PATTERN_GROUPS",
    "OpCounts",
    "ReuseConfig",
    "METRICS",
    "GRANULARITIES",
    "quantize",
    "quantize_columns",
    "decide",
    "anchor_index",
    "decide_with_anchors",
    "decide_effective",
    "effective_operand",
    "reuse_matmul",
    "int8_group_products",
    "dequantize_group_products",
    "reuse_attention",
    "AttentionStats",
    "head_saved_fractions",
    "reuse_linear",
]
