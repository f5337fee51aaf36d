"""A griffe extension used by the API reference (mkdocs.yml): Sphinx roles as code spans.

The package's docstrings cross-reference with Sphinx roles (``:func:`apply```, ``:class:`~kaleido.reuse.ModeMap```);
mkdocstrings renders docstrings as Markdown, where a role would show literally. This rewrites each role to a plain
code span (``~`` keeps the last component, as Sphinx does) before the docstring is rendered.
"""

from __future__ import annotations

import re

import griffe

_ROLE = re.compile(r":(?:py:)?(?:func|class|mod|meth|attr|data|exc|obj|const|ref):`(~?)([^`<]+?)(?:\s*<[^>]+>)?`")


def _code(match: re.Match) -> str:
    name = match.group(2).strip()
    if match.group(1):
        name = name.rsplit(".", 1)[-1]
    return f"`{name}`"


class SphinxRoles(griffe.Extension):
    """Rewrite Sphinx roles in every docstring to Markdown code spans."""

    def on_instance(self, *, obj, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(_code, obj.docstring.value)
