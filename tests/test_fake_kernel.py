"""Issue 51's done-when: a new attention kernel is one module and one registration line. A fake kernel
(tests/_fake_kernel.py, declared as a module of xlabench/impls/kernels/ is) registered with
``kernels.register`` and nothing else is planned by `run --dry-run`'s plan, skipped where its rule says,
tuned over its space on a fake device clock (stored in the tuning cache), and written as rows. No worker
process: the worker's case runner is called in this process, as the worker calls it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import _fake_kernel
from xlabench import impls, suite
from conftest import CPU_WORKER_ENV
from xlabench.impls import kernels
from xlabench.protocol.status import OK, SKIPPED
from xlabench.protocol.timing_plan import TimingPlan
from xlabench.protocol.worker_messages import CaseSkipped
from xlabench.run import rows, suite_runner
from xlabench.run.run_options import RunOptions
from xlabench.run.scheduler import RunContext

SUITE = ("name: fake\nworkload: attention\nbackends: [jax]\nimpls: [fake]\n"
         "params: {batch: 1, num_heads: 2, seq_len: 64, head_dim: 32, causal: true, mode: fwd}\n"
         "matrix: {dtype: [float32, bfloat16]}\nmeasure: {warmup: 1, iters: 2, min_time_s: 0.0}\n")


@pytest.fixture()
def fake():
    kernels.register(_fake_kernel)  # the one registration line
    yield
    kernels.unregister(_fake_kernel)


def _suite(tmp_path: Path):
    (tmp_path / "fake.yaml").write_text(SUITE)
    return suite.load(tmp_path / "fake.yaml")


class FakeDevice:
    """Compiles every candidate; a call takes longer the farther its blocks are from 64 x 32."""

    def __init__(self) -> None:
        self.compiled: list[dict] = []

    def compile_many(self, build, program, cands):
        self.compiled += cands
        return list(cands)  # each candidate its own handle

    def time_many(self, handles, iters):
        return [(1 + abs(h["block_q"] - 64) / 64 + abs(h["block_k"] - 32) / 32) * 1e-3 for h in handles], "device"


def test_without_its_registration_line_the_kernel_is_unknown(tmp_path):
    assert impls.find("jax", "fake", "attention") is None
    with pytest.raises(Exception, match="fake"):
        _suite(tmp_path).cases()


def test_a_registered_kernel_is_planned_and_skipped_where_its_rule_says(fake, tmp_path):
    assert "fake" in impls.names_for("attention", "jax")
    plan = suite_runner.plan_run(_suite(tmp_path), RunOptions())
    skips = {c.params["dtype"]: why for c, why in plan.cases}
    assert skips == {"float32": None, "bfloat16": "fake takes float32 inputs only (got bfloat16)"}
    assert all(suite_runner.untunable(c, "cpu") is None for c, _ in plan.cases)  # it has a search space


def test_a_registered_kernel_is_tuned_on_a_fake_clock_and_written_as_rows(fake, tmp_path, monkeypatch):
    from xlabench.backends.jax import tune_case
    from xlabench.backends.jax.attention_case import run_attention_case

    dev = FakeDevice()
    monkeypatch.setattr(tune_case, "compile_many", dev.compile_many)
    monkeypatch.setattr(tune_case, "time_many", dev.time_many)
    cases = {c.params["dtype"]: c for c in _suite(tmp_path).cases()}
    timing = TimingPlan(warmup=1, iters=2, tune="search", tune_dir=str(tmp_path / "tune"))
    result = run_attention_case(dict(cases["float32"].params), "fake", timing, False, "cpu")
    assert result.metrics["tuned"] == "search" and result.correct
    assert (result.metrics["tuned_block_q"], result.metrics["tuned_block_k"]) == (64, 32)
    assert {(c["block_q"], c["block_k"]) for c in dev.compiled} <= {(q, k) for q in (32, 64) for k in (32, 64)}
    assert len(list((tmp_path / "tune").glob("*.json"))) == 1  # the winner is in the tuning cache
    with pytest.raises(CaseSkipped, match="float32 inputs only") as skipped:
        run_attention_case(dict(cases["bfloat16"].params), "fake", timing, False, "cpu")
    ctx = RunContext(run_id="r", platform="cpu", git_sha="x")
    ran, _ = rows.case_row(cases["float32"], ctx, CPU_WORKER_ENV, [result])
    skip, _ = rows.case_row(cases["bfloat16"], ctx, CPU_WORKER_ENV, ended=(SKIPPED, str(skipped.value)))
    assert (ran["impl"], ran["status"], ran["tuned"], ran["tuned_block_q"]) == ("fake", OK, "search", 64)
    assert (skip["impl"], skip["status"], skip["error"]) == ("fake", SKIPPED, "fake takes float32 inputs only (got bfloat16)")
