"""One case's verdict, on arrays: the samples a case needs to be judged, and its two-stage assessment
(Mann-Whitney U after Holm, then the bootstrap interval of the ratio beyond the threshold); the statistics
themselves are xlabench.stats'."""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np

from xlabench.gate.config import GateConfig, IMPROVEMENT, INCONCLUSIVE, REGRESSION, UNCHANGED, UNDERPOWERED
from xlabench.stats.bootstrap import WORKERS, ratio_intervals
from xlabench.stats.multiple import holm
from xlabench.stats.power import min_samples_per_side
from xlabench.stats.rank import mannwhitney_p, smallest_p
from xlabench.stats.summary import STATISTICS


@dataclass(frozen=True)
class Assessment:
    """The statistics of one case and what they mean."""

    verdict: str
    reason: str
    n_base: int = 0
    n_cand: int = 0
    baseline: Optional[float] = None   # the metric's statistic (median or mean) over the samples
    candidate: Optional[float] = None
    ratio: Optional[float] = None      # candidate / baseline
    ci_low: Optional[float] = None
    ci_high: Optional[float] = None
    p_value: Optional[float] = None    # Mann-Whitney U, two-sided
    p_holm: Optional[float] = None     # Holm-adjusted over the comparison's tested cases


def seed_key(key: str) -> int:
    return zlib.crc32(key.encode())


def samples_needed(cfg: GateConfig, compared: int) -> int:
    """Samples per side a case needs to be judged among ``compared`` cases: at least ``min_samples`` (the
    test's floor), and enough to reach significance after Holm over them all."""
    return max(cfg.min_samples, min_samples_per_side(cfg.alpha, max(1, compared)))


TOO_FEW = "too few samples"


def untestable(b: np.ndarray, c: np.ndarray, cfg: GateConfig) -> Optional[str]:
    """Why assess gives the pair no statistics (TOO_FEW: fewer than min_samples on a side), or None: it
    takes the pair's ratio and interval."""
    if len(b) < cfg.min_samples or len(c) < cfg.min_samples:
        return TOO_FEW
    f = STATISTICS[cfg.metric_info.statistic]
    if not (float(f(b)) > 0 and float(f(c)) > 0 and np.all(np.isfinite(b)) and np.all(np.isfinite(c))):
        return "non-positive or non-finite values"
    return None


def assess(pairs: Sequence[tuple[np.ndarray, np.ndarray]], cfg: GateConfig,
           keys: Optional[Sequence[str]] = None, workers: int = WORKERS) -> list[Assessment]:
    """Judge each (baseline values, candidate values) pair of the metric; Holm runs over all of them.

    ``keys`` (e.g. case ids) seed each pair's bootstrap, so the same data gives the same verdict;
    ``workers``: threads drawing the intervals' replicates (the same numbers with any).
    """
    metric = cfg.metric_info
    f = STATISTICS[metric.statistic]
    keys = list(keys) if keys is not None else [str(i) for i in range(len(pairs))]
    out: list[Optional[Assessment]] = [None] * len(pairs)
    tested: list[int] = []
    raw: dict[int, dict[str, Any]] = {}
    jobs: list[tuple[np.ndarray, np.ndarray, np.random.Generator]] = []
    need = samples_needed(cfg, len(pairs))
    for i, (b, c) in enumerate(pairs):
        b = np.asarray(b, dtype=float)
        c = np.asarray(c, dtype=float)
        n = dict(n_base=len(b), n_cand=len(c))
        if why := untestable(b, c, cfg):
            out[i] = Assessment(INCONCLUSIVE, why if why != TOO_FEW else
                                f"too few samples ({len(b)} baseline, {len(c)} candidate; need >= {need} each)", **n)
            continue
        bs, cs = float(f(b)), float(f(c))
        jobs.append((b, c, np.random.default_rng([cfg.seed, seed_key(keys[i])])))
        p = mannwhitney_p(b, c)
        raw[i] = dict(**n, baseline=bs, candidate=cs, ratio=cs / bs, p_value=1.0 if math.isnan(p) else p)
        tested.append(i)
    for i, (lo, hi) in zip(tested, ratio_intervals(jobs, metric.statistic, cfg.confidence, cfg.n_resamples, workers)):
        raw[i].update(ci_low=lo, ci_high=hi)
    adjusted = holm([raw[i]["p_value"] for i in tested])
    m = len(tested)
    for i, p_holm in zip(tested, adjusted):
        r = raw[i]
        verdict, reason = _decide(r, float(p_holm), m, cfg)
        out[i] = Assessment(verdict, reason, p_holm=float(p_holm), **r)
    return [a for a in out if a is not None]


def _decide(r: dict[str, Any], p_holm: float, m: int, cfg: GateConfig) -> tuple[str, str]:
    """The two-stage rule for one tested case (the reason leaves the numbers to the ratio fields)."""
    t, hib = cfg.threshold, cfg.metric_info.higher_is_better
    lo, hi = r["ci_low"], r["ci_high"]
    worse = lo > 1 + t if not hib else hi < 1 - t
    better = hi < 1 - t if not hib else lo > 1 + t
    if p_holm > cfg.alpha:
        p_min = smallest_p(r["n_base"], r["n_cand"])
        if p_min > cfg.alpha / m:
            why = (f"{r['n_base']} vs {r['n_cand']} samples cannot reach significance over {m} case(s) "
                   f"(smallest p {p_min:.2g} > {cfg.alpha:g}/{m}; need >= {min_samples_per_side(cfg.alpha, m)} "
                   "per side)")
            if worse:
                return UNDERPOWERED, f"{why}, but the interval lies wholly beyond the {t:.0%} threshold: time more iterations"
            return INCONCLUSIVE, f"{why}; time more iterations"
        if worse or better:  # the interval says changed, the test does not: neither verdict is shown
            return INCONCLUSIVE, (f"not significant after Holm over {m} case(s) (p {p_holm:.2g} > {cfg.alpha:g}), "
                                  f"but the interval lies wholly beyond the {t:.0%} threshold "
                                  f"({'slower' if worse else 'faster'}): time more iterations, or re-run")
        return UNCHANGED, "not significant"
    if worse or better:
        return (REGRESSION if worse else IMPROVEMENT), f"significant, interval beyond the {t:.0%} threshold"
    return UNCHANGED, f"significant, but the interval reaches within the {t:.0%} threshold"
