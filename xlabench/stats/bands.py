"""Run-to-run noise in two bands, on arrays: the likelihood the change-point detector's mean family also
segments by (history/changes.py).

A runner's timings often fall in two bands (a run lands on a fast or a slow core, a cache warm or cold): each
run sits at its segment's level, or ``d`` above it with probability ``p``, both bands spreading ``s`` (a
mixture of two normals with a common spread). With ``p`` or ``d`` near 0 this is one normal. The mean of
such runs wanders by the bands as well as by ``s``; the likelihood knows which band a run is likely in, so a
level is measured to about ``s`` instead of the runs' whole spread (docs/history.md has the figures).

Everything here is fitted by EM (a few dozen vectorised steps): the band parameters over a whole series given
its segments, and a segment's level given the band parameters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np
from scipy import special

from xlabench.stats.robust import running_median
from xlabench.stats.summary import median, quantile

ITERS = 30          # EM steps for the band parameters and for a level
LEVEL_ITERS = 15    # EM steps for each candidate split's two levels
MIN_P = 0.02        # the upper band's probability is kept within MIN_P..MAX_P (0.5: the upper band is the smaller)
MAX_P = 0.5
LONG = 120          # a segment longer than this: only the candidate splits (CANDIDATES) get the likelihood
CANDIDATES = 8      # ... the best this many of the mean scan and of the band-corrected scan, with NEAR runs a side
NEAR = 2


@dataclass(frozen=True)
class Bands:
    p: float  # probability of the upper band
    d: float  # its offset above the level
    s: float  # each band's spread


def start(z: np.ndarray) -> Bands:
    """First guess from the runs' residuals about the median of the 9 around them: a two-component normal
    mixture with a common spread, by EM."""
    r = np.asarray(z, float) - running_median(z, 9)
    m0, m1 = quantile(r, [0.3, 0.85])
    s, p = max(float(np.std(r)) / 2, 1e-12), 0.3
    n = len(r)
    for _ in range(ITERS):
        w = _weights(r, m0, p, m1 - m0, s)
        v, sw = 1 - w, w.sum()
        p = _clip_p(sw / n)
        m0 = float((v * r).sum() / max(v.sum(), 1e-12))
        m1 = float((w * r).sum() / max(sw, 1e-12))
        s = max(float(np.sqrt((v * (r - m0) ** 2 + w * (r - m1) ** 2).sum() / n)), 1e-12)
    return Bands(p, m1 - m0, s)


def _clip_p(mean_w: float) -> float:
    """The upper band's probability kept within MIN_P..MAX_P (np.clip's result on a scalar, without its
    per-call overhead: EM takes it ~10^5 times a history)."""
    return min(max(float(mean_w), MIN_P), MAX_P)


_HALF_LOG_2PI = 0.5 * np.log(2 * np.pi)


def _logpdf(x: np.ndarray, mu: Any, s: float) -> np.ndarray:
    """The normal log-density (scipy.stats.norm.logpdf without its per-call overhead: EM calls it thousands
    of times on small arrays)."""
    return -0.5 * ((x - mu) / s) ** 2 - np.log(s) - _HALF_LOG_2PI


def _labels(n: int, bounds: Sequence[int]) -> np.ndarray:
    """Each run's segment number."""
    seg = np.zeros(n, int)
    for k in bounds:
        seg[k:] += 1
    return seg


def _bands(x: np.ndarray, mu: Any, b: Bands) -> tuple[np.ndarray, np.ndarray]:
    """Log-densities of runs x at level mu, joint with each band: (lower, upper)."""
    return np.log1p(-b.p) + _logpdf(x, mu, b.s), np.log(b.p) + _logpdf(x, mu + b.d, b.s)


def _upper(x: np.ndarray, mu: Any, b: Bands) -> np.ndarray:
    """Each run's probability of the upper band, at level mu: the logistic of the bands' log-density
    difference, log(p / (1 - p)) + d (x - mu - d/2) / s^2 (the two normals' quadratic terms cancel). EM calls
    it ~10^5 times a history on small arrays: five array operations where the two log-densities took 17."""
    return _weights(x, mu, b.p, b.d, b.s)


def _weights(x: np.ndarray, mu: Any, p: float, d: float, s: float) -> np.ndarray:
    """_upper on the band parameters themselves (EM's loops, without a Bands per step)."""
    return special.expit(math.log(p / (1 - p)) + (x - (mu + 0.5 * d)) * (d / (s * s)))


def density(x: np.ndarray, mu: np.ndarray, b: Bands) -> np.ndarray:
    """Log-density of runs x at level mu."""
    return np.logaddexp(*_bands(x, mu, b))


def fit(z: np.ndarray, bounds: Sequence[int], b: Bands) -> Bands:
    """The band parameters of z with a level per segment (changes before the runs ``bounds``), by EM from b."""
    z = np.asarray(z, float)
    seg = _labels(len(z), bounds)
    count = np.bincount(seg)
    p, d, s = b.p, b.d, b.s
    mu = np.bincount(seg, z) / count - p * d
    n = len(z)
    for _ in range(ITERS):
        w = _weights(z, mu[seg], p, d, s)
        sw = w.sum()
        p = _clip_p(sw / n)
        mu = np.bincount(seg, z - w * d) / count
        r = z - mu[seg]
        d = float((w * r).sum() / max(sw, 1e-12))
        s = max(float(np.sqrt(((1 - w) * r ** 2 + w * (r - d) ** 2).sum() / n)), 1e-12)
    return Bands(p, d, s)


def levels(x: np.ndarray, inside: np.ndarray, b: Bands, iters: int = LEVEL_ITERS) -> np.ndarray:
    """For each row of the mask ``inside`` (rows x runs), the level of the runs x[inside[row]], by EM."""
    count = np.maximum(inside.sum(1), 1)
    mu = np.where(inside, x, 0.0).sum(1) / count - b.p * b.d
    for _ in range(iters):
        w = _upper(x[None, :], mu[:, None], b)
        mu = np.where(inside, x[None, :] - w * b.d, 0.0).sum(1) / count
    return mu


def loglik(z: np.ndarray, bounds: Sequence[int], first: Bands) -> float:
    """The log-likelihood of z with a level per segment, its band parameters fitted from ``first``."""
    z = np.asarray(z, float)
    b = fit(z, bounds, first)
    seg = _labels(len(z), bounds)
    inside = seg[None, :] == np.arange(seg[-1] + 1)[:, None]
    mu = levels(z, inside, b, ITERS)
    return float(np.sum(density(z, mu[seg], b)))


def normal_loglik(z: np.ndarray, bounds: Sequence[int]) -> float:
    """The log-likelihood of z with a level per segment and one normal spread (no bands)."""
    z = np.asarray(z, float)
    seg = _labels(len(z), bounds)
    r = z - (np.bincount(seg, z) / np.bincount(seg))[seg]
    return float(np.sum(_logpdf(r, 0.0, max(float(np.sqrt(np.mean(r ** 2))), 1e-12))))


def split_lr(x: np.ndarray, ks: np.ndarray, b: Bands) -> np.ndarray:
    """Twice the log-likelihood ratio of a change before run k (each of ks) against none, in x."""
    left = np.arange(len(x))[None, :] < ks[:, None]
    mu_l, mu_r = np.split(levels(x, np.concatenate([left, ~left]), b), 2)  # both sides' rows in one EM
    one = levels(x, np.ones((1, len(x)), bool), b)[0]
    ll = np.where(left, density(x[None, :], mu_l[:, None], b), density(x[None, :], mu_r[:, None], b)).sum(1)
    return np.maximum(2 * (ll - density(x, one, b).sum()), 0.0)


def _candidates(x: np.ndarray, ks: np.ndarray, b: Bands) -> np.ndarray:
    """A long segment's splits worth the likelihood: the best CANDIDATES by the mean difference of the runs
    and of the runs less their expected band offset, each with NEAR runs a side."""
    m = len(x)
    corrected = x - _upper(x, median(x), b) * b.d
    picks = []
    for v in (x, corrected):
        c = np.concatenate([[0.0], np.cumsum(v)])
        t = np.abs((c[-1] - c[ks]) / (m - ks) - c[ks] / ks) * np.sqrt(ks * (m - ks) / m)
        picks.append(ks[np.argsort(t)[-CANDIDATES:]])
    near = np.unique(np.concatenate(picks)[:, None] + np.arange(-NEAR, NEAR + 1)[None, :])
    return np.intersect1d(near, ks)


def step_scan(x: np.ndarray, b: Bands, allowed: Optional[np.ndarray], min_size: int) -> Optional[tuple[float, int]]:
    """The best single change of a segment by the band likelihood: (sqrt of twice the log-likelihood ratio,
    the first run after it); None if the segment is too short or no split is allowed."""
    m = len(x)
    ks = np.arange(min_size, m - min_size + 1)
    if allowed is not None:
        ks = ks[np.asarray(allowed, bool)[ks]]
    if not len(ks):
        return None
    if m > LONG:
        ks = _candidates(x, ks, b)
    lr = split_lr(np.asarray(x, float), ks, b)
    i = int(np.argmax(lr))
    return float(np.sqrt(lr[i])), int(ks[i])
