"""Student's t and the normal: their tails, the two-sample t-test, the interval of a shift in mean, a new
value against a sample, and the slope of a hinge (flat, then a trend). The change-point detector takes
~10^3 tails and t-tests a history: scipy's figures by the special functions its distributions call
(norm.sf: ndtr(-x); t.sf: stdtr(df, -x)), without the distribution machinery's ~0.2 ms a call."""

from __future__ import annotations

from typing import Optional

import numpy as np
from scipy import special, stats

from xlabench.stats.multiple import bonferroni


def norm_sf(x: float) -> float:
    """The normal's upper tail (scipy.stats.norm.sf)."""
    return float(special.ndtr(-x))


def t_sf(x: float, df: float) -> float:
    """Student's t's upper tail on df degrees of freedom (scipy.stats.t.sf)."""
    return float(special.stdtr(df, -x))


def norm_isf(q: float) -> float:
    """The normal's upper q-quantile (scipy.stats.norm.isf)."""
    return stats.norm.isf(q)


def ttest_p(a: np.ndarray, b: np.ndarray) -> float:
    """scipy.stats.ttest_ind(a, b).pvalue (pooled variance, two-sided), the same figure by scipy's own steps
    (its variances as mean squared deviations times n / (n - 1), a side of one value at variance 0, then
    2 stdtr(df, -|t|)), without its ~1.3 ms a call: a history confirms ~10^3 changes; nan where scipy's is."""
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0 or n1 + n2 < 3:
        return float("nan")
    m1, m2 = a.mean(), b.mean()
    v1 = np.mean((a - m1) ** 2) * (n1 / (n1 - 1)) if n1 > 1 else 0.0
    v2 = np.mean((b - m2) ** 2) * (n2 / (n2 - 1)) if n2 > 1 else 0.0
    df = n1 + n2 - 2.0
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (m1 - m2) / np.sqrt(((n1 - 1) * v1 + (n2 - 1) * v2) / df * (1.0 / n1 + 1.0 / n2))
    return float(2 * special.stdtr(df, -abs(t)))


def point_p(before: np.ndarray, value: float, direction: float) -> float:
    """One-sided p of a new value beyond the sample ``before`` in ``direction`` (+1: above, -1: below):
    Student's t of the value against the sample's mean, over the spread of a new draw (sd sqrt(1 + 1/n)),
    on n - 1 degrees of freedom; 1 where the sample has no spread."""
    sd = np.std(before, ddof=1)
    if sd <= 0:
        return 1.0
    t = direction * (value - before.mean()) / (sd * np.sqrt(1 + 1 / len(before)))
    return t_sf(t, len(before) - 1)


def shift_interval(left: np.ndarray, right: np.ndarray, confidence: float,
                   var_floor: Optional[float] = None) -> tuple[float, float, float]:
    """(mean of right - mean of left, its t interval's low, high) from the values' pooled spread about their
    side's mean, that variance at least ``var_floor`` where given; (nan, nan, nan) where a side is empty,
    (shift, -inf, inf) without a degree of freedom."""
    if len(left) == 0 or len(right) == 0:
        return float("nan"), float("nan"), float("nan")
    diff = float(right.mean() - left.mean())
    df = len(left) + len(right) - 2
    if df < 1:
        return diff, -np.inf, np.inf
    var = (np.sum((left - left.mean()) ** 2) + np.sum((right - right.mean()) ** 2)) / df
    if var_floor is not None:
        var = max(var, var_floor)
    half = stats.t.ppf(0.5 + confidence / 2, df) * np.sqrt(var * (1 / len(left) + 1 / len(right)))
    return diff, diff - half, diff + half


def hinge_fit(y: np.ndarray, min_runs: int) -> Optional[tuple[int, float, float]]:
    """(j, slope, two-sided p of the slope) of the best fit of y = a + b * max(0, i - j): flat, then a linear
    trend from value j to the last (j by least squares over the candidates with at least ``min_runs``
    values in the trend, p Bonferroni over them); None where no candidate fits."""
    n = len(y)
    x = np.arange(n, dtype=float)
    best: Optional[tuple[float, int, float, float]] = None
    cands = range(n - min_runs + 1)
    for j in cands:
        h = np.maximum(0.0, x - j)
        a = np.column_stack([np.ones(n), h])
        coef, res, rank, _ = np.linalg.lstsq(a, y, rcond=None)
        if rank < 2:
            continue
        rss = float(res[0]) if len(res) else float(np.sum((y - a @ coef) ** 2))
        se = np.sqrt(rss / (n - 2) / np.sum((h - h.mean()) ** 2)) if n > 2 else np.inf
        p = 2 * stats.t.sf(abs(coef[1]) / se, n - 2) if se > 0 else 0.0
        if best is None or rss < best[0]:
            best = (rss, j, float(coef[1]), float(p))
    if best is None:
        return None
    _, j, slope, p = best
    return j, slope, bonferroni(p, len(cands))
