"""Change points in a series of runs, on arrays, judged by the series' own run-to-run noise: the detector's
steps, its thresholds and its decisions; the statistics it takes (the scan and its p, robust noise, rank and
t tests, the two-band likelihood, the interval of a size) are xlabench.stats'.

The detector step by step (noise, outliers, scan, place, confirm, bands, size) and its figures:
docs/history.md, Change points.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np

from xlabench.history import ALPHA
from xlabench.stats import bands
from xlabench.stats.changepoint import neff, scan, scan_p
from xlabench.stats.rank import mannwhitney_p, normal_scores
from xlabench.stats.robust import clip_outliers, despike, noise, running_median, spread
from xlabench.stats.ttest import norm_isf, point_p, shift_interval, ttest_p

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


@dataclass(frozen=True)
class Split:
    index: int   # first run after the change
    p: float     # the scan's p-value (the largest |z| of its segment, corrected for the splits and windows tried)


@dataclass(frozen=True)
class Size:
    ratio: float  # geometric mean after / before (a time: > 1 is slower)
    low: float
    high: float


def ramp_start(y: np.ndarray, k: int, min_size: int = MIN_SIZE, alpha: float = RAMP_ALPHA,
               allowed: Optional[np.ndarray] = None) -> int:
    """Move a change at k back while the run before it is still significantly beyond the runs before
    that, in the change's direction: a creeping change is reported where it starts, not mid-ramp
    (where the largest |z| lies)."""
    direction = np.sign(np.mean(y[k:]) - np.mean(y[:k]))
    while k - 1 >= min_size:
        if point_p(y[:k - 1], y[k - 1], direction) >= alpha:
            break
        k -= 1
        while allowed is not None and k - 1 >= min_size and not allowed[k]:
            k -= 1  # runs of one commit stay together
    return k


def heavy_tailed(y: np.ndarray, sigma: float, set_aside: bool = True) -> bool:
    """Whether the runs stray from their neighbours' median more often than normal noise would (at least
    FAR_RUNS runs and 1 % of them beyond 4 sigma; normal noise: about 0.02 % of runs), or jump from run to run more
    often than changes would (at least JUMPS and 2 % of the differences beyond 4 sigma sqrt 2: a regression
    and its fix make 2, four changes 4; a case whose median jumps between two modes, more)."""
    if len(y) < 5:
        return False
    if set_aside:  # a few bad runs (despike) are not heavy tails
        y = despike(y, sigma)
    r = np.abs(y - running_median(y))
    far = int(np.sum(r > 4 * sigma))
    jumps = int(np.sum(np.abs(np.diff(y)) > 4 * np.sqrt(2) * sigma))
    return far >= max(FAR_RUNS, 0.01 * len(y)) or jumps >= max(JUMPS, 0.02 * len(y))


def confirm_p(left: np.ndarray, right: np.ndarray, family: str) -> float:
    """Two-sided p of the runs before against the runs after: Student's t ("mean") or Mann-Whitney's U
    ("rank"), both scipy's figures."""
    if family == "rank":
        return mannwhitney_p(left, right)
    if np.ptp(np.concatenate([left, right])) == 0:
        return 1.0
    p = ttest_p(np.asarray(left, float), np.asarray(right, float))
    return p if np.isfinite(p) else 1.0


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
    z = normal_scores(y) if family == "rank" else clipped
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
    penalty = norm_isf(alpha / (2 * neff(len(z)))) ** 2 / 2
    ll = bands.loglik(z, banded, first)
    if 2 * (ll - bands.normal_loglik(z, banded)) < BAND_LR:
        return False
    return ll - penalty * len(banded) > bands.loglik(z, plain, first) - penalty * len(plain)


def band_segment(z: np.ndarray, sigma: float, alpha: float = ALPHA, allowed: Optional[np.ndarray] = None,
                 min_size: int = MIN_SIZE, first: Optional[bands.Bands] = None) -> dict[int, float]:
    """The changes of z under noise in two bands (stats/bands.py): {first run after a change: its p}.
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
        window = scan(z[a:e], sigma, sub, min_size, MAX_BUMP, steps=False)
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
            seg = normal_scores(seg)
            sig = float(np.sqrt(np.mean(seg ** 2)))
        best = scan(seg, sig, sub, min_size, MAX_BUMP, pooled=pooled)
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
        best = scan(normal_scores(z[lo:hi]) if rank else z[lo:hi], sigma, sub, min_size, max_bump=0)
        if best is not None:
            out[i] = lo + ramp_start(clipped[lo:hi], best[1], min_size, allowed=sub)
    return sorted(set(out))


def window_of(bounds: Sequence[int], i: int, n: int, window: int) -> tuple[int, int, int]:
    """(start, change, end) of the runs the i-th change is measured on."""
    k = bounds[i]
    lo = bounds[i - 1] if i > 0 else 0
    hi = bounds[i + 1] if i + 1 < len(bounds) else n
    return max(lo, k - window), k, min(hi, k + window)


def size(y: np.ndarray, start: int, k: int, end: int, within: Optional[np.ndarray] = None,
         confidence: float = CONFIDENCE) -> Size:
    """The change's size: exp(mean of y[k:end] - mean of y[start:k]) (y: log values per run) with a t
    interval from the runs' pooled spread about their side's mean. ``within[r]``: the variance of run r's
    value from its own samples (stats.robust.log_median_var); it floors the spread of a side with fewer
    than SPREAD_RUNS runs (too few to measure it), and is unused otherwise: runs measure their own noise,
    within-run sample noise included."""
    left, right = np.asarray(y[start:k], float), np.asarray(y[k:end], float)
    var_floor = None
    if within is not None and min(len(left), len(right)) < SPREAD_RUNS:
        w = np.asarray(within[start:end], float)
        if np.isfinite(w).any():
            var_floor = float(np.nanmean(w))
    diff, low, high = shift_interval(left, right, confidence, var_floor)
    return Size(float(np.exp(diff)), float(np.exp(low)), float(np.exp(high)))
