"""Pieces of the training loops (:mod:`kaleido.tiny.train_transformer`) shared by the distillation phases."""

from __future__ import annotations

import json

import pytest

from kaleido.tiny.train_transformer import phase_logger


def test_phase_logger_adds_validation_at_zero_every_n_and_the_last_step(tmp_path):
    calls = []
    record = phase_logger(tmp_path / "log.jsonl", "own-states", 4, 6, False,
                          lambda: calls.append(1) or dict(val=1.5))
    for step in range(7):
        record(step, loss=0.1 * step)
    lines = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines] == list(range(7))
    assert [r["step"] for r in lines if "val" in r] == [0, 4, 6] and len(calls) == 3
    assert all(r["phase"] == "own-states" for r in lines) and lines[3]["loss"] == pytest.approx(0.3)
