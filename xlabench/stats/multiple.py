"""Many tests at once: Holm's step-down adjustment (the gate's cases, the history's cases of a suite) and
Bonferroni's (the history floor's splits, the trend's windows). No scipy."""

from __future__ import annotations

from typing import Sequence

import numpy as np


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm step-down adjusted p-values: reject where adjusted <= alpha (family-wise error <= alpha)."""
    p = np.asarray(p_values, dtype=float)
    m = len(p)
    if m == 0:
        return p
    order = np.argsort(p, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adjusted
    return out


def bonferroni(p: float, m: int) -> float:
    """One p-value of m tests, Bonferroni-adjusted: m p, at most 1."""
    return min(1.0, p * m)
