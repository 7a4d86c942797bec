"""Rank tests: the one Mann-Whitney U and the smallest p a sample size can reach. scipy's tests, imported
with this module."""

from __future__ import annotations

import functools

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
