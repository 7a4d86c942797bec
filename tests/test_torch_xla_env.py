"""torch_xla plumbing that needs no torch_xla: interpreter discovery, worker environment, per-backend
impl lists, and the run's behaviour when the torch_xla environment is missing (JAX rows still run)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from xlabench import results
from xlabench.run import envs
from xlabench import suite as suite_lib
from xlabench.cli import main

from conftest import run_cli

BOTH = """
name: both
workload: attention
backends: [jax, torch_xla]
impls:
  jax: [naive, xla_sdpa]
  torch_xla: [naive, sdpa]
params: {num_heads: 2, head_dim: 32, dtype: float32, batch: 1}
matrix:
  seq_len: [64, 128]
measure: {warmup: 0, iters: 2, timeout_s: 120}
"""


def test_interpreter_resolution_order(monkeypatch, tmp_path):
    monkeypatch.delenv(envs.TORCH_XLA_ENV_VAR, raising=False)
    assert envs.Interpreters().torch_xla() == (str(envs.TORCH_XLA_DEFAULT), "the default location")
    monkeypatch.setenv(envs.TORCH_XLA_ENV_VAR, "/from/env/python")
    assert envs.Interpreters().python_for("torch_xla") == "/from/env/python"
    assert envs.Interpreters("/from/option").torch_xla() == ("/from/option", "--python-torch-xla")
    assert envs.Interpreters("/from/option").python_for("jax") != "/from/option"  # JAX: the CLI's own python


def test_missing_reason_says_how_to_create_it(tmp_path):
    reason = envs.Interpreters(str(tmp_path / "nope" / "python")).missing("torch_xla")
    assert reason and "make torch-xla-env" in reason and str(tmp_path / "nope") in reason
    assert "torch==2.9.0" in reason and "--python-torch-xla" in reason
    assert envs.Interpreters(str(tmp_path / "nope")).missing("jax") is None


def test_worker_environ_per_backend(monkeypatch):
    monkeypatch.setattr(envs, "tpu_chips_present", lambda: False)
    env = envs.worker_environ("torch_xla", 4, {"XLA_FLAGS": "--xla_force_host_platform_device_count=9 --foo"})
    assert env["CPU_NUM_DEVICES"] == "4" and env["PJRT_DEVICE"] == "CPU"
    assert env["XLA_FLAGS"].split() == ["--foo", "--xla_force_host_platform_device_count=4"]
    assert envs.worker_environ("torch_xla", 1, {"PJRT_DEVICE": "TPU"})["PJRT_DEVICE"] == "TPU"  # user's choice kept
    assert "PJRT_DEVICE" not in envs.worker_environ("jax", 2, {})
    monkeypatch.setattr(envs, "tpu_chips_present", lambda: True)
    assert "PJRT_DEVICE" not in envs.worker_environ("torch_xla", 1, {})  # torch_xla picks TPU itself


def test_per_backend_impl_lists_expand_to_their_own_pairs(write_suite):
    cases = suite_lib.load(write_suite(BOTH)).cases("")
    pairs = sorted({(c.backend, c.impl) for c in cases})
    assert pairs == [("jax", "naive"), ("jax", "xla_sdpa"), ("torch_xla", "naive"), ("torch_xla", "sdpa")]
    assert len(cases) == 8
    same = [c for c in cases if c.impl == "naive" and c.params["seq_len"] == 64]
    assert len({c.case_id for c in same}) == 2  # the backend is part of the case id


@pytest.mark.parametrize("text,pattern", [
    (BOTH.replace("torch_xla: [naive, sdpa]", "torch_xla: [naive, xla_sdpa]"),
     r"impls.torch_xla.1: unknown impl 'xla_sdpa' for workload 'attention' on backend 'torch_xla' "
     r"\(expected one of: naive, sdpa, flash, splash; or an import path package.module:function\)"),
    (BOTH.replace("  torch_xla: [naive, sdpa]\n", ""), r"no impl list for backend 'torch_xla'"),
    (BOTH.replace("torch_xla: [naive, sdpa]", "torch-xla: [naive]"), r"impls.torch-xla: unknown backend"),
    (BOTH.replace("torch_xla: [naive, sdpa]", "torch_xla: []"), r"impls.torch_xla: empty list"),
])
def test_bad_per_backend_impls(write_suite, text, pattern):
    with pytest.raises(suite_lib.SuiteError, match=pattern):
        suite_lib.load(write_suite(text))


def _csv(out: Path) -> Path:
    found = [p for p in out.glob("*/*.csv") if not p.name.endswith(".samples.csv")]
    assert len(found) == 1, found
    return found[0]


@pytest.mark.slow
def test_missing_torch_xla_env_gives_skipped_rows_and_jax_still_runs(write_suite, tmp_path):
    out = tmp_path / "res"
    missing = tmp_path / "no-such-env" / "bin" / "python"
    proc = run_cli("run", str(write_suite(BOTH)), "--out", str(out),
                   env={envs.TORCH_XLA_ENV_VAR: str(missing)})
    assert proc.returncode == 0, proc.stdout + proc.stderr  # skipped rows are not failures
    assert proc.stderr.count("torch_xla environment missing") == 1 and "make torch-xla-env" in proc.stderr
    df = results.read_rows(_csv(out))
    jax_rows, txla_rows = df[df.backend == "jax"], df[df.backend == "torch_xla"]
    assert len(jax_rows) == 4 and set(jax_rows.status) == {"ok"} and jax_rows.correct.all()
    assert len(txla_rows) == 4 and set(txla_rows.status) == {"skipped"}
    for err in txla_rows.error:
        assert str(missing) in err and "make torch-xla-env" in err and envs.TORCH_XLA_ENV_VAR in err


def test_bad_python_torch_xla_option_is_bad_input(write_suite, tmp_path):
    res = CliRunner().invoke(main, ["run", str(write_suite(BOTH)), "--python-torch-xla", str(tmp_path / "py")])
    assert res.exit_code == 2 and "--python-torch-xla" in res.output and "make torch-xla-env" in res.output
