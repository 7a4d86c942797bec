"""Suite-wide statistics on arrays: the shift shared by a comparison's cases (Wilcoxon signed-rank, a two-level bootstrap of the geometric-mean ratio) and the host's own change of speed (compile times)."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np
from scipy import stats

from xlabench.gate.config import (
    CONFOUNDED, GateConfig, IMPROVEMENT, INCONCLUSIVE, REGRESSION, STATISTICS, UNCHANGED,
)
from xlabench.gate.resample import Resampled
from xlabench.gate.stats import seed_key


# Pure functions on arrays: the shift shared by a comparison's cases, and the host's speed probe.


def log_ratios(pairs: Sequence[tuple[np.ndarray, np.ndarray]], statistic: str) -> np.ndarray:
    """Per case log(stat(candidate) / stat(baseline))."""
    f = STATISTICS[statistic]
    return np.array([math.log(float(f(np.asarray(c, dtype=float))) / float(f(np.asarray(b, dtype=float))))
                     for b, c in pairs])


def smallest_signed_rank_p(m: int) -> float:
    """The smallest two-sided exact Wilcoxon signed-rank p over m nonzero differences: all of one sign."""
    return min(1.0, 2.0 / 2.0 ** m) if m > 0 else 1.0


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


def geomean_interval(pairs: Sequence[tuple[np.ndarray, np.ndarray]], statistic: str, confidence: float,
                     n_resamples: int, rng: np.random.Generator) -> tuple[float, float, float]:
    """(geometric mean over cases of stat(c) / stat(b), percentile interval low, high).

    Two-level bootstrap: each replicate draws the cases with replacement and, for every case drawn,
    its baseline and candidate samples with replacement, so the interval holds both the spread between
    cases and each case's own sampling noise. It cannot hold the drift shared by every case of a run
    (the machine's speed): see machine_shift.
    """
    f = STATISTICS[statistic]
    m = len(pairs)
    reps = np.empty((m, n_resamples))  # per case: bootstrap replicates of its log ratio
    for i, (b, c) in enumerate(pairs):
        rb, rc = Resampled(b, f), Resampled(c, f)  # f(b[idx], axis=-1), the median without its partition
        nb, nc = len(rb.x), len(rc.x)
        step = max(1, int(4_000_000 // (nb + nc)))  # bound memory for long runs
        for lo in range(0, n_resamples, step):
            k = min(step, n_resamples - lo)
            sb = rb.draw(rng, k)  # the baseline's resamples first
            reps[i, lo:lo + k] = np.log(rc.draw(rng, k) / sb)
    cases = rng.integers(0, m, (n_resamples, m))
    draws = rng.integers(0, n_resamples, (n_resamples, m))  # an independent inner draw per case drawn
    means = reps[cases, draws].mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(means, [tail, 100 - tail])
    return float(math.exp(log_ratios(pairs, statistic).mean())), float(math.exp(lo)), float(math.exp(hi))


def machine_shift(base_s: np.ndarray, cand_s: np.ndarray, confidence: float, n_resamples: int,
                  rng: np.random.Generator) -> Optional[tuple[float, float, float]]:
    """Geometric mean over cases of candidate / baseline compile time, with a percentile bootstrap
    interval over cases; None with fewer than 2 cases that have both times.

    Compiling is host work the timed code does not do, measured in the same worker minutes apart
    from the timing: when the host is shared, its slowdown shows in compile times as in run times
    (measured here: log correlation 0.99 over 32 runs whose speed varied 1.7x with the load).
    """
    b, c = np.asarray(base_s, dtype=float), np.asarray(cand_s, dtype=float)
    ok = np.isfinite(b) & np.isfinite(c) & (b > 0) & (c > 0)
    d = np.log(c[ok] / b[ok])
    if len(d) < 2:
        return None
    if np.all(d == d[0]):
        g = float(math.exp(d[0]))
        return g, g, g
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = stats.bootstrap((d,), np.mean, vectorized=True, method="percentile", confidence_level=confidence,
                              n_resamples=n_resamples, rng=rng)
    return (float(math.exp(d.mean())), float(math.exp(res.confidence_interval.low)),
            float(math.exp(res.confidence_interval.high)))


@dataclass(frozen=True)
class SuiteShift:
    """The suite-wide test of a comparison: one line in every output."""

    verdict: str
    reason: str
    n_cases: int = 0
    n_worse: int = 0            # cases whose ratio is worse than 1 (slower; lower throughput)
    n_better: int = 0
    ratio: Optional[float] = None    # geometric mean over cases of candidate / baseline
    ci_low: Optional[float] = None
    ci_high: Optional[float] = None
    p_value: Optional[float] = None  # Wilcoxon signed-rank over the cases' log ratios, two-sided
    machine_ratio: Optional[float] = None  # geometric mean of candidate / baseline compile time
    machine_low: Optional[float] = None
    machine_high: Optional[float] = None
    calib_ratio: Optional[float] = None    # geometric mean of candidate / baseline host_calib_s (the calibration kernel)
    case_ids: tuple[str, ...] = ()
    confirmation: Optional["SuiteShift"] = None  # gate's re-run of the suite


def assess_suite(pairs: Sequence[tuple[np.ndarray, np.ndarray]], cfg: GateConfig,
                 compile_times: Optional[tuple[np.ndarray, np.ndarray]] = None,
                 case_ids: Sequence[str] = ()) -> Optional[SuiteShift]:
    """The suite-wide verdict over the tested cases' (baseline, candidate) values; None under 2 cases.

    regression: the signed-rank p <= alpha and the geometric-mean interval wholly beyond the threshold
    the bad way; improvement likewise the good way; confounded instead of regression when the compile
    times' interval (``compile_times``: per case baseline and candidate seconds) lies wholly beyond the
    threshold the same way (the host slowed down by as much: two runs cannot tell that from the code);
    inconclusive when the number of cases cannot reach p <= alpha.
    """
    m = len(pairs)
    if m < 2:
        return None
    metric = cfg.metric_info
    hib, t = metric.higher_is_better, cfg.threshold
    d = log_ratios(pairs, metric.statistic)
    rng = np.random.default_rng([cfg.seed, seed_key("suite:" + ",".join(case_ids))])
    g, lo, hi = geomean_interval(pairs, metric.statistic, cfg.confidence, cfg.n_resamples, rng)
    p = signed_rank_p(d)
    worse_d = -d if hib else d
    kw: dict[str, Any] = dict(n_cases=m, n_worse=int(np.sum(worse_d > 0)), n_better=int(np.sum(worse_d < 0)),
                              ratio=g, ci_low=lo, ci_high=hi, p_value=p, case_ids=tuple(case_ids))
    host = machine_shift(*compile_times, cfg.confidence, cfg.n_resamples, rng) if compile_times else None
    if host is not None:
        kw.update(machine_ratio=host[0], machine_low=host[1], machine_high=host[2])
    worse = lo > 1 + t if not hib else hi < 1 - t
    better = hi < 1 - t if not hib else lo > 1 + t
    if smallest_signed_rank_p(m) > cfg.alpha:
        return SuiteShift(INCONCLUSIVE, f"{m} cases cannot reach significance across cases "
                                        f"(smallest p {smallest_signed_rank_p(m):.2g} > {cfg.alpha:g})", **kw)
    if p > cfg.alpha and (worse or better):  # the interval says shifted, the test does not: neither is shown
        return SuiteShift(INCONCLUSIVE, f"not significant across cases (p {p:.2g} > {cfg.alpha:g}), but the "
                                        f"geometric mean's interval lies wholly beyond the {t:.0%} threshold "
                                        f"({'slower' if worse else 'faster'})", **kw)
    if p > cfg.alpha:
        return SuiteShift(UNCHANGED, "no shift across cases", **kw)
    if not (worse or better):
        return SuiteShift(UNCHANGED, f"significant, but the interval reaches within the {t:.0%} threshold", **kw)
    # Compile times are seconds (lower is better) whatever the metric; slower host = slower cases.
    host_slower = host is not None and host[1] > 1 + t
    host_faster = host is not None and host[2] < 1 - t
    if worse and host_slower:
        return SuiteShift(CONFOUNDED, f"beyond the {t:.0%} threshold, but compile times moved as much "
                                      f"({host[0]:.2f}x [{host[1]:.2f}, {host[2]:.2f}]): the host slowed down; "
                                      "two runs cannot tell that from the code", **kw)
    if better and host_faster:
        return SuiteShift(INCONCLUSIVE, f"beyond the {t:.0%} threshold, but compile times moved as much "
                                        f"({host[0]:.2f}x): the host sped up", **kw)
    why = f"significant, interval beyond the {t:.0%} threshold"
    if host is None:
        why += " (no compile times to check the host's speed)"
    return SuiteShift(REGRESSION if worse else IMPROVEMENT, why, **kw)
