"""The runner end to end: workers that raise, crash or hang cost one case; killed or interrupted runs
leave no process behind and resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from xlabench import results
from xlabench.cli import main
from xlabench.worker import FAULT_ENV

from conftest import ROOT, run_cli, wait_gone, workers_of

pytestmark = pytest.mark.slow

FAULT_SUITE = """
name: faults
workload: attention
impls: [naive]
params: {num_heads: 2, head_dim: 32, dtype: float32, batch: 1}
matrix:
  seq_len: [32, 64, 96, 128, 160]
measure: {warmup: 0, iters: 2, timeout_s: 120}
"""


def _start_run(path: Path, out: Path, faults: list[dict], *extra: str) -> subprocess.Popen:
    """`xlabench run` as a real process with injected faults, its output captured."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), **{FAULT_ENV: json.dumps(faults)})
    return subprocess.Popen([sys.executable, "-m", "xlabench", "run", str(path), "--out", str(out), *extra],
                            env=env, cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def _kill(proc: subprocess.Popen) -> None:
    """SIGKILL the run if it is still there (a test that fails must not leave it running)."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


def _signal(proc: subprocess.Popen, signum: int) -> str:
    """Send the run ``signum`` and wait (60 s) for it to end; its output. Killed if it does not end."""
    try:
        os.kill(proc.pid, signum)
        return proc.communicate(timeout=60)[0]
    finally:
        _kill(proc)


def _wait_for(what: str, check, proc: subprocess.Popen, timeout_s: float = 240):
    """Poll ``check()`` until it returns something truthy (returned), or fail naming ``what``."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if (found := check()):
            return found
        assert proc.poll() is None, f"run ended early ({proc.returncode}) waiting for {what}: {proc.stdout.read()}"
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _rows_on_disk(out: Path, n: int) -> Path | None:
    """The run's CSV once it holds ``n`` rows (it exists, empty, for an instant before its header)."""
    files = [p for p in out.glob("*/*.csv") if not p.name.endswith(".samples.csv")]
    try:
        return files[0] if files and len(results.read_rows(files[0])) >= n else None
    except results.ResultsFileError:
        return None


def _hanging(out: Path, seq_len: int) -> bool:
    """The worker's log shows the case with this seq_len started (the injected hang is under way)."""
    return any(f"'seq_len': {seq_len}" in log.read_text(errors="replace") for log in out.glob("*/*.log"))


def _csv(out: Path) -> Path:
    found = sorted(out.glob("*/*.csv"))
    found = [p for p in found if not p.name.endswith(".samples.csv")]
    assert len(found) == 1, found
    return found[0]


def test_raise_exit_segv_hang_each_give_one_failed_row(write_suite, tmp_path, monkeypatch):
    faults = [{"match": {"seq_len": 32}, "fault": "raise"},
              {"match": {"seq_len": 64}, "fault": "exit"},
              {"match": {"seq_len": 96}, "fault": "segv"},
              {"match": {"seq_len": 128}, "fault": "hang"}]
    monkeypatch.setenv(FAULT_ENV, json.dumps(faults))
    out = tmp_path / "res"
    res = CliRunner().invoke(main, ["run", str(write_suite(FAULT_SUITE)), "--out", str(out), "--timeout", "8"])
    assert res.exit_code == 1, res.output
    df = results.read_rows(_csv(out)).set_index("seq_len")
    assert list(df.index) == [32, 64, 96, 128, 160]  # every case has its row, in order
    assert df.loc[32, "status"] == "failed" and "RuntimeError: injected fault: raise" in df.loc[32, "error"]
    assert df.loc[64, "status"] == "failed" and "exit code 17" in df.loc[64, "error"]
    assert df.loc[96, "status"] == "failed" and "SIGSEGV" in df.loc[96, "error"]
    assert df.loc[128, "status"] == "failed" and "timeout" in df.loc[128, "error"]
    assert df.loc[160, "status"] == "ok" and df.loc[160, "correct"]  # the run went on with a fresh worker
    assert "Traceback" not in res.output


def test_planned_skip_for_platform(write_suite, tmp_path):
    suite = FAULT_SUITE.replace("impls: [naive]", "impls: [naive, cudnn]").replace(
        "[32, 64, 96, 128, 160]", "[64]")
    out = tmp_path / "res"
    res = CliRunner().invoke(main, ["run", str(write_suite(suite)), "--out", str(out)])
    assert res.exit_code == 0, res.output
    df = results.read_rows(_csv(out)).set_index("impl")
    assert df.loc["cudnn", "status"] == "skipped"
    assert df.loc["cudnn", "error"] == "jax/cudnn runs on gpu, not cpu"
    assert df.loc["naive", "status"] == "ok"


def test_real_subprocess_run_writes_rows_samples_and_meta(write_suite, tmp_path):
    out = tmp_path / "res"
    proc = run_cli("run", str(write_suite()), "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    csv_path = _csv(out)
    assert f"results: {csv_path}" in proc.stdout.replace("\n", "")
    df = results.read_rows(csv_path)
    assert len(df) == 4 and set(df["status"]) == {"ok"}
    assert (df["platform"] == "cpu").all() and (df["interpret"] == False).all()  # noqa: E712
    assert (df["mfu"] > 0).all() and (df["tflops_per_s"] > 0).all()
    assert df["peak_source"].str.startswith("measured").all()
    samples = results.read_samples(csv_path)
    assert samples.groupby("case_id").size().to_dict() == dict(zip(df["case_id"], df["n"]))
    for _, r in df.iterrows():  # the headline statistic is the median of the kept samples
        s = samples[samples.case_id == r.case_id].seconds
        assert r.median_s == pytest.approx(s.median())
    meta = json.loads(results.RunFiles(csv_path).meta.read_text())
    assert meta["suite"] == "tiny" and meta["env"]["platform"] == "cpu"
    assert meta["ended"] >= meta["started"] and meta["xlabench_version"] and meta["python_version"]
    assert meta["env"]["device_count"] == df["device_count"].max() and meta["device_counts"] == [1]


def test_killed_run_leaves_parseable_csv_and_resume_completes(write_suite, tmp_path):
    """kill -9 of the parent alone (the OOM killer's way) while its worker hangs: the worker dies with it."""
    path = write_suite(FAULT_SUITE)
    out = tmp_path / "res"
    proc = _start_run(path, out, [{"match": {"seq_len": 128}, "fault": "hang"}])
    try:  # three cases on disk, the fourth hangs
        csv_path = _wait_for("three rows", lambda: _rows_on_disk(out, 3), proc)
        _wait_for("the hanging case", lambda: _hanging(out, 128), proc)
        workers = _wait_for("the worker", lambda: workers_of(proc.pid), proc)
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # the parent only: the worker is in its own session
        proc.wait()
    assert wait_gone(workers, timeout_s=5) == [], f"worker(s) {workers} outlived their killed parent"
    partial = results.read_rows(csv_path)
    assert len(partial) == 3 and set(partial["status"]) == {"ok"}

    done = CliRunner().invoke(main, ["run", str(path), "--resume", str(csv_path)])
    assert done.exit_code == 0, done.output
    assert "3 already done" in done.output
    full = results.read_rows(csv_path)
    assert sorted(full["seq_len"]) == [32, 64, 96, 128, 160]
    assert full["case_id"].is_unique and full["run_id"].nunique() == 1


def test_sigint_mid_run_exits_130_with_resume_hint_and_resume_completes(write_suite, tmp_path):
    """Ctrl-C while a case hangs: exit 130, the hanging case gets no row, the hint's command finishes it."""
    path = write_suite(FAULT_SUITE.replace("[32, 64, 96, 128, 160]", "[32, 64]"))
    out = tmp_path / "res"
    proc = _start_run(path, out, [{"match": {"seq_len": 64}, "fault": "hang"}])
    try:
        csv_path = _wait_for("the first row", lambda: _rows_on_disk(out, 1), proc)
        workers = _wait_for("the worker", lambda: workers_of(proc.pid), proc)
    except BaseException:
        _kill(proc)
        raise
    output = _signal(proc, signal.SIGINT)
    assert proc.returncode == 130, output
    assert wait_gone(workers, timeout_s=5) == [], f"worker(s) {workers} outlived the interrupted run"
    hint = f"interrupted: 1 of 2 cases done; resume with: xlabench run {path} --resume {csv_path}"
    assert hint in output, output
    assert "Aborted" not in output and "Traceback" not in output
    partial = results.read_rows(csv_path)
    assert list(partial["seq_len"]) == [32]  # the interrupted case wrote nothing

    done = run_cli("run", str(path), "--resume", str(csv_path))  # the hint's command, without the fault
    assert done.returncode == 0, done.stdout + done.stderr
    full = results.read_rows(csv_path)
    assert sorted(full["seq_len"]) == [32, 64] and set(full["status"]) == {"ok"}
    assert full["case_id"].is_unique and full["run_id"].nunique() == 1
    samples = results.read_samples(csv_path)
    assert samples.groupby("case_id").size().to_dict() == dict(zip(full["case_id"], full["n"]))


def test_sigterm_while_the_first_worker_starts_exits_143(write_suite, tmp_path):
    """SIGTERM during the first worker's probe (framework import): exit 143, no worker left, no traceback."""
    out = tmp_path / "res"
    proc = _start_run(write_suite(FAULT_SUITE), out, [])
    try:
        workers = _wait_for("the worker", lambda: workers_of(proc.pid), proc, timeout_s=60)
    except BaseException:
        _kill(proc)
        raise
    output = _signal(proc, signal.SIGTERM)
    assert proc.returncode == 143, output
    assert wait_gone(workers, timeout_s=5) == [], f"worker(s) {workers} outlived the interrupted run"
    assert "interrupted while starting the first worker; no case ran, nothing to resume" in output, output
    assert "Traceback" not in output


def test_resume_refuses_another_suites_csv(write_suite, tmp_path):
    out = tmp_path / "res"
    CliRunner().invoke(main, ["run", str(write_suite()), "--out", str(out)])
    other = write_suite(FAULT_SUITE, "other.yaml")
    res = CliRunner().invoke(main, ["run", str(other), "--resume", str(_csv(out))])
    assert res.exit_code == 2 and "not 'faults'" in res.output


def test_resume_of_foreign_csv_is_bad_input(write_suite, tmp_path):
    foreign = tmp_path / "foreign.csv"
    pd.DataFrame({"a": [1], "b": [2]}).to_csv(foreign, index=False)
    res = CliRunner().invoke(main, ["run", str(write_suite()), "--resume", str(foreign)])
    assert res.exit_code == 2 and "not an xlabench results CSV" in res.output
