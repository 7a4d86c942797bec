"""Summaries of one sample: the project's one quantile (``quantile``, ``percentile``), its median
(``median``: np.median's figure, without its per-call overhead), the row's summaries of per-iteration
seconds (``summarize``, ``device_summary``) and the statistics the gate can compare a metric by
(``STATISTICS``). No scipy: the worker, `run` and `validate` import it.
"""

from __future__ import annotations

import statistics
from typing import Any, Callable, Sequence

import numpy as np


def quantile(a: Any, q: Any, axis: int | None = None) -> Any:
    """The one quantile of the project (numpy's linear interpolation); ``q`` a fraction (0.5: the middle)."""
    return np.quantile(np.asarray(a, dtype=np.float64), q, axis=axis)


def percentile(a: Any, q: Any, axis: int | None = None) -> Any:
    """``quantile`` with ``q`` in percent, as np.percentile takes it (q / 100, then the same quantile): the
    rows' p10/p90, the device columns and the gate's p10 statistic all agree on it. Of an even count,
    percentile 50 interpolates (b - (b - a) / 2) where ``median`` averages ((a + b) / 2): the two may differ
    in the last bit, and the row's median_s has always been the percentile."""
    return quantile(a, np.true_divide(q, 100), axis=axis)


def median(x: Any) -> float:
    """np.median of a 1-D sample, the same figure (the middle value, or the mean of the middle two; nan
    where a value is nan), without its per-call overhead: ~20 us against ~3 on 30 values, and the
    change-point detector takes ~10^5 medians a history."""
    a = np.asarray(x, float)
    n = len(a)
    if n == 0:
        return float("nan")
    h = n // 2
    part = np.partition(a, [h - 1, h, n - 1] if n % 2 == 0 else [h, n - 1])  # a nan sorts last
    if np.isnan(part[-1]):
        return float("nan")
    return float((part[h - 1] + part[h]) / 2) if n % 2 == 0 else float(part[h])


def nanmedian(x: Any) -> float:
    """The median of a sample's values that are not nan (np.nanmedian; nan, with its warning, where none is)."""
    return float(np.nanmedian(np.asarray(x, float)))


def median_low(x: Sequence[Any]) -> Any:
    """The lower of the middle two of an even count (the middle one of an odd): always one of the values."""
    if not len(x):
        raise ValueError("median_low of no values")
    return sorted(x)[(len(x) - 1) // 2]


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


def _p10(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return percentile(x, 10, axis=axis)


# What summarises a metric's per-iteration values (the gate's Metric.statistic names one), vectorised over
# ``axis`` for the bootstrap.
STATISTICS: dict[str, Callable[..., Any]] = {"median": np.median, "mean": np.mean, "p10": _p10}
