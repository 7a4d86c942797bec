"""Baseline vs candidate: pair the cases, test each change, give verdicts a CI gate can trust.

Two runs of the same code differ (load, clocks, caches), and with enough samples any test calls
such a drift "significant": the tests below see only the spread within each run and treat its
samples as independent, which load that changes over seconds makes untrue. So, as criterion.rs
does, a change must pass two stages to count (and ``gate`` re-runs what is flagged):

1. **significant**: a two-sided Mann-Whitney U test on the raw per-iteration samples (no normality
   assumed; heavy tails and outliers do not dominate it), its p-values corrected with Holm's
   step-down method over every case of the comparison, so the chance of any false alarm in a
   whole suite stays <= alpha however many cases it has;
2. **large**: the bootstrap confidence interval of the ratio of medians (candidate / baseline; the
   metric's statistic, the median by default) lies wholly beyond the threshold: for a time metric its lower bound is above 1 + threshold
   (regression) or its upper bound below 1 - threshold (improvement); for a higher-is-better metric
   (TFLOP/s, MFU, GB/s, ...) the other way round.

Otherwise a case is ``unchanged``, or ``inconclusive`` when it has too few samples to ever reach
significance, ``underpowered`` when it cannot reach significance but its interval lies wholly beyond
the threshold the bad way (that fails as "could not judge", exit 3, unless allowed).

The **suite-wide test** takes the paired cases together: per case the log of the ratio of the
statistic; a Wilcoxon signed-rank test across cases, and the geometric mean of the ratios with a
two-level bootstrap interval (resampling cases, then each case's samples). A shift shared by many
cases is caught so even when no single case has the samples to be significant. Cases of one run
share that run's machine speed, so two runs taken under different load differ by a shift of every
case: the suite-wide shift is checked against the shift of the cases' compile times (a probe of the
host's speed the timed code does not touch); a shift the machine's own slowdown can explain is
``confounded`` (could not judge), not a regression (docs/gate.md has the A/A measurements).

Defaults (see GateConfig and docs/gate.md):

* threshold 5%: the smallest slowdown worth failing a build for; it must exceed the runner's
  run-to-run drift, which benchmarks/gate_quality.py measures (on a shared CPU: raise it);
* alpha 0.05 family-wise (Holm): at most a 5% chance per comparison that any case is a false
  significant change; the threshold stage and ``gate``'s re-run cut the false-alarm rate far lower;
* confidence 0.95 for the interval: the bound used in stage 2 is a one-sided 97.5% bound;
* min_samples 5: with fewer, the median is not one of the samples and the bootstrap has too few
  distinct resamples to give an interval (and 3 vs 3 samples cannot reach p < 0.05 at all).

Pure functions on DataFrames and arrays: no CLI, no printing, no framework.
"""

from __future__ import annotations

import csv
import functools
import math
import warnings
import zlib
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence

import numpy as np
from scipy import stats

from xlabench import results
from xlabench.results import ResultsFileError

# Verdicts. REGRESSION and FAILED fail the gate; the rest are reported.
REGRESSION = "regression"
IMPROVEMENT = "improvement"
UNCHANGED = "unchanged"
INCONCLUSIVE = "inconclusive"
UNDERPOWERED = "underpowered"  # too few samples to be significant, but the interval is wholly beyond the threshold
CONFOUNDED = "confounded"      # suite-wide only: a shift the machine's own change of speed can explain
UNCONFIRMED = "unconfirmed"  # flagged as a regression, not reproduced by gate's re-run
FAILED = "failed"            # the candidate case failed or gave a wrong result
NEW = "new"                  # no baseline measurement for the case
MISSING = "missing"          # in the baseline only
SKIPPED = "skipped"          # the candidate skipped the case
VERDICTS = (REGRESSION, FAILED, UNDERPOWERED, UNCONFIRMED, IMPROVEMENT, UNCHANGED, INCONCLUSIVE, NEW, MISSING,
            SKIPPED)
FAILING = (REGRESSION, FAILED)
UNJUDGED = (INCONCLUSIVE, UNDERPOWERED)  # "could not judge": listed in every summary
UNJUDGED_FAILING = (UNDERPOWERED, CONFOUNDED)  # exit 3 unless GateConfig.allow_inconclusive

# Exit codes shared by `compare` and `gate`.
EXIT_PASS, EXIT_FAIL, EXIT_BAD_INPUT, EXIT_UNJUDGED = 0, 1, 2, 3


class GateInputError(Exception):
    """The two files cannot be compared as given (message is user-facing; the CLI exits 2)."""


class EnvMismatchError(GateInputError):
    """Baseline and candidate ran on different device kinds or framework versions."""


# ------------------------------------------------------------------------------------------ metrics


@dataclass(frozen=True)
class Metric:
    """A column the gate can compare, and how to get its value for every timed iteration."""

    name: str
    unit: str
    higher_is_better: bool
    statistic: str  # a key of STATISTICS: what summarises the per-iteration values

    def per_iteration(self, row: dict[str, Any], seconds: np.ndarray) -> Optional[np.ndarray]:
        """Values of the metric per timed iteration, or None when the row lacks the metric.

        Time metrics are the seconds themselves. Every throughput metric in the schema is
        ``something / median_s`` (metrics.derive), so per iteration it is ``row value * median_s / s``.
        """
        if not self.higher_is_better:
            return seconds
        value, median = _num(row.get(self.name)), _num(row.get("median_s"))
        if value is None or median is None or value <= 0 or median <= 0:
            return None
        return value * median / seconds


def _p10(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.percentile(x, 10, axis=axis)


# Summaries of per-iteration values (vectorised over ``axis`` for the bootstrap).
STATISTICS: dict[str, Callable[..., Any]] = {"median": np.median, "mean": np.mean, "p10": _p10}

METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("median_s", "s", False, "median"),
    Metric("mean_s", "s", False, "mean"),
    # Contention on a shared host only ever adds time: a low quantile tracks the uncontended speed.
    Metric("p10_s", "s", False, "p10"),
    Metric("tflops_per_s", "TFLOP/s", True, "median"),
    Metric("mfu", "", True, "median"),
    Metric("gbytes_per_s", "GB/s", True, "median"),
    Metric("mbu", "", True, "median"),
    Metric("tokens_per_s", "tokens/s", True, "median"),
)}


@dataclass(frozen=True)
class GateConfig:
    """How changes are judged. Defaults are justified in the module docstring and docs/gate.md."""

    metric: str = "median_s"
    threshold: float = 0.05
    alpha: float = 0.05
    confidence: float = 0.95
    min_samples: int = 5
    n_resamples: int = 9999
    seed: int = 0
    allow_env_mismatch: bool = False
    allow_inconclusive: bool = False  # "could not judge" (underpowered cases, a confounded suite shift) exits 0

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise ValueError(f"unknown metric {self.metric!r}; expected one of {', '.join(METRICS)}")
        for name in ("threshold", "alpha", "confidence"):
            v = getattr(self, name)
            if not 0 < v < 1:
                raise ValueError(f"{name} must be between 0 and 1 (exclusive), got {v}")
        if self.min_samples < 2:
            raise ValueError(f"min_samples must be >= 2, got {self.min_samples}")
        if self.n_resamples < 100:
            raise ValueError(f"n_resamples must be >= 100, got {self.n_resamples}")

    @property
    def metric_info(self) -> Metric:
        return METRICS[self.metric]


# --------------------------------------------------------------------------------------- statistics


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm step-down adjusted p-values: reject where adjusted <= alpha (family-wise error <= alpha)."""
    p = np.asarray(p_values, dtype=float)
    m = len(p)
    if m == 0:
        return p
    order = np.argsort(p, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adjusted
    return out


@functools.lru_cache(maxsize=None)
def smallest_p(n_base: int, n_cand: int) -> float:
    """The smallest two-sided Mann-Whitney p-value these sample sizes can give (fully separated)."""
    return float(stats.mannwhitneyu(np.arange(n_base), np.arange(n_base, n_base + n_cand)).pvalue)


@functools.lru_cache(maxsize=None)
def min_samples_per_side(alpha: float, m: int) -> int:
    """The smallest n for which n vs n samples can make one case significant after Holm over m cases.

    Holm rejects the most significant of m cases when its p <= alpha / m; the smallest two-sided
    Mann-Whitney p of n vs n samples is that of completely separated samples, computed exactly
    (2 / C(2n, n)). alpha 0.05: 4 per side for 1 case, 5 for 2-6, 6 for 7-23, 7 for 24-85 (the
    attention suite's 48 cpu cases), 8 for 86-321, 9 for 322-1215.
    """
    if not 0 < alpha < 1 or m < 1:
        raise ValueError(f"need 0 < alpha < 1 and m >= 1, got alpha={alpha}, m={m}")
    n = 2
    while float(stats.mannwhitneyu(np.arange(n), np.arange(n, 2 * n), method="exact").pvalue) > alpha / m:
        n += 1
    return n


def sample_shortfall(samples_per_case: Sequence[int], alpha: float = GateConfig.alpha) -> Optional[tuple[int, int]]:
    """(fewest samples a case gets, samples needed per side) when a suite's cases cannot all reach
    significance after Holm over its case count; None when they can (or there are no cases)."""
    if not samples_per_case:
        return None
    need = min_samples_per_side(alpha, len(samples_per_case))
    have = min(samples_per_case)
    return (have, need) if have < need else None


def shortfall_message(where: str, n_cases: int, have: int, need: int) -> str:
    """The warning `validate`, `run` and `gate` print for sample_shortfall()."""
    return (f"{where}: {have} sample(s) per case (measure.iters x measure.repeats), but `compare`/`gate` need "
            f">= {need} per side for any of its {n_cases} case(s) to reach significance after Holm "
            f"(alpha {GateConfig.alpha:g}); with fewer every case is 'could not judge'. Set measure.iters >= "
            f"{need} (`xlabench gate` raises it for its own runs; see docs/gate.md)")


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


def _seed_key(key: str) -> int:
    return zlib.crc32(key.encode())


def _ratio_interval(base: np.ndarray, cand: np.ndarray, statistic: str, confidence: float,
                    n_resamples: int, rng: np.random.Generator) -> tuple[float, float]:
    """Percentile bootstrap CI of stat(cand) / stat(base), resampling each side independently.

    Percentile, not BCa: BCa's acceleration comes from a jackknife, which is inconsistent for the
    median (a non-smooth statistic) and degenerates on tied timer values.
    """
    f = STATISTICS[statistic]

    def ratio(b: np.ndarray, c: np.ndarray, axis: int = -1) -> np.ndarray:
        return f(c, axis=axis) / f(b, axis=axis)

    batch = max(1, int(4_000_000 // (len(base) + len(cand))))  # bound memory for long runs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = stats.bootstrap((base, cand), ratio, vectorized=True, paired=False, method="percentile",
                              confidence_level=confidence, n_resamples=n_resamples, batch=batch, rng=rng)
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def assess(pairs: Sequence[tuple[np.ndarray, np.ndarray]], cfg: GateConfig,
           keys: Optional[Sequence[str]] = None) -> list[Assessment]:
    """Judge each (baseline values, candidate values) pair of the metric; Holm runs over all of them.

    ``keys`` (e.g. case ids) seed each pair's bootstrap, so the same data gives the same verdict.
    """
    metric = cfg.metric_info
    f = STATISTICS[metric.statistic]
    keys = list(keys) if keys is not None else [str(i) for i in range(len(pairs))]
    out: list[Optional[Assessment]] = [None] * len(pairs)
    tested: list[int] = []
    raw: dict[int, dict[str, Any]] = {}
    for i, (b, c) in enumerate(pairs):
        b = np.asarray(b, dtype=float)
        c = np.asarray(c, dtype=float)
        n = dict(n_base=len(b), n_cand=len(c))
        if len(b) < cfg.min_samples or len(c) < cfg.min_samples:
            out[i] = Assessment(INCONCLUSIVE, f"too few samples ({len(b)} baseline, {len(c)} candidate; "
                                              f"need {cfg.min_samples} each)", **n)
            continue
        bs, cs = float(f(b)), float(f(c))
        if not (bs > 0 and cs > 0 and np.all(np.isfinite(b)) and np.all(np.isfinite(c))):
            out[i] = Assessment(INCONCLUSIVE, "non-positive or non-finite values", **n)
            continue
        rng = np.random.default_rng([cfg.seed, _seed_key(keys[i])])
        lo, hi = _ratio_interval(b, c, metric.statistic, cfg.confidence, cfg.n_resamples, rng)
        p = float(stats.mannwhitneyu(b, c, alternative="two-sided").pvalue)
        raw[i] = dict(**n, baseline=bs, candidate=cs, ratio=cs / bs, ci_low=lo, ci_high=hi,
                      p_value=1.0 if math.isnan(p) else p)
        tested.append(i)
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
        return UNCHANGED, "not significant"
    if worse or better:
        return (REGRESSION if worse else IMPROVEMENT), f"significant, interval beyond the {t:.0%} threshold"
    return UNCHANGED, f"significant, but the interval reaches within the {t:.0%} threshold"


# ------------------------------------------------------------------------------- suite-wide statistics
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
        b, c = np.asarray(b, dtype=float), np.asarray(c, dtype=float)
        step = max(1, int(4_000_000 // (len(b) + len(c))))  # bound memory for long runs
        for lo in range(0, n_resamples, step):
            k = min(step, n_resamples - lo)
            rb = b[rng.integers(0, len(b), (k, len(b)))]
            rc = c[rng.integers(0, len(c), (k, len(c)))]
            reps[i, lo:lo + k] = np.log(f(rc, axis=-1) / f(rb, axis=-1))
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
    rng = np.random.default_rng([cfg.seed, _seed_key("suite:" + ",".join(case_ids))])
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


# ------------------------------------------------------------------------------------------ loading


@dataclass
class RunData:
    """One results CSV and its samples, checked fit for comparison."""

    path: Path
    rows: Any      # pandas.DataFrame, one row per case
    samples: Any   # pandas.DataFrame, results.SAMPLE_COLUMNS

    def samples_of(self, row: dict[str, Any]) -> np.ndarray:
        s = self.samples
        sel = (s["case_id"] == row["case_id"]) & (s["run_id"] == str(row["run_id"]))
        return s.loc[sel].sort_values("iteration")["seconds"].to_numpy(dtype=float)


def _check_records(path: Path, what: str) -> None:
    """A whole file: every record has the header's field count and the last line is ended
    (xlabench writes whole lines and syncs them; anything else was cut off while writing)."""
    with open(path, "rb") as fb:
        fb.seek(0, 2)
        if fb.tell():
            fb.seek(-1, 2)
            if fb.read(1) != b"\n":
                raise ResultsFileError(f"{path}: {what} is truncated: its last line is incomplete "
                                       "(cut off while writing?)")
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if not header:
            raise ResultsFileError(f"{path}: empty {what}")
        for rec in reader:
            if not rec:
                continue
            if len(rec) != len(header):
                state = "truncated (cut off while writing?)" if len(rec) < len(header) else "malformed"
                raise ResultsFileError(f"{path}:{reader.line_num}: {what} is {state}: "
                                       f"{len(rec)} of {len(header)} fields")


# Columns the gate reads. Others may be absent (a file written before a column was added reads as
# empty there); a column unknown to this schema is refused by results.read_rows.
_REQUIRED = ["schema_version", "run_id", "suite", "profile", "case_id", "workload", "backend", "impl",
             "device_kind", "framework_version", "status", "error", "n", "median_s", "correct"]


def load_run(path: str | Path) -> RunData:
    """Read a results CSV and the samples beside it, refusing anything that is not a whole xlabench run.

    Raises ResultsFileError naming the file and the problem (the CLI turns it into exit code 2).
    """
    import pandas as pd

    path = Path(path)
    header = results.check_header(path)
    missing = [c for c in _REQUIRED if c not in header]
    if missing:
        raise ResultsFileError(f"{path}: schema mismatch: no column(s) {', '.join(missing)} "
                               f"(this xlabench writes schema version {results.SCHEMA_VERSION})")
    _check_records(path, "results CSV")
    rows = results.read_rows(path)
    if rows.empty:
        raise ResultsFileError(f"{path}: no result rows (header only)")
    bad = rows[~rows["status"].isin(results.STATUSES)]
    if len(bad):
        raise ResultsFileError(f"{path}: row {int(bad.index[0]) + 2}: status {bad['status'].iloc[0]!r} "
                               f"is not one of {', '.join(results.STATUSES)}")
    dup = rows["case_id"][rows["case_id"].duplicated()]
    if len(dup):
        raise ResultsFileError(f"{path}: case {dup.iloc[0]} has more than one row; compare one run per file")
    spath = results.RunFiles(path).samples
    if (rows["status"] == "ok").any() and not spath.exists():
        raise ResultsFileError(f"{spath}: no such file: the gate needs the raw samples written beside "
                               f"{path.name} (keep or commit both files)")
    if spath.exists():
        _check_records(spath, "samples file")
    samples = results.read_samples(path)
    if list(samples.columns) != results.SAMPLE_COLUMNS:
        raise ResultsFileError(f"{spath}: columns {list(samples.columns)}, expected {results.SAMPLE_COLUMNS}")
    samples["seconds"] = pd.to_numeric(samples["seconds"], errors="coerce")
    bad_s = samples[~np.isfinite(samples["seconds"]) | (samples["seconds"] <= 0)]
    if len(bad_s):
        raise ResultsFileError(f"{spath}: line {int(bad_s.index[0]) + 2}: seconds must be a positive number")
    samples["case_id"] = samples["case_id"].astype(str)
    samples["run_id"] = samples["run_id"].astype(str)
    run = RunData(path, rows, samples)
    for row in rows[rows["status"] == "ok"].to_dict("records"):
        got, want = len(run.samples_of(row)), _num(row.get("n"))
        if want is not None and got != want:
            raise ResultsFileError(f"{spath}: case {row['case_id']} has {got} samples but its row says "
                                   f"n={int(want)} (truncated or from another run?)")
    return run


# ---------------------------------------------------------------------------------------- comparing


@dataclass(frozen=True)
class CaseVerdict(Assessment):
    """One case's outcome in a comparison (an Assessment plus who the case is)."""

    case_id: str = ""
    label: str = ""
    confirmation: Optional[Assessment] = None  # gate's re-run of a flagged case


@dataclass
class Comparison:
    baseline: str
    candidate: str
    config: GateConfig
    cases: list[CaseVerdict]
    warnings: list[str] = field(default_factory=list)
    confirm_run: Optional[str] = None
    suite: Optional[SuiteShift] = None

    def count(self, verdict: str) -> int:
        return sum(c.verdict == verdict for c in self.cases)

    @property
    def tested(self) -> int:
        """Cases that reached the statistics (Holm runs over them)."""
        return sum(c.p_holm is not None for c in self.cases)

    @property
    def need_per_side(self) -> int:
        """Samples per side one case needs to be able to reach significance over the tested cases."""
        return min_samples_per_side(self.config.alpha, max(1, self.tested))

    @property
    def unjudged(self) -> list[CaseVerdict]:
        """The cases the gate could not judge (inconclusive or underpowered)."""
        return [c for c in self.cases if c.verdict in UNJUDGED]

    @property
    def failed(self) -> bool:
        """A regression (a case or the suite-wide shift) or a failed case."""
        return any(c.verdict in FAILING for c in self.cases) or (
            self.suite is not None and self.suite.verdict == REGRESSION)

    @property
    def unjudged_failing(self) -> bool:
        """Something that looks like a regression but could not be judged: an underpowered case or a
        confounded suite-wide shift."""
        return any(c.verdict == UNDERPOWERED for c in self.cases) or (
            self.suite is not None and self.suite.verdict == CONFOUNDED)

    @property
    def exit_code(self) -> int:
        if self.failed:
            return EXIT_FAIL
        if self.unjudged_failing and not self.config.allow_inconclusive:
            return EXIT_UNJUDGED
        return EXIT_PASS

    @property
    def outcome(self) -> str:
        return {EXIT_PASS: "passed", EXIT_FAIL: "failed", EXIT_UNJUDGED: "could not judge"}[self.exit_code]

    @property
    def passed(self) -> bool:
        return self.exit_code == EXIT_PASS

    def to_dict(self) -> dict[str, Any]:
        m = self.config.metric_info
        return {
            "passed": self.passed, "exit_code": self.exit_code, "outcome": self.outcome,
            "baseline": self.baseline, "candidate": self.candidate, "confirm_run": self.confirm_run,
            "metric": {"name": m.name, "unit": m.unit, "higher_is_better": m.higher_is_better,
                       "statistic": m.statistic},
            "config": asdict(self.config),
            "counts": {v: self.count(v) for v in VERDICTS},
            "suite": None if self.suite is None else asdict(self.suite),
            "could_not_judge": {"count": len(self.unjudged), "need_per_side": self.need_per_side,
                                "cases": [{"case_id": c.case_id, "label": c.label, "verdict": c.verdict,
                                           "n_base": c.n_base, "n_cand": c.n_cand, "reason": c.reason}
                                          for c in self.unjudged]},
            "warnings": self.warnings,
            "cases": [asdict(c) for c in self.cases],
        }


def _num(v: Any) -> Optional[float]:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def _norm(v: Any) -> Any:
    """A cell value comparable across files (pandas may read 64 as 64.0 or '64')."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    f = _num(v)
    if f is not None:
        return int(f) if f.is_integer() else f
    return str(v)


_ID_PARAMS = [c for c in results.CASE_COLUMN_NAMES if c != "devices"]  # what case_id hashes
_ENV_KEYS = ("device_kind", "framework_version")


def _labels(rows: Iterable[dict[str, Any]]) -> dict[str, str]:
    rows = list(rows)
    params = [c for c in _ID_PARAMS if c not in ("workload", "backend", "impl")]
    varying = [c for c in params if len({_norm(r.get(c)) for r in rows}) > 1]
    shown = varying or params
    out = {}
    for r in rows:
        kv = " ".join(f"{c}={_norm(r.get(c))}" for c in shown if _norm(r.get(c)) is not None)
        out[str(r["case_id"])] = f"{r['backend']}/{r['impl']} {kv}".strip()
    return out


def _env_problems(pairs: list[tuple[dict, dict]]) -> list[str]:
    problems: dict[str, tuple[set, set]] = {}
    for b, c in pairs:
        for k in _ENV_KEYS:
            bv, cv = _norm(b.get(k)), _norm(c.get(k))
            if bv is not None and cv is not None and bv != cv:
                sb, sc = problems.setdefault(k, (set(), set()))
                sb.add(str(bv))
                sc.add(str(cv))
    return [f"{k}: baseline {', '.join(sorted(b))!r} vs candidate {', '.join(sorted(c))!r}"
            for k, (b, c) in problems.items()]


def compare(base: RunData, cand: RunData, cfg: GateConfig,
            only: Optional[set[str]] = None) -> Comparison:
    """Pair the cases of two runs by case id and judge each pair (``only``: restrict to these ids)."""
    b_rows = {str(r["case_id"]): r for r in base.rows.to_dict("records")}
    c_rows = {str(r["case_id"]): r for r in cand.rows.to_dict("records")}
    if only is not None:
        b_rows = {k: v for k, v in b_rows.items() if k in only}
        c_rows = {k: v for k, v in c_rows.items() if k in only}
    common = [k for k in c_rows if k in b_rows]
    for k in common:
        diff = [p for p in _ID_PARAMS if _norm(b_rows[k].get(p)) != _norm(c_rows[k].get(p))]
        if diff:
            p = diff[0]
            raise GateInputError(
                f"case {k}: the files disagree on {', '.join(diff)} ({p}={b_rows[k].get(p)!r} in "
                f"{base.path}, {c_rows[k].get(p)!r} in {cand.path}): the case ids are not comparable")
    warn: list[str] = []
    problems = _env_problems([(b_rows[k], c_rows[k]) for k in common])
    if problems:
        msg = "baseline and candidate ran in different environments: " + "; ".join(problems)
        if not cfg.allow_env_mismatch:
            raise EnvMismatchError(msg + " (pass --allow-env-mismatch to compare anyway)")
        warn.append(msg + " (compared anyway: --allow-env-mismatch)")

    runs = {side: sorted({int(_num(rows[k].get("repeats")) or 1) for k in common if rows[k]["status"] == "ok"})
            for side, rows in (("baseline", b_rows), ("candidate", c_rows))}
    if runs["baseline"] and runs["candidate"] and min(runs["baseline"]) < max(runs["candidate"]):
        warn.append(f"the baseline pooled {'/'.join(map(str, runs['baseline']))} run(s) per case, the candidate "
                    f"{'/'.join(map(str, runs['candidate']))}: the baseline's run-to-run drift dominates; record it "
                    "with at least as many --repeats (docs/gate.md: shared hosts)")
    labels = _labels(list(c_rows.values()) + [b_rows[k] for k in b_rows if k not in c_rows])
    metric = cfg.metric_info
    verdicts: dict[str, CaseVerdict] = {}
    to_test: list[str] = []
    pairs: list[tuple[np.ndarray, np.ndarray]] = []

    def put(k: str, verdict: str, reason: str, **kw: Any) -> None:
        verdicts[k] = CaseVerdict(verdict, reason, case_id=k, label=labels[k], **kw)

    for k, c in c_rows.items():
        b = b_rows.get(k)
        if c["status"] == "failed":
            put(k, FAILED, f"candidate failed: {str(c.get('error') or '')[:300]}")
        elif c["status"] == "ok" and c.get("correct") is False:
            put(k, FAILED, f"wrong result: max_abs_err {c.get('max_abs_err')} > tolerance {c.get('err_tol')}")
        elif c["status"] == "skipped":
            was = "" if b is None else f" (baseline: {b['status']})"
            put(k, SKIPPED, f"{str(c.get('error') or '')[:200]}{was}")
        elif b is None:
            put(k, NEW, "not in the baseline")
        elif b["status"] != "ok":
            put(k, NEW, f"no baseline measurement (baseline status {b['status']})")
        else:
            bv = metric.per_iteration(b, base.samples_of(b))
            cv = metric.per_iteration(c, cand.samples_of(c))
            if bv is None or cv is None:
                side = "baseline" if bv is None else "candidate"
                put(k, INCONCLUSIVE, f"{cfg.metric} is empty in the {side} row")
                continue
            to_test.append(k)
            pairs.append((bv, cv))
    assessed = assess(pairs, cfg, to_test)
    for k, a in zip(to_test, assessed):
        verdicts[k] = CaseVerdict(**asdict(a), case_id=k, label=labels[k])
    # The suite-wide test: every case that reached the statistics (a ratio), whatever its own verdict.
    idx = [i for i, a in enumerate(assessed) if a.ratio is not None]
    compile_times = (np.array([_num(b_rows[to_test[i]].get("compile_s")) or np.nan for i in idx]),
                     np.array([_num(c_rows[to_test[i]].get("compile_s")) or np.nan for i in idx]))
    suite = assess_suite([pairs[i] for i in idx], cfg, compile_times, [to_test[i] for i in idx])
    if suite is not None and suite.machine_ratio is not None and (
            suite.machine_low > 1 + cfg.threshold or suite.machine_high < 1 - cfg.threshold):
        warn.append(f"the host compiled {suite.machine_ratio:.2f}x as long as for the baseline "
                    f"[{suite.machine_low:.2f}, {suite.machine_high:.2f}] (geometric mean over {suite.n_cases} cases): "
                    "its speed changed (load?), and every case's time with it; per-case verdicts cannot see that "
                    "(docs/gate.md: the host's speed)")
    for k, b in b_rows.items():
        if k not in c_rows:
            put(k, MISSING, f"not in the candidate (baseline status {b['status']})")
    order = list(c_rows) + [k for k in b_rows if k not in c_rows]
    return Comparison(str(base.path), str(cand.path), cfg, [verdicts[k] for k in order], warn, suite=suite)


def confirm(first: Comparison, base: RunData, rerun: Callable[[list[str]], RunData],
            cfg: GateConfig) -> Comparison:
    """Re-measure the cases flagged as regressions and keep only those that regress again.

    ``rerun(case_ids)`` runs just those cases afresh and returns the new run. A case stays a
    regression if the re-run alone is again judged one (Holm over the re-run cases only: a new,
    independent experiment); a case that fails in the re-run is a failure. A suite-wide regression
    re-runs every case of the suite-wide test, and stays one only if the re-run's is again one.
    """
    flagged = [c.case_id for c in first.cases if c.verdict == REGRESSION]
    regressed = set(flagged)
    suite_flagged = first.suite is not None and first.suite.verdict == REGRESSION
    if suite_flagged:
        flagged = list(dict.fromkeys(flagged + list(first.suite.case_ids)))
    if not flagged:
        return first
    again_run = rerun(flagged)
    again = compare(base, again_run, cfg, only=set(flagged))
    by_id = {c.case_id: c for c in again.cases}
    cases = []
    for c in first.cases:
        w = by_id.get(c.case_id) if c.case_id in regressed else None
        if w is not None:
            conf = Assessment(**{k: v for k, v in asdict(w).items() if k in Assessment.__dataclass_fields__})
            if w.verdict in (REGRESSION, FAILED, MISSING):
                verdict = REGRESSION if w.verdict == REGRESSION else FAILED
                c = replace(c, verdict=verdict, confirmation=conf, reason=f"{c.reason}; re-run: {w.reason}")
            else:
                c = replace(c, verdict=UNCONFIRMED, confirmation=conf,
                            reason=f"{c.reason}; re-run did not reproduce it: {w.reason}")
        cases.append(c)
    suite = first.suite
    if suite_flagged:
        w = again.suite
        if w is not None and w.verdict == REGRESSION:
            suite = replace(suite, confirmation=w, reason=f"{suite.reason}; re-run: {w.reason}")
        else:
            why = w.reason if w is not None else "too few cases in the re-run"
            suite = replace(suite, verdict=UNCONFIRMED, confirmation=w,
                            reason=f"{suite.reason}; re-run did not reproduce it: {why}")
    warn = first.warnings + [w for w in again.warnings if w not in first.warnings]
    return replace(first, cases=cases, warnings=warn, confirm_run=str(again_run.path), suite=suite)
