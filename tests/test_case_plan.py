"""run/case_plan.py: the parent decides a case once (platform, interpret, the headline clock, tuning and
its cache folder, the timing plan); the request carries it and the row is built from the same plan."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from xlabench import impls as catalog
from xlabench import suite
from xlabench.protocol.replies import Reply, WorkerEnv
from xlabench.protocol.worker_messages import CaseResult, RunRequest
from xlabench.run import scheduler
from xlabench.run.case_plan import INTERPRETED, plan_case

SUITE = """
name: plan
workload: attention
backends: [jax]
impls: [naive, flash]
params: {num_heads: 2, head_dim: 32, dtype: float32, batch: 1, seq_len: 128}
matrix:
  block_q: [null, 64]
measure: {warmup: 0, iters: 3, timer: trace}
"""


def _cases(tmp_path: Path, text: str = SUITE) -> list[suite.Case]:
    p = tmp_path / "plan.yaml"
    p.write_text(textwrap.dedent(text).lstrip())
    return suite.load(p).cases()


def _ctx(tune: bool | None = None) -> scheduler.RunContext:
    return scheduler.RunContext(run_id="r", platform="tpu", git_sha="x", tune=tune, tune_dir="/cache/tune")


def _plan(case: suite.Case, platform: str, tune: bool | None = None):
    return plan_case(case, catalog.find(case.backend, case.impl, case.workload), platform, _ctx(tune))


def _case(cases: list[suite.Case], impl: str, block_q: Any = None) -> suite.Case:
    return next(c for c in cases if c.impl == impl and c.params.get("block_q") == block_q)


def test_on_a_tpu_a_kernel_is_searched_in_the_runs_cache_and_headlined_by_the_device_clock(tmp_path):
    plan = _plan(_case(_cases(tmp_path), "flash"), "tpu")
    assert (plan.platform, plan.interpret, plan.headline) == ("tpu", False, "device")
    assert (plan.timing.tune, plan.timing.tune_dir, plan.timing.tune_note) == ("search", "/cache/tune", "")
    assert _plan(_case(_cases(tmp_path), "flash"), "tpu", tune=False).timing.tune == "off"


def test_on_cpu_an_interpreted_kernel_is_not_tuned_and_says_why_once_asked(tmp_path):
    flash = _case(_cases(tmp_path), "flash")
    plan = _plan(flash, "cpu")
    assert plan.interpret and plan.headline == "wall" and plan.timing.tune == "off"
    assert plan.timing.tune_dir is None and plan.timing.tune_note == f"not tuned: {INTERPRETED}"
    asked = _plan(flash, "cpu", tune=True).timing
    assert asked.tune == "off" and asked.tune_note.startswith("not tuned (--tune refused)")
    assert _plan(_case(_cases(tmp_path), "naive"), "cpu").timing.tune == "off"  # CPU: off by default


def test_blocks_the_suite_sets_are_fixed_whatever_the_platform(tmp_path):
    fixed = _case(_cases(tmp_path), "flash", 64)
    assert _plan(fixed, "tpu").timing.tune == _plan(fixed, "cpu", tune=True).timing.tune == "fixed"


def test_a_train_step_keeps_the_wall_clock_as_its_headline_on_a_tpu(tmp_path):
    train = _cases(tmp_path, "name: t\nworkload: train\nbackends: [jax]\nimpls: [naive]\n"
                             "params: {model: gpt2-tiny, global_batch: 2, seq_len: 128, devices: 1}\n"
                             "measure: {timer: trace}\n")[0]
    assert _plan(train, "tpu").headline == "wall"


class Worker:
    """A TPU worker without a framework: it keeps each request and replies wall and device samples."""

    env = WorkerEnv({"platform": "tpu", "device_kind": "TPU v5 lite", "device_count": 1, "process_count": 1,
                     "framework_version": "jax fake"})

    def __init__(self) -> None:
        self.requests: list[RunRequest] = []

    def request(self, msg: dict[str, Any], timeout: float) -> Reply:
        self.requests.append(RunRequest.from_message(msg))
        result = CaseResult(samples=(2e-3, 2e-3, 2e-3), device_samples=(1e-3, 1e-3, 1e-3), timer="trace",
                            correct=True)
        return Reply(status="ok", result=result.to_message())

    def alive(self) -> bool:
        return True


class Pool:
    def __init__(self) -> None:
        self.worker = Worker()

    def missing(self, backend: str) -> None:
        return None

    def get(self, backend: str, devices: int, variant: str = "") -> Worker:
        return self.worker


class Writer:
    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def write(self, row: dict[str, Any], samples: list[float]) -> None:
        self.rows.append(row)


def test_the_request_carries_the_plan_and_the_row_follows_the_same_plan(tmp_path, monkeypatch):
    """Each case's plan is decided once in the parent: the worker is told the headline, the tuning and its
    folder; the row's interpret and clock are the same plan's, from the worker's samples alone."""
    monkeypatch.setattr(scheduler, "host_calib_s", lambda: None)  # no calibration process: a unit test
    cases = [_case(_cases(tmp_path), "flash"), _case(_cases(tmp_path), "flash", 64)]
    pool, writer = Pool(), Writer()
    rows = scheduler.run_cases(cases, writer, _ctx(), pool)
    searched, fixed = pool.worker.requests
    assert (searched.platform, searched.interpret, searched.plan.headline) == ("tpu", False, "device")
    assert (searched.plan.tune, searched.plan.tune_dir) == ("search", "/cache/tune")
    assert (fixed.plan.tune, fixed.plan.tune_dir) == ("fixed", None)
    for row in rows:
        assert row["interpret"] is False and row["clock"] == "device" and row["n"] == 3
        assert row["median_s"] == pytest.approx(1e-3) and row["wall_median_s"] == pytest.approx(2e-3)
        assert row["host_overhead"] == pytest.approx(2.0)


def test_a_fwd_case_whose_fwd_bwd_twin_runs_later_is_told_to_compute_the_shared_reference(tmp_path, monkeypatch):
    """One reference per shape and mask for both modes: a fwd case whose fwd_bwd twin (same backend, shape and
    mask) the run has later computes the fwd_bwd reference (its output is the fwd one) and its worker keeps it
    for the twin; a fwd case with no twin, and a fwd_bwd case, compute their own."""
    monkeypatch.setattr(scheduler, "host_calib_s", lambda: None)
    cases = _cases(tmp_path, """
        name: twins
        workload: attention
        backends: [jax]
        impls: [naive, flash]
        params: {num_heads: 2, head_dim: 32, dtype: float32, batch: 1}
        matrix:
          "seq_len,mode": [[128, fwd], [128, fwd_bwd], [256, fwd]]
          causal: [true, false]
        measure: {warmup: 0, iters: 3, timer: trace}
    """)
    pool = Pool()
    scheduler.run_cases(cases, Writer(), _ctx(), pool)
    got = {(r.params["seq_len"], r.params["mode"], r.params["causal"], r.impl): r.plan.reference
           for r in pool.worker.requests}
    assert len(got) == 12
    for (s, mode, causal, impl), ref in got.items():
        assert ref == ("fwd_bwd" if (s, mode) == (128, "fwd") else ""), (s, mode, causal, impl)
