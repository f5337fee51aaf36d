"""``SimulatorInputs``: a row's simulator inputs, typed, serialised in one place and read back in one place.

Checked against the committed comparison rows (written by the code path before the typed inputs existed): reading
a row and serialising it again gives the row's own entries back, for Kaleido's profile and a baseline's replay.
"""

import json
from pathlib import Path

import pytest

from kaleido.evaluation.simulator_profiles import EXTRA_KEYS, SimulatorInputs
from kaleido.hw.inputs.baseline_profile import BaselineProfile
from kaleido.hw.inputs.profile import Profile

ROWS = Path(__file__).resolve().parents[2] / "docs" / "results" / "compare"


def _rows_with(key: str, limit: int = 3) -> list[dict]:
    out = []
    for p in sorted(ROWS.glob("*.json")):
        row = json.loads(p.read_text())
        if key in row.get("report", {}).get("extra", {}):
            out.append(row)
        if len(out) == limit:
            break
    return out


@pytest.mark.parametrize("kind", sorted(EXTRA_KEYS))
def test_committed_rows_read_back_to_their_own_entries(kind):
    key = EXTRA_KEYS[kind]
    rows = _rows_with(key)
    assert rows, f"no committed row carries {key}"
    for row in rows:
        inputs = SimulatorInputs.from_report(row["report"])
        stats = getattr(inputs, kind)
        assert isinstance(stats, Profile if kind == "kaleido" else BaselineProfile)
        extra = row["report"]["extra"]
        again = inputs.to_extra()
        assert again[key] == extra[key]
        assert {k: v for k, v in again.items() if k.startswith("accel_profile_notes")} == \
            {k: v for k, v in extra.items() if k.startswith("accel_profile_notes")}


def test_a_row_without_inputs_has_none_and_errors_are_kept():
    empty = SimulatorInputs.from_report({"extra": {}})
    assert empty.kaleido is None and empty.accel is None and empty.to_extra() == {}
    failed = SimulatorInputs.from_report({"extra": {"accel_profile_error": "exion: no records"}})
    assert failed.accel is None and failed.errors == {"accel": "exion: no records"}
    assert failed.to_extra() == {"accel_profile_error": "exion: no records"}


def test_a_corrupt_entry_is_one_line_naming_the_row():
    with pytest.raises(ValueError, match="tome row's hw_profile"):
        SimulatorInputs.from_report({"extra": {"hw_profile": {"format": "nope"}}}, "tome row")
