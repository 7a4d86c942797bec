"""The bootstrap's medians by rank (xlabench.stats.bootstrap.Resampled): the numbers of np.median and of
scipy.stats.bootstrap, bit for bit, so that a faster gate prints the same intervals."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from xlabench.stats import bootstrap
from xlabench.stats.summary import STATISTICS


def _samples(rng: np.random.Generator, n: int) -> list[np.ndarray]:
    """Timings, timer-rounded values with ties, and ties with zeros."""
    return [rng.lognormal(-6, 0.3, n), np.round(rng.lognormal(0, 0.2, n), 1),
            rng.integers(0, 4, n).astype(float)]


@pytest.mark.parametrize("n", [2, 3, 8, 9, 200, 201, 512, 513, 514, 1023, 1024, 1025, 1026, 3001])
def test_the_median_by_rank_is_np_median_bit_for_bit(n):
    rng = np.random.default_rng(n)
    for x in _samples(rng, n):
        r = bootstrap.Resampled(x, np.median)
        assert r.fast
        idx = rng.integers(0, n, (300, n))
        assert r.stat(idx).tobytes() == np.median(x[idx], axis=-1).tobytes()


def test_a_nan_or_a_negative_zero_takes_np_median():
    rng = np.random.default_rng(0)
    idx = rng.integers(0, 9, (50, 9))
    for x in (np.r_[rng.normal(size=8), np.nan], np.r_[rng.normal(size=7), 0.0, -0.0]):
        r = bootstrap.Resampled(x, np.median)
        assert not r.fast
        np.testing.assert_array_equal(r.stat(idx), np.median(x[idx], axis=-1))


def test_draws_a_few_rows_at_a_time_are_those_of_one_call(monkeypatch):
    monkeypatch.setattr(bootstrap, "CHUNK", 50)  # 2 rows of 25 at a time
    x = np.random.default_rng(1).lognormal(size=25)
    got = bootstrap.Resampled(x, np.median).draw(np.random.default_rng(2), 101)
    want = np.median(x[np.random.default_rng(2).integers(0, 25, (101, 25))], axis=-1)
    assert got.tobytes() == want.tobytes()


def _scipy_interval(base, cand, statistic, confidence, n_resamples, rng):
    """The interval as it was taken before: scipy.stats.bootstrap resampling the values."""
    f = STATISTICS[statistic]
    batch = max(1, int(4_000_000 // (len(base) + len(cand))))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = stats.bootstrap((base, cand), lambda b, c, axis=-1: f(c, axis=axis) / f(b, axis=axis),
                              vectorized=True, paired=False, method="percentile", confidence_level=confidence,
                              n_resamples=n_resamples, batch=batch, rng=rng)
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


@pytest.mark.parametrize("statistic,nb,nc,n_resamples", [
    ("median", 30, 45, 999), ("median", 21, 20, 999), ("mean", 30, 31, 499),
    ("median", 2100, 1900, 2500),  # batches of 1000 resamples: the draws alternate side by batch
])
def test_the_ratio_interval_is_scipys_bit_for_bit(monkeypatch, statistic, nb, nc, n_resamples):
    monkeypatch.setattr(bootstrap, "CHUNK", 2000)
    rng = np.random.default_rng(nb)
    base, cand = np.round(rng.lognormal(0, 0.1, nb), 3), np.round(rng.lognormal(0.05, 0.1, nc), 3)
    got = bootstrap.ratio_interval(base, cand, statistic, 0.95, n_resamples, np.random.default_rng(3))
    assert got == _scipy_interval(base, cand, statistic, 0.95, n_resamples, np.random.default_rng(3))


def _np_median_geomean(pairs, confidence, n_resamples, rng):
    """geomean_interval's replicates as they were taken before: np.median of the resampled values."""
    reps = np.empty((len(pairs), n_resamples))
    for i, (b, c) in enumerate(pairs):
        rb = b[rng.integers(0, len(b), (n_resamples, len(b)))]
        rc = c[rng.integers(0, len(c), (n_resamples, len(c)))]
        reps[i] = np.log(np.median(rc, axis=-1) / np.median(rb, axis=-1))
    cases = rng.integers(0, len(pairs), (n_resamples, len(pairs)))
    draws = rng.integers(0, n_resamples, (n_resamples, len(pairs)))
    lo, hi = np.percentile(reps[cases, draws].mean(axis=1), [(1 - confidence) / 2 * 100, 100 - (1 - confidence) / 2 * 100])
    return math.exp(lo), math.exp(hi)


def test_the_suite_interval_is_that_of_np_median_bit_for_bit():
    rng = np.random.default_rng(4)
    pairs = [(rng.lognormal(0, 0.1, n), rng.lognormal(0.02, 0.1, n + 3)) for n in (20, 33, 50)]
    _, lo, hi = bootstrap.geomean_interval(pairs, "median", 0.95, 499, np.random.default_rng(5))
    assert (lo, hi) == _np_median_geomean(pairs, 0.95, 499, np.random.default_rng(5))
