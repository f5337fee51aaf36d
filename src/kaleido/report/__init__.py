"""``kaleido report``: one self-contained HTML page from the comparison's JSON rows."""

from .html import build_report

__all__ = ["build_report"]
