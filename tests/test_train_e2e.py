"""End to end: ``xlabench run suites/gpt2.yaml`` (cpu profile, naive attention) through the CLI."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from xlabench.results import read_rows, read_samples
from xlabench.workloads.train import TrainParams

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_gpt2_suite_cpu_profile_through_the_cli(tmp_path: Path) -> None:
    # The JAX rows of the suite (its torch_xla rows, skipped here without their environment, are
    # tested in test_torch_xla.py on a smaller model: compiling them takes minutes on 2 cores), at its
    # smallest batch: batch 32's cases added a third of the test's 87 s of CI and no other check, and batch
    # 16's two cases (each 16 steps of up to 0.55 s on 8 virtual devices) 20 s of the 45 s left and none.
    env = dict(os.environ, XLABENCH_TORCH_XLA_PYTHON=str(tmp_path / "no-torch-xla" / "python"))
    proc = subprocess.run(
        [sys.executable, "-m", "xlabench.cli", "run", "suites/gpt2.yaml", "--profile", "cpu", "--impl", "naive",
         "-k", "global_batch=8", "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "MFU %" in proc.stdout and "2 ok, 0 failed, 4 skipped" in proc.stdout
    (csv,) = [p for p in (tmp_path / "gpt2").glob("*.csv") if not p.name.endswith(".samples.csv")]
    df = read_rows(csv)
    assert (df[df["backend"] == "torch_xla"]["status"] == "skipped").all()
    df = df[df["backend"] == "jax"]
    assert len(df) == 3 and set(df["workload"]) == {"train"} and set(df["profile"]) == {"cpu"}
    skipped = df[df["status"] == "skipped"]
    assert set(skipped["sharding"]) == {"auto"} and skipped["error"].str.contains("auto-sharding").all()
    ok = df[df["status"] == "ok"]
    assert set(ok["sharding"]) == {"fsdp", "2d"} and set(ok["global_batch"]) == {8}
    assert set(ok["mesh"]) == {"data=1,fsdp=8,tensor=1", "data=1,fsdp=4,tensor=2"}
    assert (ok["device_count"] == 8).all() and (ok["devices"] == 8).all()
    samples = read_samples(csv)
    for _, r in ok.iterrows():
        params = {k: r[k] for k in TrainParams.model_fields if k in r and not (isinstance(r[k], float) and math.isnan(r[k]))}
        p = TrainParams(**{k: int(v) if isinstance(v, float) and v.is_integer() else v for k, v in params.items()})
        assert r["flops"] == pytest.approx(p.flops()) and r["flops_palm"] == pytest.approx(p.flops_palm())
        assert r["params_count"] == p.params_count()
        assert r["mfu"] == pytest.approx(r["flops"] / (r["median_s"] * 8 * r["peak_tflops"] * 1e12))
        assert r["mfu_palm"] == pytest.approx(r["flops_palm"] / (r["median_s"] * 8 * r["peak_tflops"] * 1e12))
        assert r["tokens_per_s"] == pytest.approx(r["global_batch"] * 128 / r["median_s"])
        assert r["tokens_per_s_per_device"] == pytest.approx(r["tokens_per_s"] / 8)
        losses = json.loads(r["losses"])
        # every step of the pipelined loops: n samples of steps_per_sample steps each
        assert r["n"] == 3 and len(losses) == 3 * r["steps_per_sample"] and all(math.isfinite(x) for x in losses)
        assert losses[0] == pytest.approx(r["loss_first"]) and losses[-1] == pytest.approx(r["loss_last"])
        assert r["loss_last"] < r["loss_first"]  # the same batch every step: the model memorises it
        assert r["correct"] and r["max_abs_err"] <= r["err_tol"]
        assert r["peak_memory_bytes"] > 0 and r["compile_s"] > 0
        assert len(samples[samples["case_id"] == r["case_id"]]) == 3
