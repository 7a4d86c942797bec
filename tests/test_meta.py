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


def test_the_meta_sums_the_workers_phase_seconds_per_phase_across_the_rows_repeats(tmp_path):
    """Issue 60: every case's phase seconds ride its CaseResult (not a CSV column); the meta sums them."""
    from xlabench.protocol.worker_messages import CaseResult
    from xlabench.run.rows import add_phases

    total: dict[str, float] = {}
    add_phases(total, [CaseResult((1.0,), phase_s={"compile": 1.25, "timing": 2.0}),
                       CaseResult((1.0,), phase_s={"compile": 0.75, "other": 0.5})])  # two repeats of a case
    add_phases(total, [CaseResult((1.0,))])  # a runner that reported none adds nothing
    assert total == {"compile": 2.0, "timing": 2.0, "other": 0.5}
    files = results.RunFiles(tmp_path / "s" / "run1.csv")
    files.csv.parent.mkdir(parents=True)
    results.finish_meta(files, {"run_id": "run1"}, [], total)
    assert json.loads(files.meta.read_text())["phase_s"] == {"compile": 2.0, "timing": 2.0, "other": 0.5}
    results.finish_meta(files, {"run_id": "run1"}, [])  # none reported: no key
    assert "phase_s" not in json.loads(files.meta.read_text())
    assert results.read_meta(files) is not None


def test_a_case_result_carries_its_phases_across_the_pipe_and_the_worker_names_the_rest_other():
    from xlabench.protocol.worker_messages import CaseResult
    from xlabench.worker.main import with_other_phase

    r = CaseResult((0.1,), phase_s={"compile": 1.0, "timing": 2.0})
    assert CaseResult.from_message(json.loads(json.dumps(r.to_message()))).phase_s == {"compile": 1.0, "timing": 2.0}
    assert "phase_s" not in r.fields  # not a row column
    assert with_other_phase(r, 3.5).phase_s == {"compile": 1.0, "timing": 2.0, "other": 0.5}
    assert with_other_phase(r, 3.0).phase_s == r.phase_s  # nothing left over
    assert with_other_phase(CaseResult((0.1,)), 4.0).phase_s == {"other": 4.0}  # a runner that names no phase
