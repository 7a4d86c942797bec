"""Robust estimators: the spread of a sample by its median absolute deviation, a series' noise from its
consecutive differences, a running median, outlier clipping and bad-run removal around it, a step-proof
spread, and the variance of a log median from its own samples (the change-point detector's)."""

from __future__ import annotations

from typing import Optional

import numpy as np
from scipy import ndimage

from xlabench.stats.summary import median

SPIKE_K = 10.0     # a run this many sigma from the median of its 5 neighbours is a bad run: set to that median
SPIKES = 1         # at most this many bad runs (or 5 %: one run in 20) are set aside before heavy tails are judged
HUBER_K = 3.0      # a run is clipped to this many sigma from the running median of its neighbours


def mad(x: np.ndarray) -> float:
    """1.4826 times the median absolute deviation: the standard deviation of normal values, robustly."""
    return 1.4826 * median(np.abs(x - median(x)))


def diff_sigma(y: np.ndarray) -> float:
    """A series' run-to-run standard deviation from its consecutive differences, robustly (the MAD of the
    differences / sqrt 2: a step or an outlier moves one or two differences, not their median); nan with
    fewer than 2 differences."""
    d = np.diff(np.asarray(y, float))
    if len(d) < 2:
        return float("nan")
    return mad(d) / np.sqrt(2)


def noise(y: np.ndarray) -> float:
    """diff_sigma, where more than half the differences are 0 (quantised timings) their standard deviation
    instead, at least 1e-9 (nan with fewer than 2 differences)."""
    s = diff_sigma(y)
    if np.isnan(s):
        return s
    if s <= 0:
        s = float(np.std(np.diff(np.asarray(y, float)))) / np.sqrt(2)
    return max(s, 1e-9)


def running_median(y: np.ndarray, size: int = 5) -> np.ndarray:
    """Each value's median with the size - 1 around it (mirrored at the ends): a step keeps its edge."""
    return ndimage.median_filter(y, size=size, mode="mirror")


def clip_outliers(y: np.ndarray, sigma: float, k: float = HUBER_K) -> np.ndarray:
    """y with each run clipped to k sigma around the median of the 5 runs around it (a median filter keeps a
    step's edge; one or two bad runs in five are clipped)."""
    y = np.asarray(y, float)
    if len(y) < 5:
        return y.copy()
    m = running_median(y)
    r = y - m
    return m + np.where(np.abs(r) > SPIKE_K * sigma, 0.0, np.clip(r, -k * sigma, k * sigma))


def despike(y: np.ndarray, sigma: float) -> np.ndarray:
    """y with its bad runs set to the median of the 5 runs around them, where it has at most max(SPIKES,
    5 %) of them (else y): a bad run lies beyond SPIKE_K sigma of that median with both its neighbours
    within HUBER_K sigma of theirs, every one slower than that median (bad runs are slow), and the runs left
    without a run beyond 4 sigma of their neighbours' median or more than 2 jumps beyond 4 sigma sqrt 2 (a
    step or a regression and its fix: heavy-tailed noise, or a case jumping between modes, has more). A few of them are not noise; a case whose median jumps between modes has more,
    or several in a row."""
    y = np.asarray(y, float)
    if len(y) < 5:
        return y.copy()
    m = running_median(y)
    r = np.abs(y - m)
    near = np.concatenate([[True], r[:-1] <= HUBER_K * sigma]) & np.concatenate([r[1:] <= HUBER_K * sigma, [True]])
    bad = (r > SPIKE_K * sigma) & near
    if not bad.any() or bad.sum() > max(SPIKES, 0.05 * len(y)) or np.any(y[bad] < m[bad]):
        return y  # none, too many, or a fast one: not bad runs (a slow machine, a noisy neighbour)
    out = np.where(bad, m, y)
    rest = np.abs(out - running_median(out))
    if np.any(rest > 4 * sigma) or np.sum(np.abs(np.diff(out)) > 4 * np.sqrt(2) * sigma) > 2:
        return y  # the rest has tails too: heavy-tailed noise, not a few bad runs in normal noise
    return out


def spread(z: np.ndarray) -> float:
    """The noise of a series as its runs stray from the median of the 5 around them (root mean square,
    / 0.85: its share of normal noise's variance on 30 runs). A median filter keeps a step's edge, so a
    step does not inflate it; noise that is not normal does (runs in two bands, heavy tails once clipped)."""
    if len(z) < 5:
        return 0.0
    r = z - running_median(z)
    return float(np.sqrt(np.mean(r ** 2) / 0.85))


def log_median_var(samples: Optional[np.ndarray]) -> float:
    """The variance of the log of a sample's median from the sample itself: (pi / 2) s^2 / n with s the robust
    spread (the MAD) of the samples' logs (nan with fewer than 2 samples)."""
    if samples is None or len(samples) < 2:
        return float("nan")
    logs = np.log(np.asarray(samples, float))
    s = mad(logs)
    return np.pi / 2 * s ** 2 / len(logs)
