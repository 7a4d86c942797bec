"""The gate's judgement from the history: a creeping slowdown is called out with its rate and span, a
step since a commit is named, noise-only histories pass; `gate --history` and `run --history` record
their run (real runs of a tiny suite)."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest

import _history_data as hd
from conftest import run_cli
from xlabench.history import judge
from xlabench.stats.ttest import hinge_fit


def _judge(factors, seed=0):
    g = hd.group(factors, seed=seed)
    return judge.judge(g, g.runs[-1]["run_id"])


def test_a_creep_in_progress_fails_with_its_rate():
    """At commit 25 of the creeping slowdown (3% at 20, then 1% per commit): both findings, each step of
    which the pairwise gate passes."""
    v = _judge(hd.creeping()[:26])
    assert v.regression
    assert any("since commit c000000020" in line for line in v.lines)
    t = v.trend
    assert t is not None and t.last == "c000000025" and 4 <= t.commits <= 8
    assert 1.005 < t.per_commit < 1.025
    assert "slower per commit for" in t.message("attention")


@pytest.mark.slow  # a Monte-Carlo simulation
def test_a_steady_creep_without_a_step_is_a_trend():
    """2% per commit for the last 6 of 20 commits, 20 histories: each fails; the rate and the span are
    right in the median (one history's geometric mean has ~1% noise: its hinge moves a few commits)."""
    f = [1.0] * 14 + [1.02 ** k for k in range(1, 7)]
    verdicts = [_judge(f, seed=400 + s) for s in range(20)]
    assert all(v.regression and v.trend is not None for v in verdicts)
    rates = [v.trend.per_commit for v in verdicts]
    spans = [v.trend.commits for v in verdicts]
    assert 1.014 < np.median(rates) < 1.026 and 4 <= np.median(spans) <= 8
    assert "% slower per commit for" in verdicts[0].trend.message("x")


@pytest.mark.slow  # a Monte-Carlo simulation
def test_noise_only_histories_pass():
    verdicts = [_judge([1.0] * 30, seed=300 + s) for s in range(40)]
    assert sum(v.regression for v in verdicts) <= 1
    assert all(v.trend is None or v.trend.p <= 0.01 for v in verdicts)


def test_too_few_runs_pass_with_a_note():
    v = _judge([1.0] * 4)
    assert not v.regression and "too few to judge" in v.lines[0]


def test_judge_refuses_a_run_that_is_not_the_newest():
    g = hd.group([1.0] * 8)
    with pytest.raises(ValueError, match="not the newest"):
        judge.judge(g, g.runs[0]["run_id"])


def test_hinge_fit_finds_where_a_trend_starts():
    y = np.log([1.0] * 12 + [1.02 ** k for k in range(1, 9)])
    j, slope, p = hinge_fit(y, judge.MIN_TREND_RUNS)
    assert j in (11, 12) and abs(slope - np.log(1.02)) < 1e-9 and p < 1e-6


@pytest.mark.slow  # starts a process
def test_gate_needs_a_baseline_or_a_history(write_suite):
    r = run_cli("gate", str(write_suite()))
    assert r.returncode == 2 and "--baseline FILE (pairwise) or --history URL" in r.stderr
    r = run_cli("gate", str(write_suite()), "--history", "sqlite:///unused.sqlite", "--save-baseline")
    assert r.returncode == 2 and "--save-baseline needs --baseline FILE" in r.stderr


@pytest.mark.slow
def test_gate_and_run_record_their_runs(write_suite, tmp_path):
    suite = write_suite()
    url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    r = run_cli("gate", str(suite), "--history", url, "--out", str(tmp_path / "results"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "too few to judge" in r.stdout
    r = run_cli("run", str(suite), "--history", url, "--out", str(tmp_path / "results"))
    assert r.returncode == 0 and "history: recorded in" in r.stdout, r.stdout + r.stderr
    con = sqlite3.connect(tmp_path / "h.sqlite")
    assert con.execute("SELECT COUNT(*), COUNT(DISTINCT suite) FROM runs").fetchone() == (2, 1)
    samples = json.loads(con.execute("SELECT samples FROM results WHERE status = 'ok' LIMIT 1").fetchone()[0])
    assert len(samples) >= 3
    bad = tmp_path / "bad.sqlite"
    bad.write_text("not a database at all " * 300)
    r = run_cli("run", str(suite), "--history", f"sqlite:///{bad}", "--out", str(tmp_path / "results"))
    assert r.returncode == 2 and "not an xlabench history store" in r.stderr


def test_what_the_old_detector_failed_still_fails():
    """Histories of 30 runs (a step at run 15 or 24, seeds 500-502) that `gate --history` failed under the
    detector before the run-to-run one (5df597a): of 51 steps and creeps tried, the old detector failed 36;
    the run-to-run detector alone passes these 3 of them, the gate with the old criterion as its floor none
    (it fails when either fails)."""
    for size, at, seed in ((0.02, 15, 502), (0.03, 15, 500), (0.05, 24, 500)):
        assert _judge([1.0] * at + [1.0 + size] * (30 - at), seed=seed).regression, (size, at, seed)


def test_the_floor_is_the_old_criterion_and_says_so():
    """The gate's floor (history/floor.py) is the old rank-test criterion: on the 2 % step at run 15 (seed
    502) it finds the step at commit 16 that the run-to-run detector does not report, and the gate's line
    says which criterion failed it."""
    from xlabench.history import floor
    g = hd.group([1.0] * 15 + [1.02] * 15, seed=502)
    at, p, size = floor.last_change(g)
    assert at == 16 and p <= 0.01 and size.low > 1
    v = judge.judge(g, g.runs[-1]["run_id"])
    assert v.regression and "since commit c000000016" in v.lines[0] and "earlier criterion" in v.lines[0]
