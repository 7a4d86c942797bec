"""What a run's meta.json records: the software (xlabench, Python, libtpu where installed), when it ended,
and a device count that agrees with its rows (the probe worker has one device; train rows may have 8)."""

from __future__ import annotations

import json
import platform

import xlabench
from xlabench import results


def test_meta_records_versions_and_the_end_and_the_rows_device_counts(tmp_path):
    files = results.RunFiles(tmp_path / "s" / "run1.csv")
    files.csv.parent.mkdir(parents=True)
    meta = {"run_id": "run1", "env": {"device_count": 1, "device_kind": "cpu"}}
    results.write_meta(files, meta)
    got = json.loads(files.meta.read_text())
    assert got["xlabench_version"] == xlabench.__version__
    assert got["python_version"] == platform.python_version()
    assert "libtpu_version" in got  # None where libtpu is not installed
    assert "ended" not in got
    results.finish_meta(files, meta, [{"device_count": 8}, {"device_count": 8}, {"device_count": None}])
    got = json.loads(files.meta.read_text())
    assert got["ended"] and got["ended"] >= got.get("started", "")
    assert got["env"]["device_count"] == 8 and got["device_counts"] == [8]
    assert got["env"]["probe_device_count"] == 1  # what the probe worker saw, kept under its own name


def test_a_copy_of_the_tree_run_elsewhere_records_the_commit_it_is_told(monkeypatch):
    """The v5e rows said git_sha ae98852fd4+dirty for code four commits later: the device machine gets the
    working tree, not its history. XLABENCH_GIT_SHA names the commit the copy is."""
    from xlabench.run import scheduler

    monkeypatch.setenv("XLABENCH_GIT_SHA", "442062f0ab")
    assert scheduler.git_sha() == "442062f0ab"
    monkeypatch.delenv("XLABENCH_GIT_SHA")
    assert scheduler.git_sha() != "442062f0ab"
