"""`xlabench compile --explain` then `xlabench explain` on compile-only rows: a scanned gpt2-tiny train step
with flash attention under fsdp on 4 devices of a v5e-8 and of a v4-8 (the breakdown is an estimate: the
optimized HLO's ops under the target's roofline)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import require_libtpu, run_cli
from xlabench.explain.categories import CATEGORY_KEYS
from xlabench.results import read_rows

pytestmark = pytest.mark.slow

SUITE = """
name: tiny_compile
workload: train
backends: [jax]
impls: [flash]
params: {model: gpt2-tiny, seq_len: 256, dtype: bfloat16, remat: full, scan_layers: true, global_batch: 8,
         devices: 4, sharding: fsdp}
measure: {timeout_s: 600}
"""


@pytest.mark.parametrize("target", ["v5e-8", "v4-8"])
def test_compile_only_rows_are_explained_as_estimates(tmp_path: Path, target: str) -> None:
    require_libtpu()
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE.lstrip())
    res = run_cli("compile", str(suite), "--target", target, "--profile", "base", "--explain", "--out",
                  str(tmp_path / "out"), "--no-cache", timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    (csv,) = (tmp_path / "out" / "tiny_compile").glob("*.compile.csv")
    res = run_cli("explain", str(csv))
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "ESTIMATE, not measured" in res.stdout and "est ms/step" in res.stdout
    assert "attention FLOPs: the analytic count" in res.stdout
    row = read_rows(csv).iloc[0]
    assert row["status"] == "compiled" and row["explain_source"] == "estimate"
    cats = {k: row[f"explain_{k}_s"] for k in CATEGORY_KEYS}
    # the step's parts, each where it belongs: the Pallas kernels, fsdp's gathers, the AdamW scope
    assert cats["matmul"] > 0 and cats["attention"] > 0 and cats["collective"] > 0 and cats["optimizer"] > 0
    assert sum(cats.values()) == pytest.approx(row["explain_step_s"])
    saved = json.loads(csv.with_name(csv.name.replace(".csv", ".explain.json")).read_text())
    by_key = {c["key"]: c for c in saved[row["case_id"]]["categories"]}
    assert any(t["name"].startswith("flash") for t in by_key["attention"]["top"])
    # FLOPs from the HLO's shapes, loops x their trips: XLA's count less the Pallas kernels' own estimates
    # (measured on the v4-8: 1.76 of 2.03 GFLOP)
    hlo_flops = sum(c["flops"] or 0 for k, c in by_key.items() if k != "attention")
    assert 0.75 * row["xla_flops"] <= hlo_flops <= row["xla_flops"]
