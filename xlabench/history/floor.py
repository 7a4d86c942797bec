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
two-level bootstrap interval (runs resampled on each side, then each run's raw samples:
stats.bootstrap.runs_ratio_interval). The gate fails when the last change whose interval excludes 1 is
slower at its lower bound by more than the threshold.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from xlabench.history import ALPHA
from xlabench.history.changes import MIN_SIZE, WINDOW, Size, Split, ramp_start, window_of
from xlabench.stats.bootstrap import runs_ratio_interval
from xlabench.stats.changepoint import cusum_location
from xlabench.stats.multiple import bonferroni
from xlabench.stats.rank import mannwhitney_p, rank_z

BOOTSTRAP = 400
EXACT_SIDE = 10   # a split with a side this small gets the exact Mann-Whitney p-value
CONFIDENCE = 0.95


def split_p(y: np.ndarray, k: int) -> float:
    """Two-sided Mann-Whitney p of y[:k] against y[k:] (scipy's): exact when a side has <= EXACT_SIDE runs."""
    left, right = y[:k], y[k:]
    return mannwhitney_p(left, right, "exact" if min(len(left), len(right)) <= EXACT_SIDE else "asymptotic")


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
        p = bonferroni(split_p(y[a:b], best), tried)
        if p > alpha:
            continue
        cut = ramp_start(y[a:b], cusum_location(y[a:b], sub, min_size), min_size, allowed=sub)
        found.append(Split(a + cut, p))
        todo += [(a, a + cut), (a + cut, b)]
    return sorted(found, key=lambda s: s.index)


def size(case_samples: Sequence[Sequence[Optional[np.ndarray]]], refs: np.ndarray, start: int, k: int, end: int,
         weights: np.ndarray, reps: int = BOOTSTRAP, confidence: float = CONFIDENCE, seed: int = 0) -> Size:
    """The geometric mean of runs k..end-1 over that of start..k-1 with a two-level bootstrap interval;
    ``case_samples[c][r]``: case c's samples in run r (None: not in that run)."""
    return Size(*runs_ratio_interval(case_samples, refs, start, k, end, weights, reps, confidence, seed))


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
