"""Prompt files for ``kaleido characterize`` and ``kaleido calibrate``.

A prompt file is either a JSON list of strings (``.json`` suffix, or text starting with
``[``) or plain text with one prompt per line (blank lines and lines starting with
``#`` are skipped).
"""

from __future__ import annotations

import json
from pathlib import Path


def read_prompts(path: str | Path) -> list[str]:
    """The prompts of ``path`` (see the module docstring); ``ValueError`` if missing or empty."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"prompt file {str(p)!r} does not exist: give a text file with one prompt per line "
                         "or a JSON list of strings")
    text = p.read_text(encoding="utf-8")
    if p.suffix.lower() == ".json" or text.lstrip().startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"prompt file {str(p)!r} is not a valid JSON list: {e}") from None
        if not isinstance(data, list) or not all(isinstance(x, str) for x in data):
            raise ValueError(f"prompt file {str(p)!r}: a JSON prompt file must be a list of strings")
        prompts = [x.strip() for x in data if x.strip()]
    else:
        prompts = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if not prompts:
        raise ValueError(f"prompt file {str(p)!r} holds no prompts: write one prompt per line (or a JSON list)")
    return prompts


def write_prompts(path: str | Path, prompts: list[str]) -> Path:
    """One prompt per line (the inverse of :func:`read_prompts` for plain text)."""
    p = Path(path)
    if any("\n" in x for x in prompts):
        raise ValueError("prompts with line breaks cannot be written one per line; use a JSON list")
    from kaleido.atomic import write_atomic

    return write_atomic(p, "".join(x + "\n" for x in prompts))
