"""How the comparison's plots and tables draw each technique: its colour.

Presentation only, so it lives beside the plots and the report, not in the technique registry (which holds
what the library needs at run time). A technique not listed here is drawn in :data:`DEFAULT_COLOUR`; a new
technique adds its line here to get a colour of its own.
"""

from __future__ import annotations

#: technique name -> its plot colour (matplotlib's tab10 / tab20 palette; Kaleido red)
COLOURS: dict[str, str] = {
    "kaleido": "#d62728",
    "sparse_videogen": "#1f77b4",
    "block_topk": "#17becf",
    "tome": "#2ca02c",
    "adaptiv": "#98df8a",
    "exion": "#ff7f0e",
    "cambricon_d": "#7f7f7f",
    "pab": "#9467bd",
    "fbcache": "#c5b0d5",
    "taylorseer": "#8c564b",
    "magcache": "#c49c94",
    "cache_dit": "#bcbd22",
    "stack": "#e377c2",
}
DEFAULT_COLOUR = "black"


def colour_of(name: str, default: str = DEFAULT_COLOUR) -> str:
    """The plot colour of the technique ``name`` (``default`` for one without a colour here)."""
    return COLOURS.get(name, default)
