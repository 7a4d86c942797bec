"""Change points in a series of runs, on arrays, judged by the series' own run-to-run noise.

The detector step by step (noise, outliers, scan, place, confirm, bands, size) and its figures:
docs/history.md, Change points.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np
from scipy import ndimage, special, stats

from xlabench.history import ALPHA, bands
from xlabench.history.robust import HUBER_K, SPIKE_K, SPIKES, clip_outliers, despike, noise, spread  # noqa: F401

MIN_SIZE = 3       # runs on each side of a split (fewer: a side has next to no variance to test against)
MAX_BUMP = 30      # longest window of runs scanned as a regression and its fix (longer ones: two steps)
WINDOW = 30        # runs on each side a change is confirmed and measured on (up to the neighbouring changes)
RAMP_ALPHA = 0.05  # a run before a change still counts as changed while it is this significantly beyond the runs before it
SPREAD_RUNS = 5    # a side with fewer runs: its spread is floored by the runs' within-run samples
CONFIDENCE = 0.95
REPLACE_ROUNDS = 3  # confirm, and where a change went, place the rest again between the changes left (at most this often)
FAMILIES = ("auto", "mean", "rank")
FAR_RUNS = 2      # heavy tails: at least this many runs (and 1 %) beyond 4 sigma of their neighbours' median
JUMPS = 4         # or at least this many (and 2 %) differences beyond 4 sigma sqrt 2 (a case jumping between modes)
BAND_LR = 6.0     # the two-band model is used where it beats one normal by this much (twice the log-likelihood ratio;
                  # noise-only normal series of 60 runs: 6.5 at the 99th percentile)
NOT_NORMAL = 1.4   # family auto: rank when the clipped runs' spread exceeds the differences' noise this much
                   # (normal noise, 30 runs: 1.24 at the 90th percentile; runs in two bands: 1.25-1.56)
# scan_p's effective number of tests by series length (runs, tests), interpolated on log-log, slope 1 beyond
# (simulated: the 1 % quantile of the one-test p of the largest |z| on Gaussian noise-only series, 500 to
# 6,000 series per length, sigma estimated as noise() does; at 0.1 % the same tests or fewer)
NEFF = ((6, 1.0), (8, 1.5), (12, 3.1), (20, 13.0), (30, 44.0), (45, 98.0), (60, 147.0), (120, 360.0),
        (250, 1330.0), (500, 3600.0), (1000, 5300.0), (2000, 10700.0))


@dataclass(frozen=True)
class Split:
    index: int   # first run after the change
    p: float     # the scan's p-value (the largest |z| of its segment, corrected for the splits and windows tried)


@dataclass(frozen=True)
class Size:
    ratio: float  # geometric mean after / before (a time: > 1 is slower)
    low: float
    high: float


def scan(z: np.ndarray, sigma: float, allowed: Optional[np.ndarray] = None, min_size: int = MIN_SIZE,
         max_bump: int = MAX_BUMP, pooled: bool = False, steps: bool = True) -> Optional[tuple[float, int, Optional[int]]]:
    """The best split of a segment: (largest |z|, a, b) with b None for a step at a, or the window a..b-1
    (a regression and its fix) against the runs around it; None if the segment is too short.
    ``allowed[k]``: a split may go before run k (run k starts a new commit). ``pooled``: each split's z
    divides by its own pooled spread about its two sides' means (m - 2 degrees of freedom), not sigma.
    ``steps`` False: the windows only."""
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
    tail = _norm_sf(t) if known_sigma else _t_sf(t, max(2.0, 0.4 * (n - 1) if df is None else df))
    return float(min(1.0, neff(n) * 2 * tail))


# scipy.stats' tails by the special functions its distributions call (norm.sf: ndtr(-x); t.sf: stdtr(df, -x)),
# the same figures without the distribution machinery's ~0.2 ms a call: a history takes ~10^3 of them
def _norm_sf(x: float) -> float:
    return float(special.ndtr(-x))


def _t_sf(x: float, df: float) -> float:
    return float(special.stdtr(df, -x))


_LOG_NEFF = (np.log([r for r, _ in NEFF]), np.log([e for _, e in NEFF]))


def neff(n: int) -> float:
    """The effective number of tests of a scan on n runs (NEFF interpolated on log-log; slope 1 beyond it)."""
    ln, le = _LOG_NEFF
    x = np.log(max(n, NEFF[0][0]))
    if x > ln[-1]:
        return float(np.exp(le[-1] + (x - ln[-1])))
    return float(np.exp(np.interp(x, ln, le)))


def ramp_start(y: np.ndarray, k: int, min_size: int = MIN_SIZE, alpha: float = RAMP_ALPHA,
               allowed: Optional[np.ndarray] = None) -> int:
    """Move a change at k back while the run before it is still significantly beyond the runs before
    that, in the change's direction: a creeping change is reported where it starts, not mid-ramp
    (where the largest |z| lies)."""
    direction = np.sign(np.mean(y[k:]) - np.mean(y[:k]))
    while k - 1 >= min_size:
        left, point = y[:k - 1], y[k - 1]
        sd = np.std(left, ddof=1)
        if sd <= 0:
            break
        t = direction * (point - left.mean()) / (sd * np.sqrt(1 + 1 / len(left)))
        if _t_sf(t, len(left) - 1) >= alpha:
            break
        k -= 1
        while allowed is not None and k - 1 >= min_size and not allowed[k]:
            k -= 1  # runs of one commit stay together
    return k


def scores(y: np.ndarray) -> np.ndarray:
    """The runs' normal scores (van der Waerden: the normal quantile of rank / (n + 1)): the rank family
    scans these, whose distribution under no change is the same whatever the noise's."""
    return special.ndtri(stats.rankdata(y) / (len(y) + 1))  # norm.ppf: ndtri


def heavy_tailed(y: np.ndarray, sigma: float, set_aside: bool = True) -> bool:
    """Whether the runs stray from their neighbours' median more often than normal noise would (at least
    FAR_RUNS runs and 1 % of them beyond 4 sigma; normal noise: about 0.02 % of runs), or jump from run to run more
    often than changes would (at least JUMPS and 2 % of the differences beyond 4 sigma sqrt 2: a regression
    and its fix make 2, four changes 4; a case whose median jumps between two modes, more)."""
    if len(y) < 5:
        return False
    if set_aside:  # a few bad runs (despike) are not heavy tails
        y = despike(y, sigma)
    r = np.abs(y - ndimage.median_filter(y, size=5, mode="mirror"))
    far = int(np.sum(r > 4 * sigma))
    jumps = int(np.sum(np.abs(np.diff(y)) > 4 * np.sqrt(2) * sigma))
    return far >= max(FAR_RUNS, 0.01 * len(y)) or jumps >= max(JUMPS, 0.02 * len(y))


def confirm_p(left: np.ndarray, right: np.ndarray, family: str) -> float:
    """Two-sided p of the runs before against the runs after: Student's t ("mean") or Mann-Whitney's U
    ("rank"), both scipy's."""
    if family == "rank":
        return float(stats.mannwhitneyu(left, right, alternative="two-sided").pvalue)
    if np.ptp(np.concatenate([left, right])) == 0:
        return 1.0
    p = _ttest_p(np.asarray(left, float), np.asarray(right, float))
    return p if np.isfinite(p) else 1.0


def _ttest_p(a: np.ndarray, b: np.ndarray) -> float:
    """scipy.stats.ttest_ind(a, b).pvalue (pooled variance, two-sided), the same figure by scipy's own steps
    (its variances as mean squared deviations times n / (n - 1), a side of one run at variance 0, then
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


def segment(y: np.ndarray, alpha: float = ALPHA, allowed: Optional[np.ndarray] = None,
            min_size: int = MIN_SIZE, family: str = "auto") -> list[Split]:
    """The changes of a series, in index order: binary segmentation by the scan (every segment at the
    strictness of the whole series, so the false alarms of the parts do not add up as the recursion goes
    deeper; the mean family once with sigma, once with each split's pooled spread), then each change
    confirmed against its neighbouring segments by its family's test."""
    if family not in FAMILIES:
        raise ValueError(f"family {family!r}: expected one of {', '.join(FAMILIES)}")
    y = np.asarray(y, float)
    n = len(y)
    if n < 2 * min_size:
        return []
    sigma_y = noise(y)
    clipped = clip_outliers(y, sigma_y)
    spiky = False  # a few bad runs made the series look heavy-tailed: mean family, each change confirmed by ranks too
    if family == "auto":
        family = "rank" if heavy_tailed(y, sigma_y) or spread(clipped) > NOT_NORMAL * sigma_y else "mean"
        spiky = family == "mean" and heavy_tailed(y, sigma_y, set_aside=False)
    z = scores(y) if family == "rank" else clipped
    if family == "rank":  # the scores' spread is known: the same for every order of the runs
        sigma = float(np.sqrt(np.mean(z ** 2)))
    else:  # runs in two bands, tails heavier than clipped: the runs' own spread
        sigma = max(noise(z), spread(z))
    found = bisect(z, clipped, sigma, alpha, allowed, min_size, rank=family == "rank")
    if family == "mean":  # and by each split's own spread (bands: the differences overstate the noise)
        for k, p in bisect(z, clipped, sigma, alpha, allowed, min_size, pooled=True).items():
            if all(abs(k - j) > 2 for j in found):
                found[k] = p
    bounds = refine(z, clipped, sorted(found), sigma, allowed, min_size, rank=family == "rank")
    found = _nearest_p(found, bounds)

    def p_of(s: int, k: int, e: int) -> float:
        return max(confirm_p(z[s:k], z[k:e], family), confirm_p(y[s:k], y[k:e], "rank") if spiky else 0.0)
    for _ in range(REPLACE_ROUNDS):
        kept, _ = confirmed(bounds, n, alpha, p_of)
        if kept == bounds or not kept:
            bounds = kept
            break
        # a change gone: its neighbours were placed against a part it cut; placed again between the changes left
        moved = refine(z, clipped, kept, sigma, allowed, min_size, rank=family == "rank")
        found = _nearest_p(found, moved)
        bounds = moved
        if moved == kept:
            break
    if family == "mean":  # the runs segmented by the two-band likelihood too
        first = bands.start(z)
        if bands_likely(z, bounds, first):
            banded = band_segment(z, sigma, alpha, allowed, min_size, first)
            if sorted(banded) != bounds and prefer_bands(z, bounds, sorted(banded), alpha, first):
                bounds, found = sorted(banded), banded
    return [Split(k, found[k]) for k in bounds]


def _nearest_p(found: dict[int, float], bounds: list[int]) -> dict[int, float]:
    """Each change of ``bounds`` with the smallest p found within 2 runs of it (a re-placed change keeps the
    p of the change it was), else the smallest p of all."""
    return {k: min((p for j, p in found.items() if abs(j - k) <= 2), default=min(found.values())) for k in bounds}


def confirmed(bounds: list[int], n: int, alpha: float, p_of: Callable[[int, int, int], float]
              ) -> tuple[list[int], list[float]]:
    """The changes that stand against their neighbouring segments, and their p: ``p_of(start, change, end)``
    for each change's window (window_of); the weakest goes while its p exceeds alpha, then its neighbours
    are tested again."""
    kept = list(bounds)
    while kept:
        ps = [p_of(*window_of(kept, i, n, WINDOW)) for i in range(len(kept))]
        worst = int(np.argmax(ps))
        if ps[worst] <= alpha:
            return kept, ps
        kept.pop(worst)
    return [], []


def bands_likely(z: np.ndarray, bounds: list[int], first: Optional[bands.Bands] = None) -> bool:
    """Whether z's runs about the plain scan's segments lie in two bands clearly enough to try the band model
    (half the evidence prefer_bands asks of the band detector's own segments). ``first``: bands.start(z)."""
    first = bands.fit(z, bounds, first or bands.start(z))
    return 2 * (bands.loglik(z, bounds, first) - bands.normal_loglik(z, bounds)) >= BAND_LR / 2


def prefer_bands(z: np.ndarray, plain: list[int], banded: list[int], alpha: float = ALPHA,
                 first: Optional[bands.Bands] = None) -> bool:
    """Whether the two-band detector's changes explain z better than the plain scan's: on its segments the
    two bands beat one normal by BAND_LR, and its two-band log-likelihood (each with its own band
    parameters) less a penalty per change of z*^2 / 2 is the higher, z* the scan's own threshold on a
    series this long (a change is worth what it would take to be found). ``first``: bands.start(z)."""
    first = first or bands.start(z)
    penalty = stats.norm.isf(alpha / (2 * neff(len(z)))) ** 2 / 2
    ll = bands.loglik(z, banded, first)
    if 2 * (ll - bands.normal_loglik(z, banded)) < BAND_LR:
        return False
    return ll - penalty * len(banded) > bands.loglik(z, plain, first) - penalty * len(plain)


def band_segment(z: np.ndarray, sigma: float, alpha: float = ALPHA, allowed: Optional[np.ndarray] = None,
                 min_size: int = MIN_SIZE, first: Optional[bands.Bands] = None) -> dict[int, float]:
    """The changes of z under noise in two bands (history/bands.py): {first run after a change: its p}.
    Binary segmentation by the band likelihood's best single change (p from its sqrt(2 log LR) as the
    scan's z), a window against the rest by the mean scan where no single change is significant (a
    regression and its fix); once with the band parameters of the runs about their 9-run median, again with
    those fitted on the first pass's segments; then each change confirmed against its neighbouring segments
    by the same likelihood, the weakest unconfirmed going first."""
    n = len(z)
    b = first or bands.start(z)
    found = _band_bisect(z, sigma, b, alpha, allowed, min_size)
    b = bands.fit(z, sorted(found), b)
    found = _band_bisect(z, sigma, b, alpha, allowed, min_size)

    def p_of(s: int, k: int, e: int) -> float:
        lr = bands.split_lr(z[s:e], np.array([k - s]), b)[0]
        return max(scan_p(float(np.sqrt(lr)), e - s, df=n - 3), confirm_p(z[s:k], z[k:e], "mean"),
                   confirm_p(z[s:k], z[k:e], "rank"))
    kept, ps = confirmed(sorted(found), n, alpha, p_of)
    return {k: max(found[k], p) for k, p in zip(kept, ps)}


def _band_bisect(z: np.ndarray, sigma: float, b: bands.Bands, alpha: float, allowed: Optional[np.ndarray],
                 min_size: int) -> dict[int, float]:
    """Binary segmentation by the band likelihood's best single change (its p: sqrt(2 log LR) as the scan's
    z, Student's tail on the series' n - 3 degrees of freedom: p, d and s are fitted), else the plain scan's
    best window (a regression and its fix that no single change explains)."""
    n = len(z)

    def cut(a: int, e: int, sub: Optional[np.ndarray]) -> Optional[tuple[float, list[int]]]:
        best = bands.step_scan(z[a:e], b, sub, min_size)
        p = 1.0 if best is None else scan_p(best[0], e - a, df=n - 3)
        if best is not None and p <= alpha:
            return p, [best[1]]
        window = scan(z[a:e], sigma, sub, min_size, steps=False)
        if window is None or window[2] is None:
            return None
        p = scan_p(window[0], e - a, df=0.4 * (n - 1))
        return (p, [window[1], window[2]]) if p <= alpha else None
    return _segmentation(n, allowed, cut)


def bisect(z: np.ndarray, clipped: np.ndarray, sigma: float, alpha: float, allowed: Optional[np.ndarray],
           min_size: int = MIN_SIZE, rank: bool = False, pooled: bool = False) -> dict[int, float]:
    """Binary segmentation by the scan: {first run after a change: its scan p}, each part at ``alpha``
    (``pooled``: each split scored by its own pooled spread, not sigma)."""
    n = len(z)

    def cut(a: int, b: int, sub: Optional[np.ndarray]) -> Optional[tuple[float, list[int]]]:
        seg, sig = z[a:b], sigma
        if rank and (a, b) != (0, n):  # a part's own scores: the whole series' spread wider than a level's
            seg = scores(seg)
            sig = float(np.sqrt(np.mean(seg ** 2)))
        best = scan(seg, sig, sub, min_size, pooled=pooled)
        if best is None:
            return None
        # sigma is the whole series' (its n - 1 differences): a part's tail keeps the whole series' degrees
        # of freedom (the pooled scan's spread is the part's own)
        p = scan_p(best[0], n if a == 0 and b == n else b - a, known_sigma=rank,
                   df=None if pooled else 0.4 * (n - 1))
        if p > alpha:
            return None
        _, k, end = best
        return p, [ramp_start(clipped[a:b], k, min_size, allowed=sub)] if end is None else [k, end]
    return _segmentation(n, allowed, cut)


def _segmentation(n: int, allowed: Optional[np.ndarray],
                  cut: Callable[[int, int, Optional[np.ndarray]], Optional[tuple[float, list[int]]]]) -> dict[int, float]:
    """Binary segmentation of runs 0..n-1: ``cut(a, b, allowed[a:b])`` gives a part's significant change(s)
    (its p and the cuts within the part) or None; each part between cuts is searched again. {first run
    after a change: the smallest p it was cut at}."""
    found: dict[int, float] = {}
    todo = [(0, n)]
    while todo:
        a, b = todo.pop()
        got = cut(a, b, None if allowed is None else allowed[a:b])
        if got is None:
            continue
        p, cuts = got
        for c in cuts:
            found[a + c] = min(p, found.get(a + c, 1.0))
        edges = [0] + cuts + [b - a]
        todo += [(a + lo, a + hi) for lo, hi in zip(edges[:-1], edges[1:])]
    return found


def refine(z: np.ndarray, clipped: np.ndarray, bounds: list[int], sigma: float, allowed: Optional[np.ndarray],
           min_size: int = MIN_SIZE, rank: bool = False) -> list[int]:
    """Each change re-placed between its neighbours (the step of largest |z| there, moved back to where a
    ramp starts): a change found against a part that held another change sits off by a run or two.
    ``rank``: the part's own normal scores (as bisect's parts)."""
    out = list(bounds)
    for i in range(len(out)):
        lo = out[i - 1] if i > 0 else 0
        hi = out[i + 1] if i + 1 < len(out) else len(z)
        sub = None if allowed is None else allowed[lo:hi]
        best = scan(scores(z[lo:hi]) if rank else z[lo:hi], sigma, sub, min_size, max_bump=0)
        if best is not None:
            out[i] = lo + ramp_start(clipped[lo:hi], best[1], min_size, allowed=sub)
    return sorted(set(out))


def window_of(bounds: Sequence[int], i: int, n: int, window: int) -> tuple[int, int, int]:
    """(start, change, end) of the runs the i-th change is measured on."""
    k = bounds[i]
    lo = bounds[i - 1] if i > 0 else 0
    hi = bounds[i + 1] if i + 1 < len(bounds) else n
    return max(lo, k - window), k, min(hi, k + window)


def within_var(samples: Optional[np.ndarray]) -> float:
    """The variance of the log of a run's median from its own samples: (pi / 2) s^2 / n with s the robust
    spread (1.4826 MAD) of the samples' logs (nan without samples)."""
    if samples is None or len(samples) < 2:
        return float("nan")
    logs = np.log(np.asarray(samples, float))
    s = 1.4826 * float(np.median(np.abs(logs - np.median(logs))))
    return np.pi / 2 * s ** 2 / len(logs)


def size(y: np.ndarray, start: int, k: int, end: int, within: Optional[np.ndarray] = None,
         confidence: float = CONFIDENCE) -> Size:
    """The change's size: exp(mean of y[k:end] - mean of y[start:k]) (y: log values per run) with a t
    interval from the runs' pooled spread about their side's mean. ``within[r]``: the variance of run r's
    value from its own samples; it floors the spread of a side with fewer than SPREAD_RUNS runs (too few
    to measure it), and is unused otherwise: runs measure their own noise, within-run sample noise
    included."""
    left, right = np.asarray(y[start:k], float), np.asarray(y[k:end], float)
    if len(left) == 0 or len(right) == 0:
        return Size(float("nan"), float("nan"), float("nan"))
    diff = float(right.mean() - left.mean())
    df = len(left) + len(right) - 2
    if df < 1:
        return Size(float(np.exp(diff)), 0.0, float("inf"))
    var = (np.sum((left - left.mean()) ** 2) + np.sum((right - right.mean()) ** 2)) / df
    if within is not None and min(len(left), len(right)) < SPREAD_RUNS:
        w = np.asarray(within[start:end], float)
        if np.isfinite(w).any():
            var = max(var, float(np.nanmean(w)))
    half = stats.t.ppf(0.5 + confidence / 2, df) * np.sqrt(var * (1 / len(left) + 1 / len(right)))
    return Size(float(np.exp(diff)), float(np.exp(diff - half)), float(np.exp(diff + half)))
