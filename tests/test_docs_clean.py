"""The user-facing documents speak to users: no tracker numbers, no talk of work sessions, a short front page.

``README.md`` and every Markdown file under ``docs/`` (sub-folders too) must not name an issue number
("issue 19", "issue #19", "issue-4", "(#19)"), a work session ("this session", "the third session") or
"stop"; dated history belongs in ``CHANGELOG.md``, which is not checked. Markdown anchors
(``page.md#12-a-chip``), colours (``#1f77b4``) and HTML entities (``&#39;``) are not issue numbers.
``README.md`` is a front page: under 120 lines.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README_MAX_LINES = 120

#: what a user-facing document must not say, with the reason shown on failure
FORBIDDEN = {
    "an issue number": re.compile(r"\bissues?[\s-]*#?\s*\d+", re.I),
    "a bare #number": re.compile(r"(?<![\w&/#])(?<!\]\()#\d{1,5}\b(?![-\w])"),
    "a work session": re.compile(r"\bsessions?\b", re.I),
    "'stop'": re.compile(r"(?<![\w-])stop(?![\w-])", re.I),
}


def user_docs() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def offences(text: str) -> list[str]:
    """``"line N: <what> in '...'"`` for every forbidden phrase of ``text``."""
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        for what, rx in FORBIDDEN.items():
            for m in rx.finditer(line):
                start = max(0, m.start() - 30)
                found.append(f"line {n}: {what} in {line[start:m.end() + 30]!r}")
    return found


@pytest.mark.parametrize("doc", user_docs(), ids=lambda p: str(p.relative_to(ROOT)))
def test_user_docs_name_no_issue_session_or_stop(doc):
    bad = offences(doc.read_text(encoding="utf-8"))
    assert not bad, (f"{doc.relative_to(ROOT)} speaks of the project's tracker or work sessions; say what is true "
                     "now and move dated history to CHANGELOG.md:\n" + "\n".join(bad))


def test_readme_is_a_short_front_page():
    n = len((ROOT / "README.md").read_text(encoding="utf-8").splitlines())
    assert n < README_MAX_LINES, f"README.md has {n} lines; keep it under {README_MAX_LINES} and move detail to docs/"


@pytest.mark.parametrize("text", [
    "issue 19's bar is not met", "see issue #19", "Issue 19's bar", "the issue-4 target", "issues 3 and 4",
    "fixed in #19", "(#7)", "the third session", "this session's rewrite", "in the first session",
    "Sessions of 2026-12-02", "the run had to stop", "Stop.",
])
def test_the_check_catches(text):
    assert offences(text), text


@pytest.mark.parametrize("text", [
    "see [the chip](hardware.md#12-a-chip-of-several-arrays)", "an anchor [x](#9b-modelling-choices)",
    "colour #1f77b4 and #fff", "an entity &#39; and &#x27;", "| # | method |", "## 9b. Modelling choices",
    "the known issues of the model", "it stopped at its wall-clock cap", "a non-stop run", "stops with a message",
    "onnxruntime.InferenceSession", "step 1,500", "issuer", "C# code",
])
def test_the_check_leaves_ordinary_text_alone(text):
    assert not offences(text), offences(text)
