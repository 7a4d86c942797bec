"""Change points on synthetic series with known truth (seeded, deterministic): steps, a regression and its
fix, ramps located at their commit; noise-only series with a bounded false-alarm rate, normal and
heavy-tailed, for both families of the detector (mean: the clipped runs and Student's t; rank: normal
scores and Mann-Whitney); the size's interval; the events of many cases at one commit; and the creeping
slowdown of the issue end to end on real run files: each step passes the pairwise gate, the history names
commit 20."""

from __future__ import annotations

import numpy as np
import pytest

import _history_data as hd
from xlabench import gate as gate_lib
from xlabench.history import changes as cp, ingest, series, store as st
from xlabench.stats import changepoint, rank, robust, summary, ttest


def _located(y: np.ndarray, at: int, **kw) -> bool:
    return any(abs(s.index - at) <= 1 for s in cp.segment(y, **kw))


def _step(rng: np.random.Generator, n: int, at: int, size: float, sigma: float = 0.01) -> np.ndarray:
    return np.log([1.0] * at + [1.0 + size] * (n - at)) + rng.normal(0, sigma, n)


def test_a_step_is_found_at_its_run():
    rng = np.random.default_rng(1)
    found = cp.segment(_step(rng, 30, 20, 0.05))
    assert [s.index for s in found] == [20] and found[0].p < 1e-3


def test_two_steps_both_found():
    rng = np.random.default_rng(2)
    y = np.log([1.0] * 15 + [1.08] * 15 + [0.97] * 15) + rng.normal(0, 0.01, 45)
    assert [s.index for s in cp.segment(y)] == [15, 30]


def test_the_rank_family_finds_several_steps():
    """Four 10-20% steps in 60 runs of 1% noise (auto takes ranks here: four jumps): each part of the
    binary segmentation is scanned on its own normal scores. On the whole series' scores a level between two
    changes spreads as wide as the series, and 0 of 50 series had all four found (4 of 50 by auto)."""
    levels = np.log([1.0] * 11 + [1.1] * 9 + [1.0] * 15 + [1.1] * 16 + [1.2] * 9)
    for family in ("rank", "auto"):
        hits = 0
        for seed in range(50):
            found = cp.segment(levels + np.random.default_rng(seed).normal(0, 0.01, 60), family=family)
            hits += all(any(abs(s.index - at) <= 1 for s in found) for at in (11, 20, 35, 51))
        assert hits >= 40, family


@pytest.mark.slow  # a Monte-Carlo simulation (200 random series)
def test_a_small_step_after_a_large_one_is_found():
    """A 15% step at run 44 of 60, then 3.5% more at run 52 (1% noise): the part after the first change is
    judged by the whole series' noise estimate and its degrees of freedom (with the part's own 0.4 (m - 1),
    177 of 200 were found)."""
    levels = np.log([1.0] * 44 + [1.15] * 8 + [1.19] * 8)
    hits = sum(_located(levels + np.random.default_rng(seed).normal(0, 0.01, 60), 52, family="mean")
               for seed in range(200))
    assert hits >= 188


def test_a_short_regression_and_its_fix_are_both_found():
    """A 5% regression for 4 runs, then fixed: the steps either side are each too weak against the whole
    series; the window scan sees the 4 runs against the rest."""
    hits = 0
    for seed in range(50):
        y = np.log([1.0] * 12 + [1.05] * 4 + [1.0] * 14) + np.random.default_rng(seed).normal(0, 0.01, 30)
        idx = [s.index for s in cp.segment(y)]
        hits += any(abs(i - 12) <= 1 for i in idx) and any(abs(i - 16) <= 1 for i in idx)
    assert hits >= 45


@pytest.mark.slow  # a Monte-Carlo simulation (200 random series)
def test_recall_at_one_percent_noise_for_steps_of_five_percent_and_more():
    """200 series of 30 runs, a step of 5-20% at a random run 3..27, 1% noise: found within one run of the
    step in at least 90% (the issue's goal), with at most one change in ten elsewhere."""
    rng = np.random.default_rng(8)
    hits = wrong = 0
    for _ in range(200):
        at, size = int(rng.integers(3, 28)), float(rng.uniform(0.05, 0.20))
        found = cp.segment(_step(rng, 30, at, size))
        hits += any(abs(s.index - at) <= 1 for s in found)
        wrong += sum(abs(s.index - at) > 1 for s in found)
    assert hits >= 180 and wrong <= 20


@pytest.mark.slow  # a Monte-Carlo simulation (200 random series)
def test_a_ramp_is_located_where_it_starts():
    """200 creeping series (3% at 20, then 1% per commit for 5 commits) in 1% noise: the largest |z| lies
    mid-ramp; the change is reported at 20 +- 1 in at least 95% of them."""
    f = np.log(hd.creeping())
    ys = [f + np.random.default_rng(seed).normal(0, 0.01, 30) for seed in range(200)]
    assert np.mean([_located(y, 20) for y in ys]) >= 0.95


@pytest.mark.slow  # a Monte-Carlo simulation
@pytest.mark.parametrize("family", ["mean", "rank", "auto"])
def test_noise_only_false_alarms_stay_under_alpha(family):
    """1000 noise-only series of 30 runs per family: the share with any change is at most alpha: the
    scan's p-value counts the splits and windows tried. One test's p would alarm several times as often."""
    rng = np.random.default_rng(3)
    alarms = [bool(cp.segment(rng.normal(0, 0.02, 30), family=family)) for _ in range(1000)]
    assert np.mean(alarms) <= cp.ALPHA
    one_test = [changepoint.scan_p(changepoint.scan(y, robust.noise(y), None, cp.MIN_SIZE, cp.MAX_BUMP)[0], 30)
                / changepoint.neff(30) < cp.ALPHA
                for y in rng.normal(0, 0.02, (300, 30))]
    assert np.mean(one_test) > 3 * cp.ALPHA


def test_heavy_tailed_noise_takes_the_rank_family():
    """t(2) noise: family auto finds the tails and scans ranks; noise-only series stay at alpha, where the
    mean family alone (clipped runs) alarms more often on long series."""
    rng = np.random.default_rng(4)
    ys = [rng.standard_t(2, 200) * 0.01 for _ in range(300)]
    assert np.mean([cp.heavy_tailed(y, robust.noise(y)) for y in ys]) > 0.9
    assert np.mean([bool(cp.segment(y)) for y in ys]) <= cp.ALPHA
    assert np.mean([bool(cp.segment(y, family="rank")) for y in ys]) <= cp.ALPHA


def test_the_rank_family_finds_a_step_in_heavy_tails():
    rng = np.random.default_rng(6)
    hits = sum(_located(np.log([1.0] * 20 + [1.05] * 20) + rng.standard_t(3, 40) * 0.01, 20, family="rank")
               for _ in range(50))
    assert hits >= 45


def test_one_outlier_is_not_a_change():
    rng = np.random.default_rng(7)
    alarms = 0
    for _ in range(200):
        y = rng.normal(0, 0.01, 30)
        y[int(rng.integers(0, 30))] += 0.3  # one run 35% slower
        alarms += bool(cp.segment(y, family="mean"))
    assert alarms <= 2


def test_bad_family_is_refused():
    with pytest.raises(ValueError, match="family 'x'"):
        cp.segment(np.zeros(10), family="x")


def test_the_size_interval_comes_from_the_runs():
    """Runs with 1% run-to-run noise and samples spread 20% inside each run: the interval is the runs'
    (a few percent wide), not the samples' (which would not exclude no change)."""
    rng = np.random.default_rng(5)
    y = _step(rng, 30, 20, 0.08)
    within = np.full(30, 0.2 ** 2 * np.pi / 2 / 5)
    s = cp.size(y, 0, 20, 30, within)
    assert s.low < np.exp(y[20:].mean() - y[:20].mean()) < s.high
    assert 1.05 < s.low < 1.08 < s.high < 1.11
    few = cp.size(y, 17, 20, 23, within)  # 3 runs a side: too few to measure their spread, the samples floor it
    assert few.low < 1.0 < few.high and cp.size(y, 17, 20, 23).low > 1.0


def test_within_var_of_a_median():
    rng = np.random.default_rng(9)
    v = [robust.log_median_var(rng.lognormal(0, 0.1, 5)) for _ in range(2000)]
    meds = [np.log(np.median(rng.lognormal(0, 0.1, 5))) for _ in range(2000)]
    assert 0.5 < np.median(v) / np.var(meds) < 2.0
    assert np.isnan(robust.log_median_var(None)) and np.isnan(robust.log_median_var(np.array([1.0])))


def test_the_issues_eight_percent_step_is_one_event():
    """30 runs made from one real cpu run (its 24 naive cases), each case 8% slower from run 21 on, 1%
    run-to-run noise: every case is found at commit 20 and the cases make one event naming them all."""
    g = hd.scaled([1.0] * 20 + [1.08] * 10, seed=11)
    found = series.detect(g)
    cases = [c for c in found if c.case_id != series.GEOMEAN]
    at_20 = {c.case_id for c in cases if abs(c.position - 20) <= 1}
    assert len(at_20) >= 0.9 * len(g.samples) == 0.9 * 24
    (ev,) = series.events(g, found)
    assert ev.position == 20 and ev.first_bad == "c000000020" and ev.last_good == "c000000019"
    assert ev.cases == ev.of == 24 and ev.case_ids == sorted(g.samples) and ev.slower == 24
    assert 1.06 < ev.low <= ev.ratio <= ev.high < 1.10
    assert "24 of 24 cases changed at commit c000000020" in ev.line()


def test_events_gather_cases_by_commit():
    """Cases moved at two commits and one alone: two events (one run off still counts as the commit),
    the lone case stays a case."""
    g = hd.scaled([1.0] * 30, seed=12)
    ids = sorted(g.samples)

    def change(cid: str, pos: int, ratio: float) -> series.Change:
        return series.Change("attention", "cpu", "cpu", "jax", cid, cid, f"c{pos - 1:09d}", f"c{pos:09d}",
                             f"r{pos - 1}", f"r{pos}", pos, ratio, ratio - 0.01, ratio + 0.01, 1e-5, 1e-4, 10, 10)

    changes = ([change(c, 10, 1.05) for c in ids[:5]] + [change(ids[5], 11, 1.04)]
               + [change(c, 20, 0.95) for c in ids[6:9]] + [change(ids[9], 25, 1.2)])
    evs = series.events(g, changes)
    assert [(e.position, e.cases, e.slower) for e in evs] == [(10, 6, 6), (20, 3, 0)]
    assert evs[0].case_ids == sorted(ids[:6]) and evs[0].low == 1.04 and evs[0].high == 1.05
    assert series.events(g, changes[:2]) == []


@pytest.mark.slow  # a Monte-Carlo simulation
def test_noise_only_suites_of_real_cases_rarely_alarm():
    """40 noise-only suites of the real cpu suite's 48 cases (30 runs each): at most 2 report anything."""
    alarms = [bool(series.detect(hd.group([1.0] * 30, seed=100 + s))) for s in range(40)]
    assert sum(alarms) <= 2


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


@pytest.mark.slow  # starts a process
def test_each_creeping_step_passes_the_pairwise_gate(creeping_store):
    _, paths, _ = creeping_store
    for a, b in zip(paths[19:26], paths[20:27]):
        cmp = gate_lib.compare(gate_lib.load_run(a), gate_lib.load_run(b), gate_lib.GateConfig())
        assert cmp.count(gate_lib.REGRESSION) == 0, (a.name, b.name)
        assert cmp.suite is None or cmp.suite.verdict != gate_lib.REGRESSION


@pytest.mark.slow  # its fixture reads many runs in processes (multiprocessing)
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


@pytest.mark.slow  # starts a process
def test_thirty_runs_without_a_change_report_nothing(tmp_path):
    paths = hd.write_series(tmp_path / "runs", [1.0] * 30, seed=7)
    with st.open_store(f"sqlite:///{tmp_path / 'h.sqlite'}") as s:
        ingest.add_files(s, paths)
        (group,) = series.groups(s)
    assert series.detect(group) == []
    assert series.events(group, []) == []


@pytest.mark.slow  # starts a process
def test_many_files_are_read_by_processes_that_do_not_fork_a_jax_process(tmp_path):
    """CI's log: reading 30 runs forked workers from a pytest process that had started JAX's threads
    ("os.fork() was called ... JAX is multithreaded, so this will likely lead to a deadlock"). The readers
    start from a fork server."""
    import warnings

    import jax.numpy as jnp

    jnp.ones(4).block_until_ready()  # JAX's threads are running
    paths = hd.write_series(tmp_path / "runs", [1.0] * 24, seed=3)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        runs = list(ingest._read_many(paths, ingest.GitLog(), workers=2))
    assert not [w for w in seen if "fork" in str(w.message)], [str(w.message) for w in seen]
    assert [r.run_id for r in runs] == [ingest.read_run(p).run_id for p in paths]  # in order, every one


def test_runs_are_read_by_processes_only_where_each_has_enough_of_them():
    """A reader process costs ~2 s to start and a run file ~0.08 s to read: 30 runs on 2 cores were read
    faster here (2.3 s) than by 2 readers (3.5 s); 100 runs faster by them (6.1 s against 10.5 s)."""
    assert ingest.readers(30, cpus=2) < 2 and ingest.readers(24, cpus=64) < 2
    assert ingest.readers(100, cpus=2) == 2 and ingest.readers(100, cpus=64) == 4
    assert ingest.readers(10_000, cpus=64) == 8 and ingest.readers(10_000, cpus=1) == 1


def test_a_change_whose_neighbour_went_is_placed_again():
    """A 16% step at run 5 whose ramp rule took run 4 (a noise run +1.4 sigma), then a part starting at run 4
    that put a second change at 7; the confirm drops the change at 4 and kept 7, two runs off the step.
    The changes left are placed again between their neighbours."""
    y = np.log1p(np.r_[[-0.005, 0.003, -0.005, -0.007, 0.009], np.full(18, 0.145), np.full(37, 0.2)])
    y += np.random.default_rng(43).normal(0, 0.01, 60) * np.r_[np.zeros(5), np.ones(55)]
    assert [s.index for s in cp.segment(y)] in ([4, 23], [5, 23], [6, 23])


def test_exact_timings_find_their_step_without_a_warning(recwarn):
    """Runs with no noise at all (a cached result, a quantised clock): the step is found, and scipy's
    precision warning on identical values does not reach the user's terminal."""
    assert [s.index for s in cp.segment(np.log1p(np.r_[np.zeros(15), np.full(15, 0.05)]))] == [15]
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)], [str(w.message) for w in recwarn]


def test_the_detectors_own_median_t_test_and_tails_are_numpys_and_scipys_figures():
    """The detector takes ~10^5 medians and ~10^3 t-tests and tails a history, each of which numpy's or
    scipy's per-call machinery made 5-400 times slower than its arithmetic: its own versions must give the
    very same figures (bit for bit), ties, a single run a side and nan included."""
    from scipy import stats

    rng = np.random.default_rng(21)
    for n in [*range(1, 34), 60, 61, 500]:
        for _ in range(20):
            a = rng.normal(0, 0.01, n) * rng.choice([1e-6, 1.0, 1e6])
            if rng.random() < 0.3:
                a = np.round(a, 3)  # ties
            if rng.random() < 0.1:
                a[rng.integers(n)] = np.nan
            want, got = np.median(a), summary.median(a)
            assert got == want or (np.isnan(got) and np.isnan(want)), (a, got, want)
    assert np.isnan(summary.median(np.array([])))
    for _ in range(400):
        n1, n2 = rng.integers(1, 40, 2)
        a, b = rng.normal(0, 0.01, n1), rng.normal(rng.normal(0, 0.01), 0.01, n2)
        want = float(stats.ttest_ind(a, b).pvalue) if n1 + n2 > 2 else np.nan
        got = ttest.ttest_p(a, b)
        assert got == want or (np.isnan(got) and np.isnan(want)), (n1, n2, got, want)
    for t in rng.normal(0, 4, 200):
        df = float(rng.uniform(2, 80))
        assert ttest.t_sf(t, df) == float(stats.t.sf(t, df)) and ttest.norm_sf(t) == float(stats.norm.sf(t))
    q = rng.uniform(0, 1, 50)
    assert (rank.normal_scores(q) == stats.norm.ppf(stats.rankdata(q) / 51)).all()
