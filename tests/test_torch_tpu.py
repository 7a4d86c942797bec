"""The torch_tpu backend (TorchTPU) where no TPU is: its case runners' plumbing on CPU torch (the torch_xla
environment's torch, TorchTPU's runtime stubbed: tests/torch_tpu_cpu/plumbing.py), its rows skipped with
the reason on a host that cannot run them, its environment found as torch_xla's is, and the shipped tune
table read for TorchTPU's name of the chip. The kernels' speed and their rows come from the TPU only
(docs/tpu.md)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import require_torch_xla
from xlabench.cli import main
from xlabench.impls import kernels
from xlabench.run import envs
from xlabench.tune import table

ROOT = Path(__file__).resolve().parents[1]
SUITE = """
name: tt
workload: attention
backends: [jax, torch_tpu]
impls:
  jax: [naive]
  torch_tpu: [naive, sdpa, splash]
params: {batch: 1, num_heads: 2, head_dim: 32, dtype: float32, seq_len: 64, causal: true, mode: fwd}
measure: {warmup: 1, iters: 2}
"""


@pytest.mark.slow  # starts a process
def test_the_case_runners_plumbing_on_cpu_torch():
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run([require_torch_xla(), str(ROOT / "tests" / "torch_tpu_cpu" / "plumbing.py")],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for case in ("naive/fwd", "naive/fwd_bwd", "sdpa/fwd", "sdpa/fwd_bwd"):
        correct, err, samples, timer = out[case]
        assert correct and err < 1e-5 and samples == 2 and timer == "wallclock", (case, out[case])
    assert out["paged/naive"][0] and out["paged/naive"][1] < 1e-5
    # every workload's phases, as the JAX runners log them (the run's meta sums them per phase)
    for case in ("naive/fwd", "sdpa/fwd_bwd"):
        assert out[f"phases/{case}"] == ["check", "compile", "inputs", "reference", "timing", "tune"], case
    assert out["phases/paged"] == ["check", "compile", "inputs", "timing", "tune"]
    assert out["phases/train"] == ["compile", "reference", "timing", "tune"]
    assert out["row_check/attention"][:2] == [[["wall"]], "search"] and out["row_check/attention"][3]
    assert "off its record: searched" in out["row_check/attention"][2]
    assert out["row_check/paged"][0] == "search" and "off its record" in out["row_check/paged"][1]
    assert out["row_check/paged"][2] and out["row_check/measured"] == ["attention"] * 2 + ["paged"] * 2
    correct, err, samples, loss = out["train/naive"]
    assert correct and samples == 2 and 4 < loss < 7  # GPT-2 tiny's first loss: about ln(vocab)
    assert out["per_call"] == pytest.approx([0.3, 0.7])  # two executions per call, summed
    assert "not a whole number per call" in out["per_call_odd"] and "no XLA module" in out["per_call_none"]
    assert out["splash_blocks"] == {"block_q": 256, "block_kv": 512, "block_kv_compute": 256, "block_q_dkv": 128,
                                    "block_kv_dkv": 256, "block_kv_dkv_compute": 256, "block_q_dq": 128,
                                    "block_kv_dq": 256, "use_fused_bwd_kernel": True}
    assert "libtpu 0.0.42.1 (torch-tpu 0.2.0 declares libtpu>=0.0.50)" in out["shortfall"]
    assert "math.log2" in out["shortfall"] and out["no_shortfall"] is None
    assert out["one_layer_code"] and out["remat_same_losses"]
    assert out["no_kv_seq_len"] == [1, 2, 64, 32]
    for impl in ("naive", "sdpa", "splash"):
        assert out[f"one_graph/{impl}"] is True, out[f"one_graph/{impl}"]
    # the train step's optimizer: torch's AdamW's steps, one compiled graph (no recompile), each parameter its own
    # buffer (a model whose parameters aliased one buffer asked TorchTPU's compile for 35.43 GB at GPT-2 124M)
    assert out["adamw_max_diff"] < 1e-6 and out["adamw_moved"] > 0.1, out
    assert out["adamw_apart"] and out["adamw_steps"] == 3.0
    # the train step's chunked loss: the whole logits' mean, per-sequence losses and gradients, eager and compiled
    assert out["chunked_loss/grad_scale"] > 1e-3
    for name in ("0", "24", "24/compiled"):
        grad, per_seq, mean, tracked = out[f"chunked_loss/{name}"]
        assert grad < 1e-6 and per_seq < 1e-5 and mean < 1e-5 and not tracked, (name, out[f"chunked_loss/{name}"])
    assert out["peak_impossible"][0] is None and "more than the chip holds" in out["peak_impossible"][1]
    assert out["peak_plausible"] == [3 * 2**30, "peak memory: torch.accelerator.max_memory_allocated"]


def test_on_a_tpu_host_without_its_environment_the_rows_say_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", "tpu")  # the plan's platform, read without a worker
    monkeypatch.setenv(envs.ENVIRONMENTS["torch_tpu"].env_var, str(tmp_path / "no-python"))
    suite = tmp_path / "tt.yaml"
    suite.write_text(SUITE)
    res = CliRunner().invoke(main, ["run", str(suite), "--out", str(tmp_path / "out"), "--dry-run"])
    assert res.exit_code == 0, res.output
    assert "run  jax/naive" in res.output
    for impl in ("naive", "sdpa", "splash"):
        assert f"skip torch_tpu/{impl}" in res.output
    assert "torch_tpu environment missing (make torch-tpu-env)" in res.output and "no-python" in res.output


def test_on_a_cpu_host_the_rows_say_they_run_on_a_tpu(tmp_path, monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    suite = tmp_path / "tt.yaml"
    suite.write_text(SUITE)
    res = CliRunner().invoke(main, ["run", str(suite), "--out", str(tmp_path / "out"), "--dry-run"])
    assert res.exit_code == 0, res.output
    assert "torch_tpu/sdpa runs on tpu, not cpu" in res.output


def test_its_environment_is_found_as_torch_xlas_is(tmp_path, monkeypatch):
    e = envs.ENVIRONMENTS["torch_tpu"]
    monkeypatch.delenv(e.env_var, raising=False)
    assert envs.Interpreters().resolve("torch_tpu") == (str(e.default), "the default location")
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    monkeypatch.setenv(e.env_var, str(python))
    assert envs.Interpreters().python_for("torch_tpu") == str(python)
    assert envs.Interpreters().missing("torch_tpu") is None
    env = envs.worker_environ("torch_tpu", 1, {"JAX_PLATFORMS": "tpu,cpu"})
    assert env["JAX_PLATFORMS"] == "cpu"  # JAX only traces kernels there: TorchTPU holds the chip


def test_every_torch_tpu_kernel_names_its_code_and_no_table_in_the_backend_names_kernels():
    mine = [k for k in kernels.KERNELS if k.info.backend == "torch_tpu"]
    assert {(k.info.name, k.paged) for k in mine} == {("naive", False), ("sdpa", False), ("flash", False),
                                                      ("splash", False), ("naive", True), ("paged", True),
                                                      ("ragged_paged", True)}
    folder = ROOT / "xlabench" / "backends" / "torch_tpu"
    for k in mine:
        module, function = k.code.split(":")
        assert module.startswith("xlabench.backends.torch_tpu.")
        text = (ROOT / (module.replace(".", "/") + ".py")).read_text()
        assert f"\ndef {function}(" in text or f"\n{function} = " in text, k.code
    for path in folder.glob("*.py"):  # kernels are named by their records, not keyed by name in the backend
        assert "REGISTRY" not in path.read_text(), path.name


def test_the_shipped_table_is_read_for_torch_tpus_name_of_the_chip():
    assert table.same_chip("TPU v5e", "TPU v5 lite") and not table.same_chip("TPU v5e", "TPU v6 lite")
    shipped, why = table.for_device("TPU v5e")
    assert shipped is not None and why == ""
    assert shipped.device_kind == "TPU v5 lite"


def test_a_chart_title_names_one_chip_once_whichever_framework_named_it():
    """JAX calls the v5e 'TPU v5 lite', TorchTPU 'TPU v5e': a run of both drew 'TPU v5 lite ×1, TPU v5e ×1'."""
    import pandas as pd

    from xlabench.report import chartdata as cd

    df = pd.DataFrame({"suite": ["attention"] * 2, "device_kind": ["TPU v5 lite", "TPU v5e"],
                       "device_count": [1, 1], "interpret": [False, False]})
    assert cd.title(df, "Attention").splitlines()[1] == "TPU v5 lite ×1"


def test_a_run_keeping_traces_has_its_torch_tpu_workers_dump_their_compiled_programs():
    """`run --explain` on TorchTPU: the worker's libtpu dumps its torch.compile'd programs' HLO text (XLA_FLAGS,
    which libtpu reads when TorchTPU starts it) for each case to keep beside its trace."""
    from xlabench.run.workers import WorkerSpec

    flags = WorkerSpec("torch_tpu", 1, hlo_dump="/r/RUN.explain/.hlo-dump").environ()["XLA_FLAGS"].split()
    assert "--xla_dump_to=/r/RUN.explain/.hlo-dump" in flags and "--xla_dump_hlo_as_text" in flags
    assert "--xla_dump_hlo_module_re=tt_jit_export.*" in flags
    assert "xla_dump_to" not in WorkerSpec("jax", 1, hlo_dump="/x").environ()["XLA_FLAGS"]
    assert "xla_dump_to" not in WorkerSpec("torch_tpu", 1).environ()["XLA_FLAGS"]
