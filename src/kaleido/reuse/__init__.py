"""The channel-wise reuse core (SPEC §2-4): plain functions on tensors.

Shared types live here: :class:`TokenGrid`, :class:`ChannelGroups`,
:class:`ModeMap` / :class:`ModeStats` / :class:`Mode`, :class:`OpCounts`.
"""

from .grid import Axis, TokenGrid
from .groups import ROPE_DEFAULT_AXES, ChannelGroups
from .modes import MAX_PATTERN_GROUPS, Mode, ModeMap, ModeStats
from .opcounts import OpCounts

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
]
