"""`xlabench run --explain` then `xlabench explain` on a real CPU trace (a tiny train step), and the
command's bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli

pytestmark = pytest.mark.slow

TRAIN = """
name: tiny_train
workload: train
backends: [jax]
impls: [naive]
params: {model: gpt2-tiny, seq_len: 64, dtype: float32, global_batch: 2, sharding: dp, devices: 1,
         steps_per_sample: 2}
measure: {warmup: 1, iters: 3, timeout_s: 300}
"""


@pytest.fixture(scope="module")
def explained_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One CPU run with --explain: its CSV."""
    tmp = tmp_path_factory.mktemp("explain")
    suite = tmp / "train.yaml"
    suite.write_text(TRAIN.lstrip())
    res = run_cli("run", str(suite), "--explain", "--out", str(tmp / "out"))
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    (csv,) = [p for p in (tmp / "out" / "tiny_train").glob("*.csv") if not p.name.endswith(".samples.csv")]
    return csv


def test_run_explain_keeps_the_trace_and_the_hlo_beside_the_run(explained_run: Path) -> None:
    meta = json.loads(explained_run.with_name(explained_run.name.replace(".csv", ".meta.json")).read_text())
    root = Path(meta["trace_root"])
    assert root == explained_run.with_name(explained_run.name.replace(".csv", ".explain"))
    (case_id,) = meta["traces"]
    assert any(p.endswith(".xplane.pb") for p in meta["traces"][case_id])
    hlo = (root / case_id / "jit_step.hlo.txt").read_text()
    assert hlo.startswith("HloModule jit_step") and "xlabench_optimizer" in hlo  # the update's scope
