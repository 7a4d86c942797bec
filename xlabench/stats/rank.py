"""Rank tests: the one Mann-Whitney U, the Wilcoxon signed-rank test (the gate's suite-wide shift) and the
smallest p a sample size can reach. scipy's tests, imported with this module."""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np
from scipy import stats


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
