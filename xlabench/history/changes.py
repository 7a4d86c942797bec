"""Change points in a series of runs, on arrays: binary segmentation with a two-sample test at each split (Apache
Otava's E-divisive uses a t-test; this uses the gate's Mann-Whitney U), each change placed by CUSUM and moved back to where a ramp starts, and the change's size
with a bootstrap interval from the raw samples either side.

The series is one value per run in commit order: the log of a case's median seconds (or the suite's
geometric mean of them). A candidate split is the one that maximises |t| between the segment's two parts
(rank_splits says why ranks); its p-value is the test's, times the number of splits that were tried (Bonferroni over the
splits: the largest of many t statistics is not one t statistic, and without this a noise-only series
of 30 runs alarms at several times alpha). A significant split cuts the segment and both halves are
searched again. Where the segment is cut is not the largest |t| (mid-ramp for a creeping change) but the
CUSUM's turning point, moved back while the run before it is still beyond the runs before. Holm's method then runs over every candidate of the cases of a suite and environment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
from scipy import stats

from xlabench.history import ALPHA  # noqa: F401 (changes.ALPHA: per series, see xlabench/history)

MIN_SIZE = 3      # runs on each side of a split (fewer: a side has next to no variance to test against)
WINDOW = 30       # runs on each side a change's size is measured on (up to the neighbouring changes)
RAMP_ALPHA = 0.05  # a run before a change still counts as changed while it is this significantly beyond the runs before it
BOOTSTRAP = 400
EXACT_SIDE = 10   # a split with a side this small gets the exact Mann-Whitney p-value
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Split:
    index: int   # first run after the change
    p: float     # Mann-Whitney p-value, Bonferroni-corrected over the splits tried


@dataclass(frozen=True)
class Size:
    ratio: float  # geometric mean after / before (a time: > 1 is slower)
    low: float
    high: float


def rank_splits(y: np.ndarray, min_size: int = MIN_SIZE) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(split indices k, z, two-sided p) of the Mann-Whitney U test of y[:k] against y[k:], for every k allowed
    (normal approximation with tie and continuity corrections: conservative with 3 runs on a side).

    Ranks, as the gate's per-case test: a case's run medians are far from normal (a bimodal case's median of
    5 samples jumps between modes), and on such series the largest of the t statistics alarmed in 7% of
    noise-only suites of 48 cases after Holm at 1%; under the null every order of the runs is equally
    likely, so the rank test holds its level whatever the noise (docs/history.md)."""
    n = len(y)
    k = np.arange(min_size, n - min_size + 1)
    if len(k) == 0:
        return k, np.zeros(0), np.ones(0)
    ranks = stats.rankdata(y)
    _, ties = np.unique(y, return_counts=True)
    n1, n2 = k.astype(float), (n - k).astype(float)
    u = np.cumsum(ranks)[k - 1] - n1 * (n1 + 1) / 2
    var = n1 * n2 / 12 * ((n + 1) - np.sum(ties ** 3 - ties) / (n * (n - 1)))
    dev = n1 * n2 / 2 - u  # > 0: the left part ranks low, the values rose
    z = np.sign(dev) * np.maximum(np.abs(dev) - 0.5, 0) / np.sqrt(np.maximum(var, 1e-12))
    return k, z, 2 * stats.norm.sf(np.abs(z))


def best_split(y: np.ndarray, allowed: Optional[np.ndarray] = None, min_size: int = MIN_SIZE,
               tried: Optional[int] = None) -> Optional[Split]:
    """The split of largest |z| (among the allowed ones: run k starts a new commit), its p times ``tried``
    (default: the splits of y that were allowed)."""
    k, t, p = rank_splits(y, min_size)
    if allowed is not None and len(k):
        keep = allowed[k]
        k, t, p = k[keep], t[keep], p[keep]
    if len(k) == 0:
        return None
    i = int(np.argmax(np.abs(t)))
    return Split(int(k[i]), float(min(1.0, split_p(y, int(k[i])) * (tried or len(k)))))


def split_p(y: np.ndarray, k: int) -> float:
    """Two-sided Mann-Whitney p of y[:k] against y[k:]: exact when a side has <= EXACT_SIDE runs (the normal
    approximation is too conservative there: 5 runs after a change could never be significant at 1% after
    the Bonferroni factor of 30 runs; exact, they can), else the normal approximation."""
    left, right = y[:k], y[k:]
    method = "exact" if min(len(left), len(right)) <= EXACT_SIDE else "asymptotic"
    return float(stats.mannwhitneyu(left, right, method=method).pvalue)


def cusum_location(y: np.ndarray, allowed: Optional[np.ndarray] = None, min_size: int = MIN_SIZE) -> int:
    """Where the change lies: the argmax of the unweighted CUSUM |sum(y[:k] - mean(y))|, the last run before
    the values cross their overall mean. For a step it agrees with the largest |t|; for a ramp the largest
    |t| lies mid-ramp, the crossing where the ramp starts (measured on creeping series: docs/history.md)."""
    n = len(y)
    k = np.arange(min_size, n - min_size + 1)
    if allowed is not None:
        k = k[allowed[k]]
    s = np.cumsum(y - y.mean())
    return int(k[np.argmax(np.abs(s[k - 1]))])


def ramp_start(y: np.ndarray, k: int, min_size: int = MIN_SIZE, alpha: float = RAMP_ALPHA,
               allowed: Optional[np.ndarray] = None) -> int:
    """Move a change at k back while the run before it is still significantly beyond the runs before
    that, in the change's direction: a creeping change is reported where it starts, not mid-ramp
    (where the largest |t| lies)."""
    direction = np.sign(np.mean(y[k:]) - np.mean(y[:k]))
    while k - 1 >= min_size:
        left, point = y[:k - 1], y[k - 1]
        sd = np.std(left, ddof=1)
        if sd <= 0:
            break
        t = direction * (point - left.mean()) / (sd * np.sqrt(1 + 1 / len(left)))
        if stats.t.sf(t, len(left) - 1) >= alpha:
            break
        k -= 1
        while allowed is not None and k - 1 >= min_size and not allowed[k]:
            k -= 1  # runs of one commit stay together
    return k


def segment(y: np.ndarray, alpha: float = ALPHA, allowed: Optional[np.ndarray] = None,
            min_size: int = MIN_SIZE) -> list[Split]:
    """Binary segmentation: every split significant at alpha, in index order.

    Every test, of the whole series or of a part, is corrected by the splits of the whole series: a part
    left between two real changes is searched at the same strictness as the series, so the false alarms
    of the parts do not add up as the recursion goes deeper."""
    found: list[Split] = []
    todo = [(0, len(y))]
    k_all = np.arange(min_size, len(y) - min_size + 1)
    tried = max(1, int(np.sum(allowed[k_all])) if allowed is not None and len(k_all) else len(k_all))
    while todo:
        a, b = todo.pop()
        sub_allowed = None if allowed is None else allowed[a:b]
        s = best_split(y[a:b], sub_allowed, min_size, tried)
        if s is None or s.p > alpha:
            continue
        k = ramp_start(y[a:b], cusum_location(y[a:b], sub_allowed, min_size), min_size, allowed=sub_allowed)
        found.append(Split(a + k, s.p))
        todo += [(a, a + k), (a + k, b)]
    return sorted(found, key=lambda s: s.index)


def window_of(bounds: Sequence[int], i: int, n: int, window: int) -> tuple[int, int, int]:
    """(start, change, end) of the runs the i-th change is measured on."""
    k = bounds[i]
    lo = bounds[i - 1] if i > 0 else 0
    hi = bounds[i + 1] if i + 1 < len(bounds) else n
    return max(lo, k - window), k, min(hi, k + window)


def run_logs(samples: Sequence[np.ndarray], rng: np.random.Generator, reps: int) -> np.ndarray:
    """(reps, runs) log medians of each run's samples resampled with replacement."""
    out = np.empty((reps, len(samples)))
    by_len: dict[int, list[int]] = {}
    for j, s in enumerate(samples):
        by_len.setdefault(len(s), []).append(j)
    for n, cols in by_len.items():  # runs with as many samples resampled together
        a = np.array([np.asarray(samples[j], dtype=float) for j in cols])  # (runs, n)
        pick = rng.integers(0, n, (reps, len(cols), n))
        out[:, cols] = np.log(np.median(np.take_along_axis(a[None], pick, axis=2), axis=2))
    return out


def size(case_samples: Sequence[Sequence[Optional[np.ndarray]]], refs: np.ndarray, start: int, k: int, end: int,
         weights: Optional[np.ndarray] = None, reps: int = BOOTSTRAP, confidence: float = CONFIDENCE,
         seed: int = 0) -> Size:
    """The change's size: geometric mean of the runs k..end-1 over that of start..k-1, with a two-level
    bootstrap interval (runs resampled on each side, then each run's raw samples).

    ``case_samples[c][r]`` holds case c's samples in run r (None: not in that run); a run's value is the
    mean over its cases of log(median) - refs[c], weighted by weights[c] (one case: its log median)."""
    w = np.ones(len(case_samples)) if weights is None else np.asarray(weights, float)
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
        total[:, have] += w[c] * logs
        count[have] += w[c]
        point[have] += [w[c] * (np.log(np.median(per_run[runs[j]])) - refs[c]) for j in have]
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
