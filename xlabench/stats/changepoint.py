"""The change-point detector's scan (history/changes.py runs it): the largest standardised difference of
means over a segment's splits and windows, its p-value calibrated by simulation (NEFF), and the CUSUM's
turning point (the history floor's)."""

from __future__ import annotations

from typing import Optional

import numpy as np

from xlabench.stats.ttest import norm_sf, t_sf

# scan_p's effective number of tests by series length (runs, tests), interpolated on log-log, slope 1 beyond
# (simulated: the 1 % quantile of the one-test p of the largest |z| on Gaussian noise-only series, 500 to
# 6,000 series per length, sigma estimated as robust.noise() does; at 0.1 % the same tests or fewer)
NEFF = ((6, 1.0), (8, 1.5), (12, 3.1), (20, 13.0), (30, 44.0), (45, 98.0), (60, 147.0), (120, 360.0),
        (250, 1330.0), (500, 3600.0), (1000, 5300.0), (2000, 10700.0))
_LOG_NEFF = (np.log([r for r, _ in NEFF]), np.log([e for _, e in NEFF]))


def scan(z: np.ndarray, sigma: float, allowed: Optional[np.ndarray], min_size: int, max_bump: int,
         pooled: bool = False, steps: bool = True) -> Optional[tuple[float, int, Optional[int]]]:
    """The best split of a segment: (largest |z|, a, b) with b None for a step at a, or the window a..b-1
    (at most ``max_bump`` runs: a regression and its fix) against the runs around it, at least ``min_size``
    runs a side; None if the segment is too short. ``allowed[k]``: a split may go before run k (run k
    starts a new commit). ``pooled``: each split's z divides by its own pooled spread about its two sides'
    means (m - 2 degrees of freedom), not sigma. ``steps`` False: the windows only."""
    m = len(z)
    if m < 2 * min_size:
        return None
    c = np.concatenate([[0.0], np.cumsum(z)])
    total = c[-1]
    c2 = np.concatenate([[0.0], np.cumsum(z ** 2)])

    def sd(ss: np.ndarray) -> np.ndarray:  # pooled: each split's own spread about its two sides' means
        return np.maximum(np.sqrt(np.maximum(ss, 0.0) / (m - 2)), 1e-12) if pooled else sigma
    ok = np.ones(m + 1, bool) if allowed is None else np.concatenate([np.asarray(allowed, bool), [True]])
    k = np.arange(min_size, m - min_size + 1)
    k = k[ok[k]]
    best: Optional[tuple[float, int, Optional[int]]] = None
    if len(k) and steps:
        d = (total - c[k]) / (m - k) - c[k] / k
        ss = c2[-1] - c[k] ** 2 / k - (total - c[k]) ** 2 / (m - k)
        t = np.abs(d) / (sd(ss) * np.sqrt(1 / k + 1 / (m - k)))
        i = int(np.argmax(t))
        best = (float(t[i]), int(k[i]), None)
    lengths = np.arange(min_size, min(max_bump, m - 2 * min_size) + 1)
    if len(lengths):
        a = np.arange(min_size, m - 2 * min_size + 1)
        aa, ll = np.meshgrid(a, lengths, indexing="ij")
        bb = aa + ll
        valid = (bb <= m - min_size) & ok[aa] & ok[np.minimum(bb, m)]
        if valid.any():
            inside = c[np.minimum(bb, m)] - c[aa]
            d = inside / ll - (total - inside) / (m - ll)
            ss = c2[-1] - inside ** 2 / ll - (total - inside) ** 2 / (m - ll)
            t = np.where(valid, np.abs(d) / (sd(ss) * np.sqrt(1 / ll + 1 / (m - ll))), -1.0)
            i, j = np.unravel_index(int(np.argmax(t)), t.shape)
            if best is None or t[i, j] > best[0]:
                best = (float(t[i, j]), int(aa[i, j]), int(bb[i, j]))
    return best


def scan_p(t: float, n: int, known_sigma: bool = False, df: Optional[float] = None) -> float:
    """The p-value of a scan's largest |z| on a series of n runs: the effective number of tests of a series
    that long (NEFF) times the two-sided tail of Student's t with 0.4 (n - 1) degrees of freedom (sigma from
    the MAD of n - 1 differences has about the precision of a variance on 40 % as many: with this choice
    the effective number is the same at the 1 % and the 0.1 % quantile). ``known_sigma`` (the rank family's
    scores): the normal tail."""
    tail = norm_sf(t) if known_sigma else t_sf(t, max(2.0, 0.4 * (n - 1) if df is None else df))
    return float(min(1.0, neff(n) * 2 * tail))


def neff(n: int) -> float:
    """The effective number of tests of a scan on n runs (NEFF interpolated on log-log; slope 1 beyond it)."""
    ln, le = _LOG_NEFF
    x = np.log(max(n, NEFF[0][0]))
    if x > ln[-1]:
        return float(np.exp(le[-1] + (x - ln[-1])))
    return float(np.exp(np.interp(x, ln, le)))


def cusum_location(y: np.ndarray, allowed: Optional[np.ndarray], min_size: int) -> int:
    """The argmax of the CUSUM |sum(y[:k] - mean(y))| over the allowed splits with ``min_size`` runs a side."""
    k = np.arange(min_size, len(y) - min_size + 1)
    if allowed is not None:
        k = k[allowed[k]]
    s = np.cumsum(y - y.mean())
    return int(k[np.argmax(np.abs(s[k - 1]))])
