"""Change points: steps and ramps located at their commit, noise-only series with a bounded false-alarm
rate, and the creeping slowdown of the issue end to end on real run files: each step passes the pairwise
gate, the history names commit 20."""

from __future__ import annotations

import numpy as np
import pytest

import _history_data as hd
from xlabench import gate as gate_lib
from xlabench.history import changes as cp, ingest, series, store as st


def _located(y: np.ndarray, at: int) -> bool:
    return any(abs(s.index - at) <= 1 for s in cp.segment(y))


def test_a_step_is_found_at_its_run():
    rng = np.random.default_rng(1)
    y = np.log([1.0] * 20 + [1.05] * 10) + rng.normal(0, 0.01, 30)
    found = cp.segment(y)
    assert [s.index for s in found] == [20] and found[0].p < 1e-3


def test_two_steps_both_found():
    rng = np.random.default_rng(2)
    y = np.log([1.0] * 15 + [1.08] * 15 + [0.97] * 15) + rng.normal(0, 0.01, 45)
    assert [s.index for s in cp.segment(y)] == [15, 30]


def test_a_ramp_is_located_where_it_starts():
    """200 creeping series (3% at 20, then 1% per commit for 5 commits) in 1% noise: the largest |t| lies
    mid-ramp with more noise; the change is reported at 20 +- 1 in at least 95% of them."""
    f = np.log(hd.creeping())
    ys = [f + np.random.default_rng(seed).normal(0, 0.01, 30) for seed in range(200)]
    assert np.mean([_located(y, 20) for y in ys]) >= 0.95


def test_noise_only_false_alarms_stay_under_alpha():
    """1000 noise-only series of 30 runs: the share with any change is at most alpha: the split's p-value is
    corrected for the splits tried. Uncorrected it would be several times alpha."""
    rng = np.random.default_rng(3)
    alarms = [bool(cp.segment(rng.normal(0, 0.02, 30))) for _ in range(1000)]
    assert np.mean(alarms) <= cp.ALPHA
    raw = np.mean([cp.rank_splits(y)[2].min() < cp.ALPHA for y in rng.normal(0, 0.02, (300, 30))])
    assert raw > 3 * cp.ALPHA


def test_heavy_tailed_noise_false_alarms_stay_bounded():
    rng = np.random.default_rng(4)
    alarms = [bool(cp.segment(rng.standard_t(2, 30) * 0.01)) for _ in range(1000)]
    assert np.mean(alarms) <= cp.ALPHA


def test_noise_only_suites_of_real_cases_rarely_alarm():
    """40 noise-only suites of the real cpu suite's 48 cases (30 runs each): at most 2 report anything."""
    alarms = [bool(series.detect(hd.group([1.0] * 30, seed=100 + s), reps=100)) for s in range(40)]
    assert sum(alarms) <= 2


def test_the_size_interval_comes_from_the_samples():
    rng = np.random.default_rng(5)
    per_run = [rng.lognormal(0, 0.05, 7) * (1.1 if r >= 10 else 1.0) for r in range(20)]
    size = cp.size([per_run], np.zeros(1), 0, 10, 20)
    assert size.low < 1.1 < size.high and size.low > 1.03 and size.high < 1.17
    assert size.low < size.ratio < size.high


@pytest.fixture(scope="module")
def creeping_store(tmp_path_factory):
    """The issue's creeping slowdown: 30 runs of the real cpu suite's 48 cases, 3% slower at commit 20
    and 1% more per commit for 5 commits."""
    d = tmp_path_factory.mktemp("creep")
    factors = hd.creeping()
    paths = hd.write_series(d / "runs", factors, seed=0)
    url = f"sqlite:///{d / 'h.sqlite'}"
    with st.open_store(url) as s:
        ingest.add_files(s, paths)
    return url, paths, factors


def test_each_creeping_step_passes_the_pairwise_gate(creeping_store):
    _, paths, _ = creeping_store
    for a, b in zip(paths[19:26], paths[20:27]):
        cmp = gate_lib.compare(gate_lib.load_run(a), gate_lib.load_run(b), gate_lib.GateConfig())
        assert cmp.count(gate_lib.REGRESSION) == 0, (a.name, b.name)
        assert cmp.suite is None or cmp.suite.verdict != gate_lib.REGRESSION


def test_history_names_commit_20_of_the_creeping_slowdown(creeping_store):
    url, _, factors = creeping_store
    with st.open_store(url) as s:
        (group,) = series.groups(s)
    changes = series.detect(group)
    suite_wide = [c for c in changes if c.case_id == series.GEOMEAN]
    first = suite_wide[0]
    assert abs(first.position - 20) <= 1
    assert first.first_bad == f"c{first.position:09d}" and first.last_good == f"c{first.position - 1:09d}"
    start, end = first.position - first.runs_before, first.position + first.runs_after
    truth = hd.truth(factors, start, first.position, end)
    assert first.low <= truth <= first.high and first.ratio > 1.02
    assert first.p_holm < 0.001
    # the cases' own changes: slowdowns, none well before the slowdown (one case's median has ~5% noise:
    # its change point is placed less sharply than the suite's)
    assert all(c.position >= 17 and c.ratio > 1 for c in changes)


def test_thirty_runs_without_a_change_report_nothing(tmp_path):
    paths = hd.write_series(tmp_path / "runs", [1.0] * 30, seed=7)
    with st.open_store(f"sqlite:///{tmp_path / 'h.sqlite'}") as s:
        ingest.add_files(s, paths)
        (group,) = series.groups(s)
    assert series.detect(group) == []
