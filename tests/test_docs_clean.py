"""The user-facing documents speak to users: no tracker numbers, no talk of work sessions, a short front page.

``README.md`` and every Markdown file under ``docs/`` (sub-folders too) must not name an issue number
("issue 19", "issue #19", "issue-4", "(#19)"), a work session ("this session", "the third session") or
"stop"; dated history belongs in ``CHANGELOG.md``, which is not checked. Markdown anchors
(``page.md#12-a-chip``), colours (``#1f77b4``) and HTML entities (``&#39;``) are not issue numbers.
``README.md`` is a front page: under 120 lines.

The code speaks to its users too: every ``.py`` file under ``src/``, ``tests/`` and ``benchmarks/`` and
``DEVELOPERS.md`` must not name an issue number or a work session either (say what the code does or
measures, not which request asked for it). A pytest fixture's ``scope="session"`` and an attribute such as
``requests.Session`` are not work sessions; ``stop`` (``slice.stop``, ``--stop-after``) and ``#`` (comments,
CSS colours) are ordinary in code and are not checked there. This file is not scanned: its own examples
are the phrases it forbids.
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


#: what code, its comments and docstrings, and DEVELOPERS.md must not say
CODE_FORBIDDEN = {
    "an issue number": re.compile(r"(?<![a-z0-9])issues?[\s_-]*#?\s*\d+", re.I),  # test_..._issue_14 too
    "a work session": re.compile(r"(?<!scope=\")(?<!scope=')(?<!\.)\bsessions?\b", re.I),
}


def user_docs() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def code_files() -> list[Path]:
    this = Path(__file__).resolve()
    files = [p for folder in ("src", "tests", "benchmarks") for p in sorted((ROOT / folder).rglob("*.py"))
             if p.resolve() != this]
    return [*files, ROOT / "DEVELOPERS.md"]


def offences(text: str, forbidden: dict[str, re.Pattern] = FORBIDDEN) -> list[str]:
    """``"line N: <what> in '...'"`` for every phrase of ``text`` that ``forbidden`` names."""
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        for what, rx in forbidden.items():
            for m in rx.finditer(line):
                start = max(0, m.start() - 30)
                found.append(f"line {n}: {what} in {line[start:m.end() + 30]!r}")
    return found


@pytest.mark.parametrize("doc", user_docs(), ids=lambda p: str(p.relative_to(ROOT)))
def test_user_docs_name_no_issue_session_or_stop(doc):
    bad = offences(doc.read_text(encoding="utf-8"))
    assert not bad, (f"{doc.relative_to(ROOT)} speaks of the project's tracker or work sessions; say what is true "
                     "now and move dated history to CHANGELOG.md:\n" + "\n".join(bad))


def test_code_names_no_issue_or_session():
    bad = {str(f.relative_to(ROOT)): o for f in code_files()
           if (o := offences(f.read_text(encoding="utf-8"), CODE_FORBIDDEN))}
    assert not bad, ("code, its comments and DEVELOPERS.md speak of the project's tracker or work sessions; say what "
                     "the code does now:\n" + "\n".join(f"{f}: {o}" for f, os_ in bad.items() for o in os_))


def test_the_code_scan_covers_the_code():
    names = {str(f.relative_to(ROOT)) for f in code_files()}
    assert {"src/kaleido/__init__.py", "benchmarks/bench_generate.py", "tests/test_docs_snippets.py",
            "DEVELOPERS.md"} <= names
    assert "tests/test_docs_clean.py" not in names


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


@pytest.mark.parametrize("text", [
    "#: largest folder allowed (issue 3)", "the issue-4 evaluation", '"""The second resolution (issue 16)."""',
    "def test_readme_commands_include_the_issue_14_ones():", "# measured in the third session",
])
def test_the_code_check_catches(text):
    assert offences(text, CODE_FORBIDDEN), text


@pytest.mark.parametrize("text", [
    '@pytest.fixture(scope="session")', "@pytest.fixture(scope='session')", "s = requests.Session()",
    "onnxruntime.InferenceSession(path)", "k = sl.stop - sl.start", 'p.add_argument("--stop-after")',
    "color:#222;", "# 1. the first step", "tissue 5", "the known issues of 2 models",
])
def test_the_code_check_leaves_ordinary_code_alone(text):
    assert not offences(text, CODE_FORBIDDEN), offences(text, CODE_FORBIDDEN)
