"""Issue 50 item 6: a wrong user kernel (wrong output shape) showed "ok … 0.036 ms" on its progress line and got
67% MFU in its row, only the summary said WRONG RESULT; failed user rows, "nosuchmod:fn" included, were
labelled "(interpret)". No worker starts: rows are built from a made-up reply (run/rows.case_row)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from click.testing import CliRunner

from xlabench import suite
from xlabench.cli import main
from xlabench.protocol.status import FAILED
from xlabench.protocol.worker_messages import CaseResult
from xlabench.report import markdown
from xlabench.run import rows as row_builder
from xlabench.run import suite_runner
from xlabench.run.scheduler import RunContext

ENV = {"platform": "cpu", "device_kind": "cpu", "device_count": 1, "framework_version": "jax 0 / jaxlib 0",
       "measured_cpu_tflops": 1.0, "measured_cpu_gbytes_per_s": 10.0}
WRONG_NOTE = "wrong output: shape (1, 64, 1, 32), expected shape (1, 64, 2, 32)"


def _case(tmp_path: Path, impl: str) -> Any:
    p = tmp_path / "s.yaml"
    p.write_text(f"name: s\nworkload: attention\nbackends: [jax]\nimpls: ['{impl}']\n"
                 "params: {batch: 1, num_heads: 2, seq_len: 64, head_dim: 32, dtype: float32}\n")
    return suite.load(p).cases()[0]


def _row(tmp_path: Path, impl: str, correct: bool, **ended: Any) -> dict[str, Any]:
    case = _case(tmp_path, impl)
    result = CaseResult(samples=(1e-4,) * 5, correct=correct, max_abs_err=None if correct else float("inf"),
                        err_tol=1e-3, notes=None if correct else WRONG_NOTE,
                        metrics={"flops": 2e7, "bytes": 2e5})
    ctx = RunContext(run_id="r", platform="cpu", git_sha="x")
    return row_builder.case_row(case, ctx, ENV, [result], **ended)[0]


def test_a_wrong_row_keeps_its_time_but_gets_no_rate_against_a_peak(tmp_path):
    right = _row(tmp_path, "kernels:good", True)
    assert right["mfu"] and right["tflops_per_s"] and right["mbu"]  # the same reply, right: rated
    wrong = _row(tmp_path, "kernels:wrong_shape", False)
    assert wrong["median_s"] == right["median_s"] and wrong["correct"] is False
    for rate in ("mfu", "tflops_per_s", "mbu", "gbytes_per_s", "roofline_frac"):
        assert wrong.get(rate) is None, (rate, wrong.get(rate))
    assert "WRONG RESULT" in wrong["notes"]


def test_a_wrong_row_does_not_say_ok_on_its_progress_line(tmp_path, monkeypatch):
    wrong = _row(tmp_path, "kernels:wrong_shape", False)
    case = _case(tmp_path, "kernels:wrong_shape")
    p = tmp_path / "s.yaml"

    def run_suite(s: Any, opts: Any, hooks: Any) -> Any:
        hooks.start(["suite s"], 1, [case])
        hooks.row(case, wrong)
        files = suite_runner.results.RunFiles(tmp_path / "r.csv")
        return suite_runner.RunOutcome(files, "", [case], [wrong])

    monkeypatch.setattr(suite_runner, "run_suite", run_suite)
    res = CliRunner().invoke(main, ["run", str(p)])
    lines = [ln for ln in res.output.splitlines() if "kernels:wrong_shape" in ln and "ms" in ln]
    assert lines and not any(ln.lstrip().startswith("ok") for ln in lines), res.output
    assert any(ln.lstrip().startswith("WRONG") for ln in lines), res.output
    assert res.exit_code == 1


def test_a_failed_user_row_is_not_labelled_interpret(tmp_path):
    failed = _row(tmp_path, "nosuchmod:fn", True, ended=(FAILED, "no module named 'nosuchmod'"))
    assert failed["interpret"] is False  # nothing ran, in the interpreter or anywhere
    ok = _row(tmp_path, "kernels:good", True)
    df = pd.DataFrame([{**failed, "interpret": True}, ok])  # a row written before: the label decides too
    labels = [markdown._impl(r) for _, r in df.iterrows()]
    assert labels[0] == "nosuchmod:fn" and labels[1] == "kernels:good (interpret)"
