"""run_cases takes repeats in passes over the suite (random interleaving), writing each row as its case ends."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from xlabench import suite
from xlabench.run import scheduler
from xlabench.protocol.replies import Reply, WorkerEnv
from xlabench.protocol.worker_messages import CaseResult, RunRequest

SUITE = """
name: passes
workload: attention
backends: [jax]
impls: [naive]
params: {num_heads: 2, head_dim: 32, dtype: float32, batch: 1}
matrix:
  seq_len: [32, 64, 96, 128]
measure: {warmup: 0, iters: 4, repeats: 3}
"""


@pytest.fixture(autouse=True)
def calibration(monkeypatch) -> list[float]:
    """The host calibration on a fake clock: the real one (its own process, ~70 ms of matmuls before and after
    each case's run) took 13.0 s of this module's 13.3 s; tests/test_calibrate.py measures the real kernel.
    Each call reads 1 ms more than the last."""
    calls: list[float] = []

    def fake() -> float:
        calls.append(1e-3 * (len(calls) + 1))
        return calls[-1]

    monkeypatch.setattr(scheduler, "host_calib_s", fake)
    return calls


class FakeWorker:
    """Answers run requests without a framework and records which case each one was for."""

    env = WorkerEnv({"platform": "cpu", "device_kind": "cpu", "device_count": 1, "process_count": 1,
                     "framework_version": "jax fake"})

    def __init__(self, log: list[str], fail: dict[str, int]):
        self.log, self.fail = log, fail

    def request(self, msg: dict[str, Any], timeout: float) -> Reply:
        case_id = RunRequest.from_message(msg).case_id
        self.log.append(case_id)
        if self.log.count(case_id) == self.fail.get(case_id):
            return Reply(status="failed", error="RuntimeError: boom")
        samples = [1e-3 * (1 + 0.01 * len(self.log))] * 4
        result = CaseResult(samples=tuple(samples), correct=True)
        return Reply(status="ok", result=result.to_message())

    def alive(self) -> bool:
        return True


class FakePool:
    def __init__(self, fail: dict[str, int] | None = None):
        self.log: list[str] = []
        self.worker = FakeWorker(self.log, fail or {})

    def missing(self, backend: str) -> None:
        return None

    def get(self, backend: str, devices: int, variant: str = "") -> FakeWorker:
        return self.worker


class ListWriter:
    def __init__(self, log: list[str]):
        self.log, self.rows = log, []

    def write(self, row: dict[str, Any], samples: list[float]) -> None:
        self.rows.append((len(self.log), row, list(samples)))  # how many runs had happened when it was written


def _cases(tmp_path: Path) -> list[suite.Case]:
    p = tmp_path / "passes.yaml"
    p.write_text(textwrap.dedent(SUITE).lstrip())
    return suite.load(p).cases()


def test_repeats_are_passes_over_the_suite_in_shuffled_order(tmp_path):
    cases = _cases(tmp_path)
    ids = [c.case_id for c in cases]
    pool = FakePool()
    writer = ListWriter(pool.log)
    rows = scheduler.run_cases(cases, writer, scheduler.RunContext(run_id="r1", platform="cpu", git_sha="x"), pool)
    log = pool.log
    assert len(log) == 12 and log[:4] == ids  # the first pass in suite order
    passes = [log[0:4], log[4:8], log[8:12]]
    assert all(sorted(p) == sorted(ids) for p in passes)  # every case once per pass, never back to back
    assert passes[1] != ids or passes[2] != ids  # later passes shuffled (seeded by the run id)
    again = FakePool()
    scheduler.run_cases(cases, ListWriter(again.log), scheduler.RunContext(run_id="r1", platform="cpu", git_sha="x"), again)
    assert again.log == log  # the same run id, the same order
    # Each row is written right after its case's last run, with its 3 runs' samples pooled.
    for written_after, row, samples in writer.rows:
        assert row["status"] == "ok" and row["repeats"] == 3 and len(samples) == 12
        assert log[written_after - 1] == row["case_id"] and log[:written_after].count(row["case_id"]) == 3
        mine = [i for i, c in enumerate(log) if c == row["case_id"]]
        expected = np.median([1e-3 * (1 + 0.01 * (i + 1)) for i in mine])
        assert row["median_s"] == expected
    assert len(rows) == 4


def test_a_failure_in_a_later_pass_ends_only_that_case(tmp_path):
    cases = _cases(tmp_path)
    bad = cases[1].case_id
    pool = FakePool(fail={bad: 2})
    writer = ListWriter(pool.log)
    scheduler.run_cases(cases, writer, scheduler.RunContext(run_id="r2", platform="cpu", git_sha="x"), pool)
    assert pool.log.count(bad) == 2 and len(pool.log) == 11  # the others still take all 3 runs
    by_id = {row["case_id"]: (after, row) for after, row, _ in writer.rows}
    after, row = by_id[bad]
    assert row["status"] == "failed" and row["error"] == "repeat 2 of 3: RuntimeError: boom"
    assert after < len(pool.log)  # written when it failed, not at the end of the run
    assert all(r["status"] == "ok" for c, (_, r) in by_id.items() if c != bad)


def test_one_repeat_runs_each_case_once_in_suite_order(tmp_path, calibration):
    cases = [dataclasses.replace(c, measure=c.measure.model_copy(update={"repeats": 1})) for c in _cases(tmp_path)]
    pool = FakePool()
    writer = ListWriter(pool.log)
    scheduler.run_cases(cases, writer, scheduler.RunContext(run_id="r3", platform="cpu", git_sha="x"), pool)
    assert pool.log == [c.case_id for c in cases]
    assert [after for after, _, _ in writer.rows] == [1, 2, 3, 4]  # each row as soon as its case ends
    # The host's speed just before and just after each run (1 ms more per reading): their median per row.
    assert [row["host_calib_s"] for _, row, _ in writer.rows] == pytest.approx([1.5e-3, 3.5e-3, 5.5e-3, 7.5e-3])
    assert len(calibration) == 8


def test_rows_come_back_in_suite_order_though_written_as_they_end(tmp_path):
    cases = _cases(tmp_path)
    pool = FakePool()
    writer = ListWriter(pool.log)
    rows = scheduler.run_cases(cases, writer, scheduler.RunContext(run_id="r1", platform="cpu", git_sha="x"), pool)
    assert [r["case_id"] for r in rows] == [c.case_id for c in cases]
    written = [row["case_id"] for _, row, _ in writer.rows]
    last_run = {c: i for i, c in enumerate(pool.log)}
    assert written == sorted(last_run, key=last_run.get)  # each written when its last run ended
    assert written != [c.case_id for c in cases]  # and this run's last pass was not in suite order


SWEEP = """
name: sweep
workload: attention
backends: [jax]
impls: [flash, splash]
params: {num_heads: 2, head_dim: 32, dtype: float32, batch: 1, seq_len: 128}
matrix:
  "block_q,block_k": [[null, null], [64, 64], [128, 128], [32, 32]]
measure: {warmup: 0, iters: 4, repeats: 1}
"""


def test_a_sweeps_configurations_are_shuffled_in_the_first_pass(tmp_path):
    """Before: with one repeat the default block sizes (listed first) always ran first (best's 2.15x 'win')."""
    p = tmp_path / "sweep.yaml"
    p.write_text(textwrap.dedent(SWEEP).lstrip())
    cases = suite.load(p).cases()
    firsts = set()
    for run_id in ("a", "b", "c", "d", "e", "f", "g", "h"):
        pool = FakePool()
        scheduler.run_cases(cases, ListWriter(pool.log), scheduler.RunContext(run_id=run_id, platform="cpu",
                                                                              git_sha="x"), pool)
        ran = [next(c for c in cases if c.case_id == i) for i in pool.log]
        assert sorted(pool.log) == sorted(c.case_id for c in cases)  # every configuration once
        assert [c.impl for c in ran] == [c.impl for c in cases]  # each sweep keeps its places in the suite
        firsts.add((ran[0].params["block_q"], ran[4].params["block_q"]))
    assert len({f[0] for f in firsts}) > 1 and len({f[1] for f in firsts}) > 1  # no configuration always first
