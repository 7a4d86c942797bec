"""Issue 59's done-when: a new attention kernel (tests/_flash_copy.py, a copy of flash under a new name) is
one module and one registration line, and it runs through a tiny CPU suite: it is planned, has a search
space, runs (the real Pallas kernel, interpreted), gets a row with its roofline, and a chart line in its own
style. Nothing else names it: no backend table, no sharding list, no chart table. In process, as
tests/test_fake_kernel.py: the worker's case runner is called as the worker calls it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import _flash_copy
from xlabench import results, suite
from conftest import CPU_WORKER_ENV
from xlabench.impls import kernels
from xlabench.protocol.status import OK
from xlabench.protocol.timing_plan import TimingPlan
from xlabench.run import rows, suite_runner
from xlabench.run.run_options import RunOptions
from xlabench.run.scheduler import RunContext

SUITE = ("name: copy\nworkload: attention\nbackends: [jax]\nimpls: [flash_copy]\n"
         "params: {batch: 1, num_heads: 1, seq_len: 128, head_dim: 32, causal: true, dtype: float32, mode: fwd}\n"
         "measure: {warmup: 0, iters: 1, min_time_s: 0.0}\n")


@pytest.fixture()
def flash_copy():
    kernels.register(_flash_copy)  # the one registration line
    yield
    kernels.unregister(_flash_copy)


def test_a_copy_of_flash_runs_through_a_cpu_suite_to_a_row_and_a_chart_line(flash_copy, tmp_path: Path):
    from xlabench.backends.jax import sharding
    from xlabench.backends.jax.attention_case import run_attention_case
    from xlabench.report import chartdata as cd
    from xlabench.report import plots

    (tmp_path / "copy.yaml").write_text(SUITE)
    plan = suite_runner.plan_run(suite.load(tmp_path / "copy.yaml"), RunOptions())
    ((case, skip),) = plan.cases
    assert (case.impl, skip) == ("flash_copy", None)
    assert suite_runner.untunable(case, "tpu") is None  # a search space, searched on its chip
    assert sharding.per_shard("flash_copy")  # the train step runs it under shard_map, as its record says

    result = run_attention_case(dict(case.params), "flash_copy", TimingPlan(warmup=0, iters=1), True, "cpu")
    assert result.correct
    row, samples = rows.case_row(case, RunContext(run_id="r", platform="cpu", git_sha="x"), CPU_WORKER_ENV, [result])
    assert (row["impl"], row["status"], row["interpret"]) == ("flash_copy", OK, True)
    assert row["roofline_source"] and row["bound_s"] > 0  # its roofline, from the analytic counts

    files = results.RunFiles(tmp_path / "run.csv")
    with results.RowWriter(files) as w:
        w.write(row, samples)
    chart = plots.attention_tflops(cd.load([files.csv]))
    line = chart.artists[("causal · fwd", "flash_copy (interpret)")]
    assert line.get_color() == _flash_copy.STYLE.colour  # its record's style, not one made up from its name
