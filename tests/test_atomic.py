"""Atomic writes: an interrupted write leaves the old file intact and no temporary file behind."""

import csv
import json
import os

import pytest

from kaleido.atomic import atomic_path, open_atomic, write_atomic


class Unserialisable:
    pass


def test_write_replaces_the_file_and_leaves_nothing_else(tmp_path):
    out = tmp_path / "metrics.json"
    write_atomic(out, '{"a": 1}')
    write_atomic(out, b'{"a": 2}')
    assert json.loads(out.read_text()) == {"a": 2}
    assert os.listdir(tmp_path) == ["metrics.json"]


def test_exception_mid_serialisation_keeps_the_old_file(tmp_path):
    out = tmp_path / "rows.json"
    out.write_text('{"old": true}')
    with pytest.raises(TypeError):
        with open_atomic(out) as f:
            # json.dump streams: the first keys are written before the bad value raises
            json.dump({"a": list(range(1000)), "z": Unserialisable()}, f)
    assert out.read_text() == '{"old": true}'
    assert os.listdir(tmp_path) == ["rows.json"]


def test_interrupted_csv_leaves_no_half_file(tmp_path):
    out = tmp_path / "sweep.csv"
    with pytest.raises(RuntimeError):
        with open_atomic(out, newline="") as f:
            w = csv.writer(f)
            w.writerow(["a", "b"])
            f.flush()
            raise RuntimeError("killed mid-table")
    assert not out.exists() and os.listdir(tmp_path) == []


def test_failed_rename_keeps_the_old_file(tmp_path, monkeypatch):
    out = tmp_path / "report.html"
    out.write_text("old report")

    def broken_replace(src, dst):
        raise OSError("disk went away")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk went away"):
        write_atomic(out, "new report " * 1000)
    assert out.read_text() == "old report"
    assert os.listdir(tmp_path) == ["report.html"]


def test_path_writers_keep_their_format_suffix(tmp_path):
    import numpy as np

    out = tmp_path / "dense-abc.npy"
    with atomic_path(out) as tmp:
        assert tmp.parent == tmp_path and tmp.suffix == ".npy" and tmp.name.startswith(".")
        np.save(tmp, np.arange(3), allow_pickle=False)  # would append ".npy" to any other suffix
    assert np.load(out, allow_pickle=False).tolist() == [0, 1, 2]
    assert os.listdir(tmp_path) == ["dense-abc.npy"]


def test_a_writer_that_writes_nothing_is_an_error(tmp_path):
    out = tmp_path / "plot.png"
    with pytest.raises(FileNotFoundError, match="created no file"):
        with atomic_path(out):
            pass
    assert not out.exists()


def test_bad_mode_is_refused(tmp_path):
    with pytest.raises(ValueError, match="'a'"):
        with open_atomic(tmp_path / "x.txt", "a"):
            pass
