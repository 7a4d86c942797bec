"""End to end: `xlabench run` of a tiny paged-attention suite in a worker process, then the CSV."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from xlabench import results
from xlabench.workloads.paged import PagedParams

pytestmark = pytest.mark.slow

SUITE = """\
name: paged_tiny
workload: paged_attention
impls: [naive, paged, ragged_paged, paged_gpu]
params:
  batch: 3
  context_lens: [1, 16, 23]
  num_heads: 4
  num_kv_heads: 2
  head_dim: 128
  page_size: 16
  total_pages: 8
  dtype: float32
measure:
  warmup: 1
  iters: 3
  timeout_s: 300
"""


def test_run_tiny_paged_suite(tmp_path: Path):
    suite = tmp_path / "paged_tiny.yaml"
    suite.write_text(SUITE)
    out = tmp_path / "results"
    proc = subprocess.run([sys.executable, "-m", "xlabench.cli", "run", str(suite), "--out", str(out)],
                          capture_output=True, text=True, timeout=600, cwd=Path(__file__).parent.parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 ok, 0 failed, 1 skipped" in proc.stdout
    assert "GB/s" in proc.stdout and "MBU %" in proc.stdout  # the summary shows bandwidth for this workload
    (csv_path,) = [p for p in (out / "paged_tiny").glob("*.csv") if not p.name.endswith(".samples.csv")]
    df = results.read_rows(csv_path).set_index("impl")

    assert df.loc["ragged_paged", "status"] == "skipped"
    assert "does not run in the CPU Pallas interpreter" in df.loc["ragged_paged", "error"]
    expected = PagedParams(batch=3, context_lens=[1, 16, 23], num_heads=4, num_kv_heads=2, head_dim=128,
                           page_size=16, total_pages=8, dtype="float32")
    ok = df[df["status"] == "ok"]
    assert sorted(ok.index) == ["naive", "paged", "paged_gpu"]
    assert ok["interpret"].to_dict() == {"naive": False, "paged": True, "paged_gpu": True}
    assert (ok["correct"] == True).all() and (ok["max_abs_err"] < 2e-6).all()  # noqa: E712
    assert (ok["bytes"] == expected.bytes()).all() and (ok["flops"] == 4 * 4 * 128 * 40).all()
    assert (ok["context_lens"] == "1,16,23").all() and (ok["max_context"] == 32).all()
    gbps = ok["bytes"] / ok["median_s"] / 1e9
    assert ok["gbytes_per_s"].to_numpy() == pytest.approx(gbps.to_numpy())
    assert ok["mbu"].to_numpy() == pytest.approx((gbps / ok["peak_gbytes_per_s"]).to_numpy())
    assert ok["peak_source"].str.contains("streaming copy").all()
    assert ok["tokens_per_s"].to_numpy() == pytest.approx((3 / ok["median_s"]).to_numpy())
    samples = results.read_samples(csv_path)
    assert set(samples["case_id"]) == set(ok["case_id"]) and len(samples) == 3 * 3
