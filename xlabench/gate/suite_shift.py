"""The suite-wide verdict, on arrays: the shift shared by a comparison's cases (Wilcoxon signed-rank, a
two-level bootstrap of the geometric-mean ratio) and the host's own change of speed (compile times); the
statistics themselves are xlabench.stats'."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np

from xlabench.gate.assessment import seed_key, untestable
from xlabench.gate.config import CONFOUNDED, GateConfig, IMPROVEMENT, INCONCLUSIVE, REGRESSION, UNCHANGED
from xlabench.stats.bootstrap import geomean_interval, log_ratios, paired_geomean_interval
from xlabench.stats.power import smallest_signed_rank_p
from xlabench.stats.rank import signed_rank_p


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


Interval = tuple[tuple[float, float, float], np.random.Generator]


def suite_interval(pairs: Sequence[tuple[np.ndarray, np.ndarray]], cfg: GateConfig,
                   case_ids: Sequence[str]) -> Interval:
    """The geometric mean's interval over the pairs, and its generator (seeded by the case ids) as it leaves it."""
    rng = np.random.default_rng([cfg.seed, seed_key("suite:" + ",".join(case_ids))])
    return geomean_interval(pairs, cfg.metric_info.statistic, cfg.confidence, cfg.n_resamples, rng), rng


class EarlyInterval:
    """suite_interval over the pairs ``assess`` will give a ratio (``untestable``), taken in a thread while
    the cases are judged: it draws from its own generator, so its numbers are those taken after; numpy's
    resampling lets go of the GIL (a 2-core host: the compare of two 144-row attention runs, 9999 resamples,
    3.8 -> 2.9-3.2 s, loaded). ``result`` is the interval where the same cases reached the statistics, else None."""

    def __init__(self, pairs: Sequence[tuple[np.ndarray, np.ndarray]], cfg: GateConfig, case_ids: Sequence[str]):
        self.idx = [i for i, (b, c) in enumerate(pairs)
                    if not untestable(np.asarray(b, dtype=float), np.asarray(c, dtype=float), cfg)]
        self._out: list[Interval] = []
        args = ([pairs[i] for i in self.idx], cfg, [case_ids[i] for i in self.idx])
        self._thread = threading.Thread(target=lambda: self._out.append(suite_interval(*args)), daemon=True)
        if len(self.idx) >= 2:
            self._thread.start()

    def result(self, idx: Sequence[int]) -> Optional[Interval]:
        if list(idx) != self.idx or len(idx) < 2:
            return None
        self._thread.join()
        return self._out[0] if self._out else None


def assess_suite(pairs: Sequence[tuple[np.ndarray, np.ndarray]], cfg: GateConfig,
                 compile_times: Optional[tuple[np.ndarray, np.ndarray]] = None,
                 case_ids: Sequence[str] = (), interval: Optional[Interval] = None) -> Optional[SuiteShift]:
    """The suite-wide verdict over the tested cases' (baseline, candidate) values; None under 2 cases.

    regression: the signed-rank p <= alpha and the geometric-mean interval wholly beyond the threshold
    the bad way; improvement likewise the good way; confounded instead of regression when the compile
    times' interval (``compile_times``: per case baseline and candidate seconds) lies wholly beyond the
    threshold the same way (the host slowed down by as much: two runs cannot tell that from the code);
    inconclusive when the number of cases cannot reach p <= alpha. ``interval``: suite_interval's, if taken.
    """
    m = len(pairs)
    if m < 2:
        return None
    metric = cfg.metric_info
    hib, t = metric.higher_is_better, cfg.threshold
    d = log_ratios(pairs, metric.statistic)
    (g, lo, hi), rng = interval or suite_interval(pairs, cfg, case_ids)
    p = signed_rank_p(d)
    worse_d = -d if hib else d
    kw: dict[str, Any] = dict(n_cases=m, n_worse=int(np.sum(worse_d > 0)), n_better=int(np.sum(worse_d < 0)),
                              ratio=g, ci_low=lo, ci_high=hi, p_value=p, case_ids=tuple(case_ids))
    # Compiling is host work the timed code does not do, measured in the same worker minutes apart from the
    # timing: when the host is shared, its slowdown shows in compile times as in run times (measured here:
    # log correlation 0.99 over 32 runs whose speed varied 1.7x with the load). None under 2 cases with both.
    host = (paired_geomean_interval(*compile_times, cfg.confidence, cfg.n_resamples, rng) if compile_times
            else None)
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
