"""`compare` and `gate` on real CSVs from CPU runs of a tiny attention suite (workers, real timings).

Timings on this machine are noisy (two runs of a 50 µs case can differ 2x under load), so no test
here relies on two real runs agreeing: a regression or an improvement is made certain by scaling a
copy of a real run's times 5x (a "doctored" baseline).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from xlabench import results
from xlabench.cli import main

pytestmark = pytest.mark.slow

SUITE = """\
name: tiny
description: two tiny forward cases for the gate tests
workload: attention
backends: [jax]
impls: [naive, xla_sdpa]
params: {batch: 2, num_heads: 2, head_dim: 32, seq_len: 64, dtype: float32, causal: false, mode: fwd}
measure: {warmup: 2, iters: 20, min_time_s: 0.0, timeout_s: 120}
"""

_TIME_COLUMNS = ("median_s", "mean_s", "min_s", "p10_s", "p90_s", "stdev_s")
_RATE_COLUMNS = ("tflops_per_s", "mfu", "gbytes_per_s", "mbu", "tokens_per_s")


def _cli(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.fixture(scope="session")
def real_run(tmp_path_factory) -> tuple[Path, Path]:
    """(suite file, results CSV of one real run of it)."""
    d = tmp_path_factory.mktemp("gate_e2e")
    suite = d / "tiny.yaml"
    suite.write_text(SUITE)
    r = _cli("run", str(suite), "--out", str(d / "results"))
    assert r.exit_code == 0, r.output
    csv = Path(re.search(r"results: (\S+\.csv)", r.output).group(1))
    assert len(results.read_rows(csv)) == 2
    return suite, csv


def doctor(src: Path, dst: Path, factor: float) -> Path:
    """Copy a run with every time multiplied by ``factor`` (and throughputs divided by it), and without the
    host calibration taken beside the real run: that measured the load the run saw, not the staged change."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    rows = pd.read_csv(src, dtype=str, keep_default_na=False)
    rows["host_calib_s"] = ""
    for col in _TIME_COLUMNS + _RATE_COLUMNS:
        scale = factor if col in _TIME_COLUMNS else 1 / factor
        rows[col] = [repr(float(v) * scale) if v else v for v in rows[col]]
    rows.to_csv(dst, index=False)
    samples = pd.read_csv(results.RunFiles(src).samples, dtype={"case_id": str, "run_id": str})
    samples["seconds"] = samples["seconds"] * factor
    samples.to_csv(results.RunFiles(dst).samples, index=False)
    return dst


def test_a_doctored_baseline_is_judged_whatever_load_its_real_run_saw(real_run, tmp_path):
    """The baselines of these tests are the fixture run's files with every time scaled: the host calibration
    taken beside that run (under whatever load it saw) says nothing of the change they stage. A CI run once
    called the staged 5x improvement 'confounded': the fixture run's calibration kernel had run under load,
    the gate's run 0.59x as long."""
    _, csv = real_run
    loaded = tmp_path / "loaded.csv"  # the same run, as if taken beside a calibration kernel 5x as slow
    rows = pd.read_csv(csv, dtype=str, keep_default_na=False)
    rows["host_calib_s"] = [repr(float(v) * 5) for v in rows["host_calib_s"]]
    rows.to_csv(loaded, index=False)
    shutil.copy(results.RunFiles(csv).samples, results.RunFiles(loaded).samples)
    base = doctor(loaded, tmp_path / "slow.csv", 5.0)
    js = tmp_path / "v.json"
    r = _cli("compare", str(base), str(csv), "--json", str(js))
    assert r.exit_code == 0, r.output
    assert [c["verdict"] for c in json.loads(js.read_text())["cases"]] == ["improvement", "improvement"], r.output


def test_compare_a_real_run_with_itself_passes(real_run):
    _, csv = real_run
    r = _cli("compare", str(csv), str(csv))
    assert r.exit_code == 0, r.output
    assert "PASSED: 2 unchanged" in r.output


def test_compare_flags_a_real_run_against_a_much_faster_baseline(real_run, tmp_path):
    _, csv = real_run
    # The same samples at a fifth: no noise between the files, and a gap wider than a loaded host's spread
    # within one run (halved, CI once judged a case 'unchanged': its own samples spread over 2x under load)
    base = doctor(csv, tmp_path / "fast.csv", 0.2)
    js = tmp_path / "v.json"
    r = _cli("compare", str(base), str(csv), "--json", str(js))
    assert r.exit_code == 1, r.output
    cases = json.loads(js.read_text())["cases"]
    assert [c["verdict"] for c in cases] == ["regression", "regression"]
    assert all(c["ratio"] == pytest.approx(5.0) and c["ci_low"] > 1.05 for c in cases)
    # the same files judged on TFLOP/s (higher is better): the same regression, direction flipped
    r = _cli("compare", str(base), str(csv), "--metric", "tflops_per_s", "--json", str(js))
    assert r.exit_code == 1, r.output
    assert all(c["verdict"] == "regression" and c["ratio"] == pytest.approx(0.2)
               for c in json.loads(js.read_text())["cases"])


def test_gate_confirms_a_reproducible_regression(real_run, tmp_path):
    suite, csv = real_run
    base = doctor(csv, tmp_path / "baselines" / "tiny.csv", 0.2)
    before = base.read_bytes()
    js, md = tmp_path / "v.json", tmp_path / "summary.md"
    r = _cli("gate", str(suite), "--baseline", str(base), "--out", str(tmp_path / "results"),
             "--json", str(js), "--markdown", str(md), "--save-baseline")
    assert r.exit_code == 1, r.output
    data = json.loads(js.read_text())
    assert data["counts"]["regression"] == 2, r.output
    for c in data["cases"]:
        assert c["confirmation"]["verdict"] == "regression", c
    # the re-run measured only the flagged cases, in its own files
    again = results.read_rows(Path(data["confirm_run"]))
    assert sorted(again["case_id"]) == sorted(c["case_id"] for c in data["cases"])
    assert Path(data["confirm_run"]).name.endswith("-confirm.csv")
    assert "re-run" in md.read_text() and md.read_text().startswith("## ❌ xlabench gate: FAILED")
    assert base.read_bytes() == before and "NOT updated" in r.output  # a failing run never becomes the baseline


def test_gate_passes_on_improvement_and_saves_the_new_baseline(real_run, tmp_path):
    suite, csv = real_run
    base = doctor(csv, tmp_path / "baselines" / "tiny.csv", 5.0)
    js = tmp_path / "v.json"
    r = _cli("gate", str(suite), "--baseline", str(base), "--out", str(tmp_path / "results"),
             "--json", str(js), "--save-baseline")
    assert r.exit_code == 0, r.output
    data = json.loads(js.read_text())
    assert data["counts"]["improvement"] == 2 and data["confirm_run"] is None, r.output
    new = results.read_rows(base)
    assert set(new["run_id"]) != set(results.read_rows(csv)["run_id"])  # replaced by this run
    assert results.RunFiles(base).samples.exists()


def test_gate_creates_a_missing_baseline_only_when_asked(real_run, tmp_path):
    suite, _ = real_run
    base = tmp_path / "baselines" / "tiny.csv"
    r = _cli("gate", str(suite), "--baseline", str(base), "--out", str(tmp_path / "results"))
    assert r.exit_code == 2 and "no such file (create it with --save-baseline)" in r.output
    assert not (tmp_path / "results").exists()  # refused before running anything
    r = _cli("gate", str(suite), "--baseline", str(base), "--out", str(tmp_path / "results"), "--save-baseline")
    assert r.exit_code == 0, r.output
    assert len(results.read_rows(base)) == 2 and results.RunFiles(base).samples.exists()


def test_gate_fails_when_a_candidate_case_fails(real_run, tmp_path, monkeypatch):
    suite, csv = real_run
    monkeypatch.setenv("XLABENCH_INJECT_FAULT", json.dumps({"match": {"impl": "xla_sdpa"}, "fault": "raise"}))
    js = tmp_path / "v.json"
    r = _cli("gate", str(suite), "--baseline", str(csv), "--out", str(tmp_path / "results"), "--json", str(js),
             "--no-confirm")
    assert r.exit_code == 1, r.output
    failed = [c for c in json.loads(js.read_text())["cases"] if c["verdict"] == "failed"]
    assert len(failed) == 1 and failed[0]["label"].startswith("jax/xla_sdpa")
    assert "injected fault" in failed[0]["reason"]


def test_gate_refuses_a_baseline_of_another_suite(real_run, tmp_path):
    suite, csv = real_run
    other = tmp_path / "other.yaml"
    other.write_text(SUITE.replace("name: tiny", "name: other"))
    r = _cli("gate", str(other), "--baseline", str(csv), "--out", str(tmp_path / "results"))
    assert r.exit_code == 2 and "holds suite(s) tiny, not 'other'" in r.output


def test_repeats_pool_independent_runs_into_one_row(tmp_path, monkeypatch):
    """--repeats 3: three separate worker runs per case (fresh compile each), pooled: 3 x 20 samples, a
    `repeats` column, each run's median in the notes; a fault in a repeat fails the row, saying which."""
    suite = tmp_path / "tiny.yaml"
    suite.write_text(SUITE)
    monkeypatch.setenv("XLABENCH_INJECT_FAULT", json.dumps({"match": {"impl": "xla_sdpa"}, "fault": "raise"}))
    r = _cli("run", str(suite), "--out", str(tmp_path / "results"), "--repeats", "3")
    assert r.exit_code == 1, r.output  # the failed case
    csv = Path(re.search(r"results: (\S+\.csv)", r.output).group(1))
    rows = results.read_rows(csv).set_index("impl")
    ok, bad = rows.loc["naive"], rows.loc["xla_sdpa"]
    assert ok["status"] == "ok" and int(ok["repeats"]) == 3 and int(ok["n"]) == 60
    medians = re.search(r"3 repeats pooled \(medians ([^)]*)\)", ok["notes"]).group(1).split(", ")
    assert len(medians) == 3 and all(m.endswith(" ms") for m in medians)
    samples = results.read_samples(csv)
    mine = samples[samples["case_id"] == ok["case_id"]]
    assert len(mine) == 60 and float(ok["median_s"]) == pytest.approx(mine["seconds"].median(), rel=1e-12)
    assert bad["status"] == "failed" and bad["error"].startswith("repeat 1 of 3: RuntimeError: injected fault")
    assert pd.isna(bad["repeats"])


def test_run_warns_and_gate_raises_iterations_to_what_holm_needs(tmp_path):
    """A suite timing 2 iterations per case: `run` warns (2 cases need >= 5 samples per side), `gate`
    raises measure.iters to 5 for its runs and says so; the baseline it saves has 5 samples per case."""
    suite = tmp_path / "few.yaml"
    suite.write_text(SUITE.replace("iters: 20", "iters: 2"))
    r = _cli("run", str(suite), "--out", str(tmp_path / "results"))
    assert r.exit_code == 0, r.output
    assert "2 sample(s) per case; `compare`/`gate` need >= 5 per side" in r.output  # run's closing note
    base = tmp_path / "baselines" / "few.csv"
    js = tmp_path / "v.json"
    r = _cli("gate", str(suite), "--baseline", str(base), "--out", str(tmp_path / "results"), "--save-baseline")
    assert r.exit_code == 0, r.output
    assert "gate raised measure.iters from 2 to 5 (profile base): 2 compared case(s) need >= 5 samples" in r.output
    assert "sample(s) per case (measure.iters" not in r.output  # the raised run has enough: no warning
    assert set(results.read_rows(base)["n"].astype(int)) == {5}
    r = _cli("gate", str(suite), "--baseline", str(base), "--out", str(tmp_path / "results"), "--json", str(js),
             "--threshold", "50%")
    assert r.exit_code in (0, 3), r.output  # two real runs of 50 µs cases: anything but a regression at 50%
    data = json.loads(js.read_text())
    assert data["suite"] is None or data["suite"]["n_cases"] == 2
    assert any("raised measure.iters from 2 to 5" in w for w in data["warnings"])
    assert {c["n_cand"] for c in data["cases"]} == {5}


def test_gate_judges_only_the_cases_it_ran(real_run, tmp_path):
    """--impl naive against a baseline of both impls: xla_sdpa was not asked for, so it is not missing."""
    suite, csv = real_run
    base = doctor(csv, tmp_path / "baselines" / "tiny.csv", 5.0)
    js = tmp_path / "v.json"
    r = _cli("gate", str(suite), "--baseline", str(base), "--out", str(tmp_path / "results"), "--impl", "naive",
             "--json", str(js))
    assert r.exit_code == 0, r.output
    data = json.loads(js.read_text())
    assert data["counts"]["missing"] == 0 and data["counts"]["improvement"] == 1, r.output
    rows = results.read_rows(Path(data["candidate"]))
    assert (pd.to_numeric(rows["host_calib_s"]) > 0).all()  # the calibration kernel timed beside each case
