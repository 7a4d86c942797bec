"""The project's statistics, pure (as asv's statistics.py): numbers in, numbers out; no I/O, no framework,
nothing of xlabench outside this package. Every test, resampling, quantile and robust estimator of the
project is here; the gate and the history keep their thresholds, verdicts and wording, and call these.

Its modules by topic: README.md, Layout. summary and power load no scipy (the worker, `run` and
`validate` import them); the others do, on import.
"""
