"""Multi-host through JAX's distributed runtime, proven on one machine: 2 processes x 4 CPU devices."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from xlabench import results
from xlabench.run import distributed
from xlabench.cli import main

from conftest import ROOT

SUITE = """
name: mh
workload: train
impls: [naive]
params: {model: custom, arch: gpt2, vocab_size: 256, d_model: 64, num_layers: 1, num_heads: 4, d_ff: 128,
         seq_len: 32, dtype: float32, remat: none, devices: 8, global_batch: 8, sharding: fsdp}
measure: {warmup: 1, iters: 2, timeout_s: 300}
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rows(out: Path):
    files = [p for p in out.glob("*/*.csv") if not p.name.endswith(".samples.csv")]
    assert len(files) == 1, files
    return results.read_rows(files[0])


def _errors(outs: list[Path]) -> list[str]:
    """The failed rows' errors the processes wrote (a failure's cause, which the consoles cut)."""
    return [str(e) for out in outs for p in out.glob("*/*.csv") if not p.name.endswith(".samples.csv")
            for e in results.read_rows(p)["error"].dropna()]


@pytest.mark.slow
def test_two_processes_fsdp_over_8_global_devices_match_single_process(write_suite, tmp_path):
    suite = write_suite(SUITE)
    single = tmp_path / "single"
    res = CliRunner().invoke(main, ["run", str(suite), "--out", str(single)])
    assert res.exit_code == 0, res.output
    ref = _rows(single).iloc[0]
    assert ref.status == "ok" and ref.device_count == 8 and ref.process_count == 1

    port = _free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    procs, outs = [], []
    started = time.time()
    for pid in range(2):
        out = tmp_path / f"p{pid}"
        outs.append(out)
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "xlabench", "run", str(suite), "--out", str(out),
             "--coordinator", f"127.0.0.1:{port}", "--num-processes", "2", "--process-id", str(pid),
             "--local-devices", "4", "--init-timeout", "60"],
            env=env, cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    logs = [p.communicate(timeout=600)[0] for p in procs]
    print(f"2-process run wall time: {time.time() - started:.1f}s")
    assert [p.returncode for p in procs] == [0, 0], (logs, _errors(outs))
    row = _rows(outs[0]).iloc[0]
    assert row.status == "ok" and row.device_count == 8 and row.process_count == 2
    assert not list(outs[1].glob("*/*[0-9a-f].csv"))  # only process 0 writes results
    assert "results are written by process 0" in logs[1]
    assert row.loss_first == pytest.approx(ref.loss_first, rel=1e-5)
    assert row.loss_last == pytest.approx(ref.loss_last, rel=1e-5)
    assert row.flops == ref.flops


@pytest.mark.slow
def test_unreachable_coordinator_fails_rows_instead_of_hanging(write_suite, tmp_path):
    suite = write_suite(SUITE)
    out = tmp_path / "res"
    started = time.time()
    res = CliRunner().invoke(main, ["run", str(suite), "--out", str(out), "--coordinator",
                                    f"127.0.0.1:{_free_port()}", "--num-processes", "2", "--process-id", "0",
                                    "--local-devices", "4", "--init-timeout", "2"])
    assert res.exit_code == 1
    assert time.time() - started < 120
    rows = _rows(out)
    assert list(rows.status) == ["failed"]
    assert "multi-host start failed" in rows.error[0] and "DEADLINE_EXCEEDED" in rows.error[0]


def test_options_and_environment_detection():
    assert distributed.from_options(None, None, None, environ={}) is None
    cfg = distributed.from_options("h:1234", 2, 1)
    assert cfg.worker_env()[distributed.ENV_PROCESS_ID] == "1" and not cfg.is_primary
    slurm = distributed.from_options(None, None, None, environ={"SLURM_JOB_ID": "7", "SLURM_NTASKS": "4",
                                                                "SLURM_PROCID": "2"})
    assert slurm.auto and slurm.process_id == 2 and not slurm.is_primary
    tpu = distributed.from_options(None, None, None, environ={"TPU_WORKER_HOSTNAMES": "a,b"})
    assert tpu.auto
    assert distributed.from_options(None, None, None, environ={"TPU_WORKER_HOSTNAMES": "a"}) is None
    for bad, msg in [(("h:1", 2, None), "go together"), (("h", 2, 0), "HOST:PORT"), (("h:1", 2, 2), "0..1")]:
        with pytest.raises(ValueError, match=msg):
            distributed.from_options(*bad)


def test_bad_multihost_options_exit_2(write_suite):
    res = CliRunner().invoke(main, ["run", str(write_suite(SUITE)), "--coordinator", "nohost"])
    assert res.exit_code == 2 and "go together" in res.output
