"""The runner end to end: workers that raise, crash or hang cost one case; killed runs resume."""

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

from conftest import ROOT, run_cli

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


def test_killed_run_leaves_parseable_csv_and_resume_completes(write_suite, tmp_path):
    path = write_suite(FAULT_SUITE)
    out = tmp_path / "res"
    env = dict(os.environ, PYTHONPATH=str(ROOT), **{FAULT_ENV: json.dumps([{"match": {"seq_len": 128}, "fault": "hang"}])})
    proc = subprocess.Popen([sys.executable, "-m", "xlabench", "run", str(path), "--out", str(out)],
                            env=env, cwd=str(ROOT), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 240
    csv_path = None
    while time.time() < deadline:  # wait until three cases are on disk, the fourth hangs
        files = [p for p in out.glob("*/*.csv") if not p.name.endswith(".samples.csv")]
        if files and len(results.read_rows(files[0])) >= 3:
            csv_path = files[0]
            break
        time.sleep(0.5)
    assert csv_path is not None, "run did not write three rows in time"
    os.killpg(proc.pid, signal.SIGKILL)  # parent and worker, like a preempted VM
    proc.wait()
    partial = results.read_rows(csv_path)
    assert len(partial) == 3 and set(partial["status"]) == {"ok"}

    done = CliRunner().invoke(main, ["run", str(path), "--resume", str(csv_path)])
    assert done.exit_code == 0, done.output
    assert "3 already done" in done.output
    full = results.read_rows(csv_path)
    assert sorted(full["seq_len"]) == [32, 64, 96, 128, 160]
    assert full["case_id"].is_unique and full["run_id"].nunique() == 1


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
