"""The gate's floor: the criterion `gate --history` judged a suite by before the run-to-run detector
(xlabench.history.changes, 5df597a), kept so that the gate fails every history it failed before.

Issue 35's promise: nothing in the new detector makes the gate pass what it failed before. The new detector
is stricter at small sizes on short histories (its noise from the runs' differences, a heavier-tailed scan
p, windows as well as steps), so on a few histories it passes what the old criterion failed (of 51 seeded
steps and creeps of 30 runs, 3). A promise for every history is kept only by construction: the gate fails
when either criterion fails (judge.judge). The floor judges the suite's geometric mean only, as the old gate
did; `history changes` does not use it, so its false alarms are the new detector's.

The old criterion, unchanged: binary segmentation of the geometric-mean series; at each segment the split of
largest Mann-Whitney |z| (rank sums), its two-sided p from scipy's test (exact with a side of at most
EXACT_SIDE runs) times the splits of the whole series (Bonferroni); placed at the CUSUM's turning point moved
back to where a ramp starts. The size of a change: the ratio of the geometric means either side with a
two-level bootstrap interval (runs resampled on each side, then each run's raw samples). The gate fails
when the last change whose interval excludes 1 is slower at its lower bound by more than the threshold.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
from scipy import stats

from xlabench.history import ALPHA
from xlabench.history.changes import MIN_SIZE, WINDOW, Size, Split, ramp_start, window_of

BOOTSTRAP = 400
EXACT_SIDE = 10   # a split with a side this small gets the exact Mann-Whitney p-value
CONFIDENCE = 0.95


def rank_z(y: np.ndarray, min_size: int = MIN_SIZE) -> tuple[np.ndarray, np.ndarray]:
    """(split indices k, Mann-Whitney z of y[:k] against y[k:]) for every k, from the rank sums (ties and
    continuity corrected): the scan statistic that picks a segment's split; its p is scipy's (split_p)."""
    n = len(y)
    k = np.arange(min_size, n - min_size + 1)
    if len(k) == 0:
        return k, np.zeros(0)
    ranks = stats.rankdata(y)
    _, ties = np.unique(y, return_counts=True)
    n1, n2 = k.astype(float), (n - k).astype(float)
    u = np.cumsum(ranks)[k - 1] - n1 * (n1 + 1) / 2
    var = n1 * n2 / 12 * ((n + 1) - np.sum(ties ** 3 - ties) / (n * (n - 1)))
    dev = n1 * n2 / 2 - u
    return k, np.sign(dev) * np.maximum(np.abs(dev) - 0.5, 0) / np.sqrt(np.maximum(var, 1e-12))


def split_p(y: np.ndarray, k: int) -> float:
    """Two-sided Mann-Whitney p of y[:k] against y[k:] (scipy): exact when a side has <= EXACT_SIDE runs."""
    left, right = y[:k], y[k:]
    method = "exact" if min(len(left), len(right)) <= EXACT_SIDE else "asymptotic"
    return float(stats.mannwhitneyu(left, right, method=method).pvalue)


def cusum_location(y: np.ndarray, allowed: Optional[np.ndarray] = None, min_size: int = MIN_SIZE) -> int:
    """The argmax of the CUSUM |sum(y[:k] - mean(y))| over the allowed splits."""
    k = np.arange(min_size, len(y) - min_size + 1)
    if allowed is not None:
        k = k[allowed[k]]
    s = np.cumsum(y - y.mean())
    return int(k[np.argmax(np.abs(s[k - 1]))])


def segment(y: np.ndarray, alpha: float = ALPHA, allowed: Optional[np.ndarray] = None,
            min_size: int = MIN_SIZE) -> list[Split]:
    """Binary segmentation by the rank test, every part at the Bonferroni factor of the whole series."""
    found: list[Split] = []
    todo = [(0, len(y))]
    k_all = np.arange(min_size, len(y) - min_size + 1)
    tried = max(1, int(np.sum(allowed[k_all])) if allowed is not None and len(k_all) else len(k_all))
    while todo:
        a, b = todo.pop()
        sub = None if allowed is None else allowed[a:b]
        k, z = rank_z(y[a:b], min_size)
        if sub is not None and len(k):
            z, k = z[sub[k]], k[sub[k]]
        if len(k) == 0:
            continue
        best = int(k[int(np.argmax(np.abs(z)))])
        p = min(1.0, split_p(y[a:b], best) * tried)
        if p > alpha:
            continue
        cut = ramp_start(y[a:b], cusum_location(y[a:b], sub, min_size), min_size, allowed=sub)
        found.append(Split(a + cut, p))
        todo += [(a, a + cut), (a + cut, b)]
    return sorted(found, key=lambda s: s.index)


def run_logs(samples: Sequence[np.ndarray], rng: np.random.Generator, reps: int) -> np.ndarray:
    """(reps, runs) log medians of each run's samples resampled with replacement."""
    out = np.empty((reps, len(samples)))
    by_len: dict[int, list[int]] = {}
    for j, s in enumerate(samples):
        by_len.setdefault(len(s), []).append(j)
    for n, cols in by_len.items():  # runs with as many samples resampled together
        a = np.array([np.asarray(samples[j], dtype=float) for j in cols])
        pick = rng.integers(0, n, (reps, len(cols), n))
        out[:, cols] = np.log(np.median(np.take_along_axis(a[None], pick, axis=2), axis=2))
    return out


def size(case_samples: Sequence[Sequence[Optional[np.ndarray]]], refs: np.ndarray, start: int, k: int, end: int,
         weights: np.ndarray, reps: int = BOOTSTRAP, confidence: float = CONFIDENCE, seed: int = 0) -> Size:
    """The geometric mean of runs k..end-1 over that of start..k-1 with a two-level bootstrap interval;
    ``case_samples[c][r]``: case c's samples in run r (None: not in that run)."""
    rng = np.random.default_rng(seed)
    runs = np.arange(start, end)
    total = np.zeros((reps, len(runs)))
    count = np.zeros(len(runs))
    point = np.zeros(len(runs))
    for c, per_run in enumerate(case_samples):
        have = [j for j, r in enumerate(runs) if per_run[r] is not None and len(per_run[r])]
        if not have:
            continue
        logs = run_logs([per_run[runs[j]] for j in have], rng, reps) - refs[c]
        total[:, have] += weights[c] * logs
        count[have] += weights[c]
        point[have] += [weights[c] * (np.log(np.median(per_run[runs[j]])) - refs[c]) for j in have]
    ok = count > 0
    left, right = np.flatnonzero(ok & (runs < k)), np.flatnonzero(ok & (runs >= k))
    if len(left) == 0 or len(right) == 0:
        return Size(float("nan"), float("nan"), float("nan"))
    mean_run = total / np.where(count > 0, count, 1)
    est = float(np.exp(np.mean(point[right] / count[right]) - np.mean(point[left] / count[left])))
    pick_l = left[rng.integers(0, len(left), (reps, len(left)))]
    pick_r = right[rng.integers(0, len(right), (reps, len(right)))]
    rows = np.arange(reps)[:, None]
    diff = mean_run[rows, pick_r].mean(axis=1) - mean_run[rows, pick_l].mean(axis=1)
    q = (1 - confidence) / 2
    lo, hi = np.quantile(diff, [q, 1 - q])
    return Size(est, float(np.exp(lo)), float(np.exp(hi)))


def last_change(group, alpha: float = ALPHA) -> Optional[tuple[int, float, Size]]:
    """The suite's last change by the old criterion whose interval excludes 1: (index in the geometric
    mean's runs, p, size), None without one. ``group``: a series.Group."""
    idx, y = group.geomean_series()
    splits = segment(y, alpha, group.new_commit(idx))
    if not splits:
        return None
    ids = sorted(group.samples)
    per_case = [[group.samples[c][j] for j in idx] for c in ids]
    refs, weights = group.refs(ids), group.weights(ids)
    bounds = [s.index for s in splits]
    for i in reversed(range(len(splits))):
        start, k, end = window_of(bounds, i, len(idx), WINDOW)
        s = size(per_case, refs, start, k, end, weights)
        if s.low > 1 or s.high < 1:
            return int(idx[k]), splits[i].p, s
    return None
