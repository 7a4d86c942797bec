"""Robust pieces of the change-point detector (history/changes.py): the series' noise from its consecutive
differences, outlier clipping and bad-run removal around a running median, and a step-proof spread."""

from __future__ import annotations

import numpy as np
from scipy import ndimage

SPIKE_K = 10.0     # a run this many sigma from the median of its 5 neighbours is a bad run: set to that median
SPIKES = 1         # at most this many bad runs (or 5 %: one run in 20) are set aside before heavy tails are judged
HUBER_K = 3.0      # a run is clipped to this many sigma from the running median of its neighbours


def median(x: np.ndarray) -> float:
    """np.median of a 1-D array, the same figure (the middle run, or the mean of the middle two; nan where a
    run is nan), without its per-call overhead: ~20 us against ~3 on 30 runs, and the detector takes ~10^5
    medians a history."""
    a = np.asarray(x, float)
    n = len(a)
    if n == 0:
        return float("nan")
    h = n // 2
    part = np.partition(a, [h - 1, h, n - 1] if n % 2 == 0 else [h, n - 1])  # a nan sorts last
    if np.isnan(part[-1]):
        return float("nan")
    return float((part[h - 1] + part[h]) / 2) if n % 2 == 0 else float(part[h])


def noise(y: np.ndarray) -> float:
    """The series' run-to-run standard deviation from its consecutive differences, robustly (1.4826 MAD of
    the differences / sqrt 2): a step or an outlier moves one or two differences, not their median. Where
    more than half the differences are 0 (quantised timings), their standard deviation instead."""
    d = np.diff(np.asarray(y, float))
    if len(d) < 2:
        return float("nan")
    s = 1.4826 * median(np.abs(d - median(d))) / np.sqrt(2)
    if s <= 0:
        s = float(np.std(d)) / np.sqrt(2)
    return max(s, 1e-9)


def clip_outliers(y: np.ndarray, sigma: float, k: float = HUBER_K) -> np.ndarray:
    """y with each run clipped to k sigma around the median of the 5 runs around it (a median filter keeps a
    step's edge; one or two bad runs in five are clipped)."""
    y = np.asarray(y, float)
    if len(y) < 5:
        return y.copy()
    m = ndimage.median_filter(y, size=5, mode="mirror")
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
    m = ndimage.median_filter(y, size=5, mode="mirror")
    r = np.abs(y - m)
    near = np.concatenate([[True], r[:-1] <= HUBER_K * sigma]) & np.concatenate([r[1:] <= HUBER_K * sigma, [True]])
    bad = (r > SPIKE_K * sigma) & near
    if not bad.any() or bad.sum() > max(SPIKES, 0.05 * len(y)) or np.any(y[bad] < m[bad]):
        return y  # none, too many, or a fast one: not bad runs (a slow machine, a noisy neighbour)
    out = np.where(bad, m, y)
    rest = np.abs(out - ndimage.median_filter(out, size=5, mode="mirror"))
    if np.any(rest > 4 * sigma) or np.sum(np.abs(np.diff(out)) > 4 * np.sqrt(2) * sigma) > 2:
        return y  # the rest has tails too: heavy-tailed noise, not a few bad runs in normal noise
    return out


def spread(z: np.ndarray) -> float:
    """The noise of a series as its runs stray from the median of the 5 around them (root mean square,
    / 0.85: its share of normal noise's variance on 30 runs). A median filter keeps a step's edge, so a
    step does not inflate it; noise that is not normal does (runs in two bands, heavy tails once clipped)."""
    if len(z) < 5:
        return 0.0
    r = z - ndimage.median_filter(z, size=5, mode="mirror")
    return float(np.sqrt(np.mean(r ** 2) / 0.85))
