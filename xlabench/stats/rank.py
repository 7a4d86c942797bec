"""Rank tests: the one Mann-Whitney U (the gate's cases, the history's rank family and its floor), the
Wilcoxon signed-rank test (the gate's suite-wide shift), the smallest p a sample size can reach, the
normal scores the rank family scans and the Mann-Whitney z of every split of a series (the floor's scan).
scipy's tests, imported with this module."""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np
from scipy import special, stats


def mannwhitney_p(a: np.ndarray, b: np.ndarray, method: str = "auto") -> float:
    """Two-sided Mann-Whitney U p-value of a against b (scipy's, its ``method``: "auto", "exact" or
    "asymptotic"); nan where scipy's is."""
    return float(stats.mannwhitneyu(a, b, alternative="two-sided", method=method).pvalue)


@functools.lru_cache(maxsize=None)
def smallest_p(n_base: int, n_cand: int) -> float:
    """The smallest two-sided Mann-Whitney p-value these sample sizes can give (fully separated)."""
    return mannwhitney_p(np.arange(n_base), np.arange(n_base, n_base + n_cand))


def signed_rank_p(d: np.ndarray) -> float:
    """Two-sided Wilcoxon signed-rank p of the differences d against a shift of 0 (zeros dropped;
    exact for small untied sets, scipy's normal approximation otherwise); 1 when every d is 0."""
    d = np.asarray(d, dtype=float)
    if not np.any(d != 0):
        return 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = float(stats.wilcoxon(d, zero_method="wilcox", alternative="two-sided").pvalue)
    return 1.0 if math.isnan(p) else p


def normal_scores(y: np.ndarray) -> np.ndarray:
    """The values' normal scores (van der Waerden: the normal quantile of rank / (n + 1)), whose
    distribution under no change is the same whatever the noise's."""
    return special.ndtri(stats.rankdata(y) / (len(y) + 1))  # norm.ppf: ndtri


def rank_z(y: np.ndarray, min_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(split indices k, Mann-Whitney z of y[:k] against y[k:]) for every k with at least ``min_size``
    values a side, from the rank sums (ties and continuity corrected)."""
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
