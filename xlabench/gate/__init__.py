"""Baseline vs candidate: pair the cases, test each change, give verdicts a CI gate can trust.

A change must be significant (Mann-Whitney U, Holm) and large (the ratio's bootstrap interval beyond the
threshold); the suite-wide test, the confounds and the defaults: docs/gate.md, A change in brief.

Its modules: README.md, Layout. No CLI, no printing, no framework. The names imported here are the package's interface.
"""

from xlabench.gate.config import (
    CONFOUNDED, EXIT_FAIL, EXIT_NOTHING, EXIT_PASS, EXIT_UNJUDGED, FAILED, FAILING, IMPROVEMENT, INCONCLUSIVE, METRICS,
    MISSING, NEW, REGRESSION, SKIPPED, UNCHANGED, UNCONFIRMED, UNDERPOWERED, UNJUDGED, UNJUDGED_FAILING,
    VERDICTS, EnvMismatchError, GateConfig, GateInputError, Metric,
)

# The verdicts load the statistics (xlabench.stats), which load scipy: they are imported on first use (PEP
# 562), so that importing the gate's names (the CLI's option defaults, `--help`) stays fast. name -> the
# module that defines it.
_LAZY = {
    **dict.fromkeys(("Assessment", "assess", "samples_needed"), "assessment"),
    **dict.fromkeys(("SuiteShift", "assess_suite"), "suite_shift"),
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
    "GateInputError", "Metric", "Assessment", "assess", "samples_needed", "SuiteShift", "assess_suite", "RunData",
    "load_run", "CaseVerdict", "Comparison", "compare", "confirm",
]
