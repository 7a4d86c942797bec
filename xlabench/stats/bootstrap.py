"""The bootstrap: resampled statistics of one sample (Resampled), the percentile interval of a ratio of two
samples' statistics (the gate's case), the one two-level bootstrap (two_level: units drawn with
replacement, then each unit's own samples; the gate's suite-wide geometric mean and the history floor's
change), and the interval of a geometric mean of paired ratios (the gate's compile times).

Resampled: the statistic of many resamples of one sample from the draws' indices: for the median, the same
numbers as ``np.median(x[idx], axis=-1)``, bit for bit, at a fraction of its cost. A resample's median is an
order statistic (or the mean of the two middle ones). The sample is sorted once; each draw's index is mapped
to its value's rank, a small integer, and a sort of those ranks per resample (far cheaper than np.median's
partition of the float values: 0.9 against 14 ns a value, numpy 2.4, AVX-512) gives the middle ranks. A
non-decreasing map keeps order statistics, ties included, so the middle values are the ones np.median finds.
For an even count they are averaged as np.median does (np.mean over the two: their sum divided by 2). A
sample with a NaN or a -0.0, and the other statistics, take ``f(x[idx], axis=-1)`` as before.

numpy's sort of 16-bit integers is fast up to 512 values a row (0.5 ns a value) and 5 to 10 times slower
beyond. Up to 1024 values (SPLIT_MAX) a resample is cut in two halves of at most 512, each sorted; the
halves' bitonic split (elementwise min and max of one half against the other reversed: Batcher's half
cleaner) holds the lower and the upper half of the resample, so the middle ranks are the largest of the
one and the smallest of the other. Beyond, the middle values come from each resample's counts of the
sample's distinct values (np.bincount): the first value whose cumulative count passes the middle.
"""

from __future__ import annotations

import math
import warnings
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any, Callable, Optional, Sequence

import numpy as np
from scipy import stats

from xlabench.stats.summary import STATISTICS, median, percentile, quantile

CHUNK = 1 << 16  # indices drawn at a time (512 KiB of int64): a cache's worth
BATCH_VALUES = 4_000_000  # resampled values of both samples drawn per batch of a ratio's replicates
WORKERS = 2  # threads of ratio_intervals (the 2-core host's)
SORT_MAX = 512  # numpy's fast sort of int16 rows (AVX-512: a sorting network) holds this many values a row
SPLIT_MAX = 2 * SORT_MAX  # up to this many values a resample: two halves sorted; beyond: counts


def middle_ranks_dtype(n: int) -> Any:
    """The smallest integer type that holds a rank below n (a smaller type sorts faster)."""
    return np.int16 if n <= np.iinfo(np.int16).max else np.int32 if n <= np.iinfo(np.int32).max else np.int64


def sorted_medians(x_sorted: np.ndarray, rank: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """np.median(x[idx], axis=-1) where ``x_sorted`` is x sorted and ``rank[i]`` is the position of x[i] in it
    (x without NaN)."""
    n = idx.shape[-1]
    r = np.take(rank, idx)
    r.sort(axis=-1)
    h = n // 2
    if n % 2:
        return x_sorted[r[..., h]]
    return (x_sorted[r[..., h - 1]] + x_sorted[r[..., h]]) / 2


def split_middle_ranks(rank: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The middle ranks (the (n-1)//2-th and n//2-th smallest) of each row of ``rank[idx]``, idx of shape
    (rows, n), n <= SPLIT_MAX, by the bitonic split of its two sorted halves."""
    n = idx.shape[-1]
    m = n // 2
    r = np.take(rank, idx)
    a, b = r[:, :n - m], r[:, n - m:]  # a: the larger half when n is odd
    a.sort(axis=-1)
    b.sort(axis=-1)
    b = b[:, ::-1]
    if n % 2 == 0:  # a[i] against b[m-1-i]: the m smallest, and the m largest
        return np.minimum(a, b).max(axis=-1), np.maximum(a, b).min(axis=-1)
    # b padded with a value above all: a[0] stays in the lower m+1, whose largest is the middle one
    mid = np.maximum(a[:, 0], np.minimum(a[:, 1:], b).max(axis=-1))
    return mid, mid


def counted_middle(dense: np.ndarray, k: int, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The positions among the sorted distinct values (k of them) of the middle values of each row of
    ``dense[idx]`` (dense[i]: the position of x[i]'s value), idx of shape (rows, n): the first value whose
    cumulative count passes (n-1)//2, and n//2."""
    rows, n = idx.shape
    d = np.take(dense, idx)
    d += np.arange(0, rows * k, k)[:, None]
    counts = np.bincount(d.ravel(), minlength=rows * k).reshape(rows, k)
    np.cumsum(counts, axis=-1, out=counts)
    h = n // 2
    upper = (counts <= h).sum(axis=-1)
    return ((counts <= h - 1).sum(axis=-1) if n % 2 == 0 else upper), upper


class Resampled:
    """One sample, ready to give ``f(x[idx], axis=-1)`` for index draws ``idx`` of shape (..., draws)."""

    def __init__(self, x: np.ndarray, f: Callable[..., Any]):
        self.x = np.asarray(x, dtype=float)
        self.f = f
        # NaN and -0.0 aside: np.median's NaN rule, and a -0.0 equals a 0.0 its partition may pick instead
        self.fast = (f is np.median and self.x.ndim == 1 and not np.isnan(self.x).any()
                     and not np.signbit(self.x[self.x == 0]).any())
        n = len(self.x)
        if self.fast and n > SPLIT_MAX:
            self.x_sorted, dense = np.unique(self.x, return_inverse=True)  # distinct values, and each one's
            self.rank = dense.astype(np.intp).reshape(n)
        elif self.fast:
            order = np.argsort(self.x, kind="stable")
            self.x_sorted = self.x[order]
            self.rank = np.empty(n, dtype=middle_ranks_dtype(n))
            self.rank[order] = np.arange(n)

    def stat(self, idx: np.ndarray) -> np.ndarray:
        n = idx.shape[-1]
        if not self.fast:
            return self.f(self.x[idx], axis=-1)
        if n <= SORT_MAX:
            return sorted_medians(self.x_sorted, self.rank, idx)
        flat = idx.reshape(-1, n)
        if n <= SPLIT_MAX:
            lo, hi = split_middle_ranks(self.rank, flat)
        else:
            lo, hi = counted_middle(self.rank, len(self.x_sorted), flat)
        med = self.x_sorted[hi] if n % 2 else (self.x_sorted[lo] + self.x_sorted[hi]) / 2
        return med.reshape(idx.shape[:-1])

    def draw(self, rng: np.random.Generator, k: int) -> np.ndarray:
        """The statistic of k resamples, their indices drawn as ``rng.integers(0, n, (k, n))`` draws them.

        Drawn a few rows at a time, so that the indices stay in the cache: successive calls take the same
        numbers from the generator as one (tests/test_stats_bootstrap.py), so the rows are those of one call.
        """
        n = len(self.x)
        rows = max(1, CHUNK // n)
        if rows >= k:
            return self.stat(rng.integers(0, n, (k, n)))
        out = np.empty(k)
        for lo in range(0, k, rows):
            hi = min(k, lo + rows)
            out[lo:hi] = self.stat(rng.integers(0, n, (hi - lo, n)))
        return out


def ratio_replicates(base: np.ndarray, cand: np.ndarray, f: Callable[..., Any], n_resamples: int,
                     rng: np.random.Generator) -> np.ndarray:
    """f(cand*) / f(base*) of n_resamples resamples of each sample, drawn as scipy.stats.bootstrap draws
    two samples (per batch, the baseline's indices, then the candidate's)."""
    rb, rc = Resampled(base, f), Resampled(cand, f)  # f(x[idx], axis=-1), the median without its partition
    batch = max(1, int(BATCH_VALUES // (len(rb.x) + len(rc.x))))  # bound memory for long runs
    out = np.empty(n_resamples)
    for lo in range(0, n_resamples, batch):
        k = min(batch, n_resamples - lo)
        sb = rb.draw(rng, k)  # the baseline's resamples of a batch first
        out[lo:lo + k] = rc.draw(rng, k) / sb
    return out


def ratio_interval(base: np.ndarray, cand: np.ndarray, statistic: str, confidence: float,
                   n_resamples: int, rng: np.random.Generator) -> tuple[float, float]:
    """Percentile bootstrap CI of stat(cand) / stat(base) (a key of STATISTICS), resampling each side
    independently.

    Percentile, not BCa: BCa's acceleration comes from a jackknife, which is inconsistent for the
    median (a non-smooth statistic) and degenerates on tied timer values.

    The resamples are drawn here as scipy.stats.bootstrap draws them, their statistic taken by index
    (Resampled), and scipy takes the interval of that distribution: the numbers of
    ``scipy.stats.bootstrap((base, cand), ratio, ...)`` (tests/test_stats_bootstrap.py holds them equal).
    """
    f = STATISTICS[statistic]
    return _percentile_interval(base, cand, f, confidence, rng, ratio_replicates(base, cand, f, n_resamples, rng))


def ratio_intervals(jobs: Sequence[tuple[np.ndarray, np.ndarray, np.random.Generator]], statistic: str,
                    confidence: float, n_resamples: int, workers: int = WORKERS) -> list[tuple[float, float]]:
    """ratio_interval of each (base, cand, rng), the replicates drawn on ``workers`` threads: each job draws from
    its own generator, so the numbers are those of one after another; numpy lets go of the GIL in the draws,
    the sorts and the counts (the report's 6 intervals of up to 6000 + 1000 samples: 1.2 -> 0.7 s, 2 cores).
    """
    f = STATISTICS[statistic]
    if len(jobs) < 2 or workers < 2:
        return [ratio_interval(b, c, statistic, confidence, n_resamples, rng) for b, c, rng in jobs]
    with ThreadPoolExecutor(workers) as pool:
        dists = list(pool.map(lambda job: ratio_replicates(job[0], job[1], f, n_resamples, job[2]), jobs))
    return [_percentile_interval(b, c, f, confidence, rng, d) for (b, c, rng), d in zip(jobs, dists)]


def _percentile_interval(base: np.ndarray, cand: np.ndarray, f: Callable[..., Any], confidence: float,
                         rng: np.random.Generator, dist: np.ndarray) -> tuple[float, float]:
    """scipy's percentile interval of the replicates ``dist`` of f(cand) / f(base)."""
    def ratio(b: np.ndarray, c: np.ndarray, axis: int = -1) -> np.ndarray:
        return f(c, axis=axis) / f(b, axis=axis)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = stats.bootstrap((base, cand), ratio, vectorized=True, paired=False, method="percentile",
                              confidence_level=confidence, n_resamples=0, rng=rng,
                              bootstrap_result=SimpleNamespace(bootstrap_distribution=dist))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def two_level(reps: np.ndarray, sides: Sequence[np.ndarray], rng: np.random.Generator,
              fresh: bool) -> list[np.ndarray]:
    """The outer level of the two-level bootstrap, over units whose own samples the inner level resampled:
    ``reps[u, r]`` is unit u's r-th inner replicate. Each of the R outer replicates draws each side's units
    (``sides``: unit indices) with replacement and takes the mean of their inner replicates: a replicate
    drawn afresh for each unit drawn (``fresh``; drawn after every side's units), else the outer
    replicate's own r-th. The R means of each side."""
    n_rep = reps.shape[1]
    picks = [np.asarray(side)[rng.integers(0, len(side), (n_rep, len(side)))] for side in sides]
    if fresh:  # a unit drawn twice gets two independent resamples of its samples
        inner = [rng.integers(0, n_rep, (n_rep, len(side))) for side in sides]
    else:
        inner = [np.arange(n_rep)[:, None]] * len(sides)
    return [reps[p, i].mean(axis=1) for p, i in zip(picks, inner)]


def log_ratios(pairs: Sequence[tuple[np.ndarray, np.ndarray]], statistic: str) -> np.ndarray:
    """Per pair log(stat(candidate) / stat(baseline))."""
    f = STATISTICS[statistic]
    return np.array([math.log(float(f(np.asarray(c, dtype=float))) / float(f(np.asarray(b, dtype=float))))
                     for b, c in pairs])


def geomean_interval(pairs: Sequence[tuple[np.ndarray, np.ndarray]], statistic: str, confidence: float,
                     n_resamples: int, rng: np.random.Generator) -> tuple[float, float, float]:
    """(geometric mean over pairs of stat(c) / stat(b), percentile interval low, high).

    Two-level: each replicate draws the pairs with replacement and, for every pair drawn, its baseline and
    candidate samples with replacement (a fresh resample for each draw of a pair), so the interval holds
    both the spread between pairs and each pair's own sampling noise.
    """
    f = STATISTICS[statistic]
    reps = np.array([np.log(ratio_replicates(b, c, f, n_resamples, rng)) for b, c in pairs])
    (means,) = two_level(reps, [np.arange(len(pairs))], rng, fresh=True)
    tail = (1 - confidence) / 2 * 100
    lo, hi = percentile(means, [tail, 100 - tail])
    return float(math.exp(log_ratios(pairs, statistic).mean())), float(math.exp(lo)), float(math.exp(hi))


def paired_geomean_interval(base: np.ndarray, cand: np.ndarray, confidence: float, n_resamples: int,
                            rng: np.random.Generator) -> Optional[tuple[float, float, float]]:
    """Geometric mean over pairs of cand / base, with a percentile bootstrap interval over the pairs (scipy's);
    pairs with a non-finite or non-positive value left out; None with fewer than 2 pairs left."""
    b, c = np.asarray(base, dtype=float), np.asarray(cand, dtype=float)
    ok = np.isfinite(b) & np.isfinite(c) & (b > 0) & (c > 0)
    d = np.log(c[ok] / b[ok])
    if len(d) < 2:
        return None
    if np.all(d == d[0]):
        g = float(math.exp(d[0]))
        return g, g, g
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = stats.bootstrap((d,), np.mean, vectorized=True, method="percentile", confidence_level=confidence,
                              n_resamples=n_resamples, rng=rng)
    return (float(math.exp(d.mean())), float(math.exp(res.confidence_interval.low)),
            float(math.exp(res.confidence_interval.high)))


def run_log_medians(samples: Sequence[np.ndarray], rng: np.random.Generator, reps: int) -> np.ndarray:
    """(reps, runs) log medians of each run's samples resampled with replacement (runs with as many samples
    drawn together)."""
    out = np.empty((reps, len(samples)))
    by_len: dict[int, list[int]] = {}
    for j, s in enumerate(samples):
        by_len.setdefault(len(s), []).append(j)
    for n, cols in by_len.items():
        a = np.array([np.asarray(samples[j], dtype=float) for j in cols])
        pick = rng.integers(0, n, (reps, len(cols), n))
        out[:, cols] = np.log(np.median(np.take_along_axis(a[None], pick, axis=2), axis=2))
    return out


def runs_ratio_interval(case_samples: Sequence[Sequence[Optional[np.ndarray]]], refs: np.ndarray, start: int,
                        k: int, end: int, weights: np.ndarray, reps: int, confidence: float,
                        seed: int) -> tuple[float, float, float]:
    """The weighted geometric mean over cases of runs k..end-1 over that of runs start..k-1, with a two-level
    bootstrap interval (each run's samples resampled, then the runs of each side; a run drawn twice keeps
    its resample); ``case_samples[c][r]``: case c's samples in run r (None: not in that run), ``refs[c]``
    its reference log level. nan where a side has no run."""
    rng = np.random.default_rng(seed)
    runs = np.arange(start, end)
    total = np.zeros((reps, len(runs)))
    count = np.zeros(len(runs))
    point = np.zeros(len(runs))
    for c, per_run in enumerate(case_samples):
        have = [j for j, r in enumerate(runs) if per_run[r] is not None and len(per_run[r])]
        if not have:
            continue
        logs = run_log_medians([per_run[runs[j]] for j in have], rng, reps) - refs[c]
        total[:, have] += weights[c] * logs
        count[have] += weights[c]
        point[have] += [weights[c] * (np.log(median(per_run[runs[j]])) - refs[c]) for j in have]
    ok = count > 0
    left, right = np.flatnonzero(ok & (runs < k)), np.flatnonzero(ok & (runs >= k))
    if len(left) == 0 or len(right) == 0:
        return float("nan"), float("nan"), float("nan")
    mean_run = total / np.where(count > 0, count, 1)
    est = float(np.exp(np.mean(point[right] / count[right]) - np.mean(point[left] / count[left])))
    before, after = two_level(mean_run.T, [left, right], rng, fresh=False)
    q = (1 - confidence) / 2
    lo, hi = quantile(after - before, [q, 1 - q])
    return est, float(np.exp(lo)), float(np.exp(hi))
