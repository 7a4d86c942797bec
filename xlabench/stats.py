"""The project's statistics, pure (as asv's statistics.py): numbers in, numbers out; no I/O, no framework,
no xlabench import. The timing harness (measure/), the row builder (run/rows.py) and the gate use them.

- One quantile (``percentile``) and the row's summaries of per-iteration seconds (``summarize``,
  ``device_summary``).
- The smallest Mann-Whitney p-values two samples can reach: ``separated_p`` (n against n, closed form: no
  scipy, so `validate` and `run` can count the samples a suite needs) and ``smallest_p`` (any sizes, scipy,
  imported on first use), and ``min_samples_per_side`` (Holm over m cases).
"""

from __future__ import annotations

import functools
import math
import statistics
from typing import Any, Sequence

import numpy as np


def percentile(a: Any, q: Any, axis: int | None = None) -> Any:
    """The one quantile of the project (numpy's linear interpolation): the rows' p10/p90, the device
    columns and the gate's p10 statistic all agree on it. ``q`` in percent; the median is q=50."""
    return np.percentile(np.asarray(a, dtype=np.float64), q, axis=axis)


def summarize(samples: list[float]) -> dict[str, float | int]:
    """Median (the headline), mean, min, p10, p90, stdev, cv and n of per-iteration seconds."""
    a = np.asarray(samples, dtype=np.float64)
    mean = float(a.mean())
    stdev = float(statistics.stdev(a)) if len(a) > 1 else 0.0
    return {
        "n": int(len(a)),
        "median_s": float(percentile(a, 50)),
        "mean_s": mean,
        "min_s": float(a.min()),
        "p10_s": float(percentile(a, 10)),
        "p90_s": float(percentile(a, 90)),
        "stdev_s": stdev,
        "cv": stdev / mean if mean > 0 else 0.0,
    }


def device_summary(samples: Sequence[float]) -> dict[str, float]:
    """device_median_s, device_p10_s, device_p90_s of per-iteration device seconds (empty: none)."""
    if not len(samples):
        return {}
    a = np.asarray(samples, dtype=np.float64)
    med, p10, p90 = (float(v) for v in percentile(a, [50, 10, 90]))
    return {"device_median_s": med, "device_p10_s": p10, "device_p90_s": p90}


def separated_p(n: int) -> float:
    """The exact two-sided Mann-Whitney p-value of n vs n completely separated samples: 2 / C(2n, n)."""
    return min(1.0, 2 / math.comb(2 * n, n))


@functools.lru_cache(maxsize=None)
def smallest_p(n_base: int, n_cand: int) -> float:
    """The smallest two-sided Mann-Whitney p-value these sample sizes can give (fully separated; scipy)."""
    from scipy import stats as sps

    return float(sps.mannwhitneyu(np.arange(n_base), np.arange(n_base, n_base + n_cand)).pvalue)


@functools.lru_cache(maxsize=None)
def min_samples_per_side(alpha: float, m: int) -> int:
    """The smallest n for which n vs n samples can make one case significant after Holm over m cases (Holm
    rejects the most significant of m when its p <= alpha / m).

    alpha 0.05: 4 per side for 1 case, 5 for 2-6, 6 for 7-23, 7 for 24-85 (the attention suite's 48
    cpu cases), 8 for 86-321, 9 for 322-1215.
    """
    if not 0 < alpha < 1 or m < 1:
        raise ValueError(f"need 0 < alpha < 1 and m >= 1, got alpha={alpha}, m={m}")
    n = 2
    while separated_p(n) > alpha / m:
        n += 1
    return n
