"""Issue 50 item 6: a wrong user kernel (wrong output shape) showed "ok … 0.036 ms" on its progress line and got
67% MFU in its row, only the summary said WRONG RESULT; failed user rows, "nosuchmod:fn" included, were
labelled "(interpret)". No worker starts: rows are built from a made-up reply (run/rows.case_row)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
from click.testing import CliRunner

from xlabench import suite
from xlabench.cli import main
from xlabench.protocol.status import FAILED
from xlabench.protocol.worker_messages import CaseResult
from xlabench.report import markdown, summary
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


# ------------------------------------------------------------------------------ issue 61 item 7: fwd_bwd

PLAIN_KERNELS = """
import jax
import jax.numpy as jnp

def plain(q, k, v, cfg):
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k) * cfg.sm_scale
    return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, axis=-1), v)
"""


@pytest.mark.parametrize("kernel,said", [
    (lambda q, k, v, cfg: q[:, :, :1], "out has shape (1, 64, 1, 32) dtype float32, expected shape (1, 64, 2, 32)"),
    (lambda q, k, v, cfg: q.astype("bfloat16"), "dtype bfloat16, expected shape (1, 64, 2, 32) dtype float32"),
    (lambda q, k, v, cfg: (q, q), "returned 2 array(s), expected 1"),
])
def test_a_fwd_bwd_kernel_of_the_wrong_output_says_what_fwd_says_not_jaxs_vjp_error(kernel, said):
    """fwd's row states the expected shape; fwd_bwd's said "ValueError: unexpected JAX type … for argument to VJP
    function" (a tuple: "unexpected tree structure")."""
    import jax

    from xlabench.backends.jax import attention_case
    from xlabench.workloads.attention import AttentionParams, make_inputs

    p = AttentionParams(batch=1, num_heads=2, seq_len=64, head_dim=32, dtype="float32", mode="fwd_bwd")
    step = attention_case.step_fn(p, SimpleNamespace(fn=kernel), p.attn_config(False))
    with pytest.raises(Exception) as e:
        jax.jit(step).lower(*make_inputs(p).values())
    assert str(e.value).startswith("wrong output: ") and said in str(e.value), str(e.value)


def test_a_plain_jnp_user_kernel_is_not_starred_as_an_interpreted_kernel(tmp_path, monkeypatch):
    """On CPU a user impl is handed interpret=True; one of plain jnp ops runs no Pallas kernel, so its row is
    not marked interpreted (the summary's '*', the report's '(interpret)')."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    from xlabench.backends.jax.attention_case import run_attention_case
    from xlabench.backends.jax.common import runs_pallas
    from xlabench.measure.timing import TimingPlan

    def double(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    x = jnp.ones((8, 128))
    kernel = jax.jit(lambda y: pl.pallas_call(double, out_shape=jax.ShapeDtypeStruct(y.shape, y.dtype),
                                              interpret=True)(y))
    assert runs_pallas(lambda y: kernel(y) + 1, (x,)) and not runs_pallas(lambda y: jnp.sin(y) * 2, (x,))

    (tmp_path / "plainmod.py").write_text(PLAIN_KERNELS)
    monkeypatch.syspath_prepend(str(tmp_path))
    params = dict(batch=1, num_heads=2, seq_len=64, head_dim=32, dtype="float32", causal=False)
    result = run_attention_case(params, "plainmod:plain", TimingPlan(warmup=0, iters=1), True, "cpu")
    assert result.correct and result.metrics.get("interpret") is False, result.metrics
    case = _case(tmp_path, "plainmod:plain")
    row = row_builder.case_row(case, RunContext(run_id="r", platform="cpu", git_sha="x"), ENV, [result])[0]
    assert row["interpret"] is False and not summary.interpreted(row)
    assert str(summary._impl(row)) == "plainmod:plain"


def test_the_run_summary_does_not_count_wrong_rows_as_ok(tmp_path):
    case = _case(tmp_path, "kernels:wrong_shape")
    rows = [_row(tmp_path, "kernels:wrong_shape", False), _row(tmp_path, "kernels:good", True)]
    outcome = suite_runner.RunOutcome(suite_runner.results.RunFiles(tmp_path / "r.csv"), "", [case, case], rows)
    counts = outcome.counts()
    assert counts["ok"] == 1 and counts[suite_runner.WRONG] == 1, counts


def test_the_report_says_what_was_wrong_not_max_abs_err_inf(tmp_path):
    wrong = _row(tmp_path, "kernels:wrong_shape", False)
    text = markdown.problems(pd.DataFrame([wrong]))
    assert WRONG_NOTE in text and "inf" not in text, text


def test_a_wrong_rows_figures_are_not_audited_as_physics(tmp_path):
    """A wrong row's roofline_frac (2.166 in the issue: the work the row counts was not done) is no finding;
    audit counts the row apart."""
    from xlabench import results
    from xlabench.audit import check_row
    from xlabench.audit import files as audit_files

    wrong = _row(tmp_path, "kernels:wrong_shape", False)
    right = _row(tmp_path, "kernels:good", True)
    wrong.update({k: right[k] for k in ("mfu", "tflops_per_s", "roofline_frac", "bound_s")})  # a row from before
    wrong["roofline_frac"] = 2.166
    assert check_row(wrong) == {}
    files = results.RunFiles(tmp_path / "run.csv")
    writer = results.RowWriter(files)
    for r in (wrong, right):
        writer.write(r)
    found = audit_files.audit([files.csv])
    assert found.rows == 1 and found.wrong == 1 and not found.broken, found.findings
