"""Issue 50 item 5: a run cut short knows it. Its meta records the cases planned and an interruption; `report`,
`plot`, `compare` and `gate` say "9 of 40 cases"; `report` with no argument prefers the newest complete run and
names any newer incomplete one. No worker starts: the pool and the case loop are faked."""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import NoWorkerPool

from tests._gate_data import case, draw, write_run
from xlabench import gate, results
from xlabench import suite as suite_lib
from xlabench.cli import main
from xlabench.protocol.status import SKIPPED
from xlabench.report import inputs
from xlabench.run import interrupts, session
from xlabench.run import rows as row_builder
from xlabench.run import suite_runner

FIX = Path(__file__).parent / "fixtures"
SUITE = """
name: cut
workload: attention
impls: [naive]
params: {num_heads: 2, head_dim: 32, dtype: float32, batch: 1}
matrix:
  seq_len: [32, 64, 96, 128]
measure: {warmup: 0, iters: 2}
"""


class _Worker:
    env = {"platform": "cpu", "device_kind": "cpu", "device_count": 1, "framework_version": "jax 0 / jaxlib 0"}


class _Pool(NoWorkerPool):
    def get(self, *a: Any, **kw: Any) -> _Worker:
        return _Worker()


def _run_cut_after(tmp_path: Path, monkeypatch, rows_before_signal: int) -> Path:
    """A run of the 4-case suite whose case loop writes ``rows_before_signal`` rows, then gets SIGINT."""
    suite = tmp_path / "cut.yaml"
    suite.write_text(SUITE)

    def run_cases(todo, writer, ctx, pool, on_row, *a: Any, **kw: Any):
        for c in todo[:rows_before_signal]:
            row = row_builder.case_row(c, ctx, ended=(SKIPPED, "fake"))[0]
            writer.write(row)
            on_row(c, row)
        raise interrupts.Interrupted(signal.SIGINT)

    monkeypatch.setattr(session, "WorkerPool", _Pool)
    monkeypatch.setattr(suite_runner, "run_cases", run_cases)
    monkeypatch.setattr(suite_runner, "run_peaks", lambda *a: {})
    s = suite_lib.load(suite)
    with pytest.raises(interrupts.Interrupted) as e:
        suite_runner.run_suite(s, suite_runner.RunOptions(out_dir=str(tmp_path / "results"), no_cache=True))
    assert e.value.csv is not None
    return e.value.csv


def test_an_interrupted_run_records_planned_done_and_the_signal_in_its_meta(tmp_path, monkeypatch):
    csv = _run_cut_after(tmp_path, monkeypatch, 1)
    meta = json.loads(results.RunFiles(csv).meta.read_text())
    assert meta["cases_planned"] == 4
    assert meta["interrupted"]["signal"] == "SIGINT" and meta["interrupted"]["cases_done"] == 1
    progress = results.run_progress(csv)
    assert progress is not None and not progress.complete
    assert progress.text() == "1 of 4 cases (interrupted by SIGINT)"


def _incomplete(csv: Path, planned: int, done_rows: int | None = None) -> Path:
    """A meta JSON beside ``csv`` saying the run planned ``planned`` cases and was interrupted."""
    n = done_rows if done_rows is not None else len(results.read_rows(csv))
    results.RunFiles(csv).meta.write_text(json.dumps({
        "run_id": "x", "cases_planned": planned,
        "interrupted": {"signal": "SIGINT", "at": "2026-12-08T00:00:00Z", "cases_done": n}}))
    return csv


def test_a_meta_without_planned_cases_is_not_called_incomplete_and_a_whole_run_is_complete(tmp_path):
    csv = tmp_path / "r.csv"
    shutil.copy(FIX / "attention_cpu.csv", csv)
    assert results.run_progress(csv) is None  # no meta: an older run, nothing to say
    n = len(set(results.read_rows(csv)["case_id"]))
    results.RunFiles(csv).meta.write_text(json.dumps({"cases_planned": n, "ended": "2026-12-08T00:00:00Z"}))
    assert results.run_progress(csv).complete


def test_report_without_arguments_prefers_the_newest_complete_run_and_names_the_newer_cut_one(tmp_path):
    folder = tmp_path / "results" / "attention"
    folder.mkdir(parents=True)
    whole = folder / "20261201-000000-aaaa.csv"
    shutil.copy(FIX / "attention_cpu.csv", whole)
    cut = folder / "20261202-000000-bbbb.csv"
    shutil.copy(FIX / "attention_cpu.csv", cut)
    _incomplete(cut, 200)
    found = inputs.newest_usable(tmp_path / "results")
    assert found.files == [whole]
    assert any(str(cut) in n and "incomplete" in n and "60 of 200 cases (interrupted by SIGINT)" in n
               for n in found.notes), found.notes
    res = CliRunner().invoke(main, ["report", "--results", str(tmp_path / "results"), "--no-charts",
                                    "--out", str(tmp_path / "r.md")])
    assert res.exit_code == 0, res.output
    assert "60 of 200 cases" in res.output and str(whole) in res.output


def test_report_and_plot_of_a_cut_run_say_how_many_cases_it_has(tmp_path):
    cut = tmp_path / "20261202-000000-bbbb.csv"
    shutil.copy(FIX / "attention_cpu.csv", cut)
    _incomplete(cut, 200)
    out = tmp_path / "r.md"
    res = CliRunner().invoke(main, ["report", str(cut), "--no-charts", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "60 of 200 cases (interrupted by SIGINT)" in res.output
    md = out.read_text()
    env = md.split("## Environment", 1)[1].split("##", 1)[0]
    assert "60 of 200 cases (interrupted by SIGINT)" in env
    assert "incomplete" in md.split("## Environment", 1)[0].lower()  # a note at the top, before the tables
    res = CliRunner().invoke(main, ["plot", str(cut), "--out", str(tmp_path / "p"), "--format", "svg",
                                    "--kind", "speedup"])
    assert res.exit_code == 0, res.output
    assert "60 of 200 cases (interrupted by SIGINT)" in res.output


def test_compare_and_gate_say_a_side_is_a_cut_run(tmp_path):
    rng = np.random.default_rng(5)
    entries = [(case("naive", s), draw(rng, 10)) for s in (64, 128)]
    base = write_run(tmp_path / "base.csv", entries, "r1")
    cand = _incomplete(write_run(tmp_path / "cand.csv", entries, "r2"), 40)
    cmp = gate.compare(gate.load_run(base), gate.load_run(cand), gate.GateConfig())  # the gate's own call
    assert any("candidate" in w and "2 of 40 cases (interrupted by SIGINT)" in w for w in cmp.warnings), cmp.warnings
    res = CliRunner().invoke(main, ["compare", str(base), str(cand)])
    assert "2 of 40 cases (interrupted by SIGINT)" in res.output, res.output
