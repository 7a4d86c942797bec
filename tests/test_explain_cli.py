"""`xlabench run --explain` then `xlabench explain` on a real CPU trace (a tiny train step), and the
command's bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli
from xlabench.explain.categories import CATEGORY_KEYS
from xlabench.results import read_rows

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


def test_explain_a_real_cpu_trace(explained_run: Path) -> None:
    res = run_cli("explain", str(explained_run))
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    out = res.stdout
    assert "source: trace (CPU host threads" in out and "matmuls" in out and "optimizer update" in out
    assert max(len(line) for line in out.splitlines() if not line.startswith("wrote ")) <= 80
    df = read_rows(explained_run)
    row = df.iloc[0]
    assert row["explain_source"] == "trace"
    cats = {k: row[f"explain_{k}_s"] for k in CATEGORY_KEYS}
    assert cats["matmul"] > 0 and cats["optimizer"] > 0 and cats["attention"] == 0  # naive: no kernel
    assert row["explain_idle_s"] >= 0
    # summed from the ops' own times: within 5% of the device time, or the table says what is missing
    total = sum(cats.values())
    assert abs(total - row["explain_step_s"]) <= 0.05 * row["explain_step_s"] or "op times sum to" in out
    saved = json.loads(explained_run.with_name(explained_run.name.replace(".csv", ".explain.json")).read_text())
    assert saved[row["case_id"]]["sum_s"] == pytest.approx(total)


def test_bad_input_exits_2_with_one_line(tmp_path: Path, explained_run: Path) -> None:
    not_a_run = tmp_path / "x.csv"
    not_a_run.write_text("a,b\n1,2\n")
    no_trace = tmp_path / "plain.csv"
    no_trace.write_text(explained_run.read_text())  # the rows, without the meta JSON that names the traces
    for args, message in (([str(not_a_run)], "not an xlabench results CSV"),
                          ([str(no_trace)], "kept no trace or HLO text"),
                          ([str(explained_run), "-k", "impl=flash"], "no row matches -k impl=flash")):
        res = run_cli("explain", *args)
        assert res.returncode == 2 and message in res.stderr, res.stderr
        assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
