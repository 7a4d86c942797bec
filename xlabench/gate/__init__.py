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
``confounded`` (could not judge), not a regression (docs/gate.md has the A/A measurements). The runner
also times a fixed host kernel beside every case (``host_calib_s``, xlabench/run/calibrate.py): a
case's or the suite's regression that the kernel's own slowdown explains is ``confounded`` as well.

The gate judges only what it sees: a comparison in which no case reached the statistics is
"nothing compared" (exit 2, never a pass), cases of the baseline missing from the candidate fail
(unless GateConfig.allow_missing), and two files of different suites are refused.

Defaults (see GateConfig and docs/gate.md):

* threshold 5%: the smallest slowdown worth failing a build for; it must exceed the runner's
  run-to-run drift, which benchmarks/gate_quality.py measures (on a shared CPU: raise it);
* alpha 0.05 family-wise (Holm): at most a 5% chance per comparison that any case is a false
  significant change; the threshold stage and ``gate``'s re-run cut the false-alarm rate far lower;
* confidence 0.95 for the interval: the bound used in stage 2 is a one-sided 97.5% bound;
* min_samples 5: with fewer, the median is not one of the samples and the bootstrap has too few
  distinct resamples to give an interval (and 3 vs 3 samples cannot reach p < 0.05 at all).

Its modules: README.md, Layout. No CLI, no printing, no framework. The names imported here are the package's interface.
"""

from xlabench.gate.config import (
    CONFOUNDED, EXIT_FAIL, EXIT_NOTHING, EXIT_PASS, EXIT_UNJUDGED, FAILED, FAILING, IMPROVEMENT, INCONCLUSIVE, METRICS,
    MISSING, NEW, REGRESSION, SKIPPED, UNCHANGED, UNCONFIRMED, UNDERPOWERED, UNJUDGED, UNJUDGED_FAILING,
    VERDICTS, EnvMismatchError, GateConfig, GateInputError, Metric,
)

# The statistics load scipy: they are imported on first use (PEP 562), so that importing the gate's
# names (the CLI's option defaults, `--help`) stays fast. name -> the module that defines it.
_LAZY = {
    **dict.fromkeys(("Assessment", "assess", "holm", "min_samples_per_side", "sample_shortfall",
                     "shortfall_message", "smallest_p"), "stats"),
    **dict.fromkeys(("SuiteShift", "assess_suite", "geomean_interval", "log_ratios", "machine_shift",
                     "signed_rank_p", "smallest_signed_rank_p"), "suite_shift"),
    **dict.fromkeys(("RunData", "load_run"), "run_data"),
    **dict.fromkeys(("CaseVerdict", "Comparison", "compare", "confirm"), "pairing"),
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f"xlabench.gate.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'xlabench.gate' has no attribute {name!r}")


__all__ = [
    "CONFOUNDED", "EXIT_FAIL", "EXIT_NOTHING", "EXIT_PASS", "EXIT_UNJUDGED", "FAILED", "FAILING", "IMPROVEMENT",
    "INCONCLUSIVE", "METRICS", "MISSING", "NEW", "REGRESSION", "SKIPPED", "UNCHANGED", "UNCONFIRMED",
    "UNDERPOWERED", "UNJUDGED", "UNJUDGED_FAILING", "VERDICTS", "EnvMismatchError", "GateConfig",
    "GateInputError", "Metric", "Assessment", "assess", "holm", "min_samples_per_side", "sample_shortfall",
    "shortfall_message", "smallest_p", "SuiteShift", "assess_suite", "geomean_interval", "log_ratios",
    "machine_shift", "signed_rank_p", "smallest_signed_rank_p", "RunData", "load_run", "CaseVerdict",
    "Comparison", "compare", "confirm",
]
