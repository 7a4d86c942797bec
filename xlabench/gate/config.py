"""What the gate judges and how: the verdicts, the metrics it can compare (with their direction), its thresholds and the errors of bad input."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from xlabench.cells import number
from xlabench.measure.sample_size import DEFAULT_ALPHA
from xlabench.results.schema import UNIT_OF

# Verdicts. REGRESSION and FAILED fail the gate; the rest are reported.
REGRESSION = "regression"
IMPROVEMENT = "improvement"
UNCHANGED = "unchanged"
INCONCLUSIVE = "inconclusive"
UNDERPOWERED = "underpowered"  # too few samples to be significant, but the interval is wholly beyond the threshold
CONFOUNDED = "confounded"      # a change the host's own change of speed can explain (calibration, compile times)
UNCONFIRMED = "unconfirmed"  # flagged as a regression, not reproduced by gate's re-run
FAILED = "failed"            # the candidate case failed or gave a wrong result
NEW = "new"                  # no baseline measurement for the case
MISSING = "missing"          # in the baseline only
SKIPPED = "skipped"          # the candidate skipped the case
VERDICTS = (REGRESSION, FAILED, MISSING, UNDERPOWERED, CONFOUNDED, UNCONFIRMED, IMPROVEMENT, UNCHANGED, INCONCLUSIVE,
            NEW, SKIPPED)
FAILING = (REGRESSION, FAILED)  # and MISSING unless GateConfig.allow_missing
UNJUDGED = (INCONCLUSIVE, UNDERPOWERED)  # "could not judge": listed in every summary
UNJUDGED_FAILING = (UNDERPOWERED, CONFOUNDED)  # exit 3 unless GateConfig.allow_inconclusive

# Exit codes shared by `compare` and `gate`. 2 is bad input (the CLI's), and a comparison in which no
# case reached the statistics: nothing was compared, which must never read as a pass.
EXIT_PASS, EXIT_FAIL, EXIT_NOTHING, EXIT_UNJUDGED = 0, 1, 2, 3


num = number  # a cell as a float, None where it is empty (xlabench.cells)


class GateInputError(Exception):
    """The two files cannot be compared as given (message is user-facing; the CLI exits 2)."""


class EnvMismatchError(GateInputError):
    """Baseline and candidate ran on different device kinds or framework versions."""


# ------------------------------------------------------------------------------------------ metrics


@dataclass(frozen=True)
class Metric:
    """A column the gate can compare, and how to get its value for every timed iteration. Its unit is the
    schema's (results.schema declares each column's unit once)."""

    name: str
    higher_is_better: bool
    statistic: str  # a key of xlabench.stats.summary.STATISTICS: what summarises the per-iteration values
    peak: Optional[str] = None  # the row's peak column the metric is a fraction of (mfu, mbu): runs may differ

    def __post_init__(self) -> None:
        if self.name not in UNIT_OF:
            raise ValueError(f"metric {self.name!r} is not a column of the results schema")

    @property
    def unit(self) -> str:
        return UNIT_OF[self.name]

    def per_iteration(self, row: dict[str, Any], seconds: np.ndarray) -> Optional[np.ndarray]:
        """Values of the metric per timed iteration, or None when the row lacks the metric.

        Time metrics are the seconds themselves. Every throughput metric in the schema is
        ``something / median_s`` (xlabench.run.metrics.derive), so per iteration it is ``row value * median_s / s``.
        ``device_median_s`` (trace timer) has no per-iteration file: the samples are wallclock, so it is
        judged on the wallclock samples scaled by ``device_median_s / median_s`` (the row's device median
        with the wallclock spread; None where the row has no device time).
        """
        if self.name == "device_median_s":
            value, median = num(row.get(self.name)), num(row.get("median_s"))
            if value is None or median is None or value <= 0 or median <= 0:
                return None
            return seconds * (value / median)
        if not self.higher_is_better:
            return seconds
        value, median = num(row.get(self.name)), num(row.get("median_s"))
        if value is None or median is None or value <= 0 or median <= 0:
            return None
        return value * median / seconds


    def has(self, row: dict[str, Any]) -> bool:
        """Whether the row carries the metric (a time metric: always, but device_median_s: a trace-timer row)."""
        if self.higher_is_better or self.name == "device_median_s":
            value = num(row.get(self.name))
            return value is not None and value > 0
        return True


def metric_missing(pairs: list[tuple[dict[str, Any], dict[str, Any]]], metric: str) -> Optional[str]:
    """Why no ``pairs`` (baseline row, candidate row: both measured) can be judged on ``metric``, because no
    pair has it on both sides (issue 61 item 8: attention rows have no tokens_per_s), naming the metrics
    they have; None when one pair has it, or there is no pair."""
    info = METRICS[metric]
    if not pairs or any(info.has(b) and info.has(c) for b, c in pairs):
        return None
    have = [m for m, i in METRICS.items() if any(i.has(b) and i.has(c) for b, c in pairs)]
    kinds = sorted({str(r.get("workload")) for pair in pairs for r in pair})
    return (f"--metric {metric}: none of the {len(pairs)} case(s) measured on both sides has it (their "
            f"{'/'.join(kinds)} rows leave the {metric} column empty); compare them on one of: {', '.join(have)}")


METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("median_s", False, "median"),
    Metric("mean_s", False, "mean"),
    # Contention on a shared host only ever adds time: a low quantile tracks the uncontended speed.
    Metric("p10_s", False, "p10"),
    # Trace timer: the row's device median, with the spread of the wallclock samples (see per_iteration).
    Metric("device_median_s", False, "median"),
    Metric("tflops_per_s", True, "median"),
    Metric("mfu", True, "median", peak="peak_tflops"),
    Metric("gbytes_per_s", True, "median"),
    Metric("mbu", True, "median", peak="peak_gbytes_per_s"),
    Metric("tokens_per_s", True, "median"),
)}


@dataclass(frozen=True)
class GateConfig:
    """How changes are judged. Defaults are justified in the module docstring and docs/gate.md."""

    metric: str = "median_s"
    threshold: float = 0.05
    alpha: float = DEFAULT_ALPHA
    confidence: float = 0.95
    min_samples: int = 5
    n_resamples: int = 9999
    seed: int = 0
    allow_env_mismatch: bool = False
    allow_inconclusive: bool = False  # "could not judge" (underpowered cases, a confounded suite shift) exits 0
    allow_missing: bool = False  # cases of the baseline absent from the candidate do not fail the comparison

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
