"""Pool the K independent runs of one case (``measure.repeats``) into one row and one set of samples.

Why: on a shared host a run's median drifts between runs by more than the iterations of one run
vary, so no within-run statistic can see it. Each repeat is a separate worker request (fresh inputs,
fresh trace and compile, its own warm-up), taken in passes over the suite (scheduler.run_cases), so
pooling K of them averages K draws of that drift, spread over the run; the gate then compares pooled
samples (measured in benchmarks/gate_quality.py).
"""

from __future__ import annotations

from typing import Sequence

from xlabench.measure.timing import device_summary, summarize
from xlabench.protocol.worker_messages import CaseResult


def pool(replies: Sequence[CaseResult]) -> CaseResult:
    """One result for K ok results of the same case: every sample, stats over all of them, the worst
    error, correct only if every repeat was; other fields (compile time, losses, counts) from the first.
    The trace timer's device samples are pooled the same way (the repeats that have them).

    Rates need nothing here: tokens/s, TFLOP/s, GB/s, MFU and MBU are derived from the pooled median
    afterwards (xlabench.run.metrics.derive)."""
    if not replies:
        raise ValueError("no replies to pool")
    if len(replies) == 1:
        return replies[0]
    first = replies[0]
    samples = tuple(s for r in replies for s in r.samples)
    device = tuple(s for r in replies for s in r.device_samples)
    errs = [r.max_abs_err for r in replies]
    notes = "; ".join(filter(None, [first.notes, f"{len(replies)} repeats pooled "
                                                 f"(medians {', '.join(_ms(r) for r in replies)})"]))
    return first.replace(samples=samples, stats=summarize(list(samples)),
                         device_samples=device, device_stats=device_summary(device),
                         max_abs_err=max(errs) if all(e is not None for e in errs) else first.max_abs_err,
                         correct=all(bool(r.correct) for r in replies), notes=notes)


def _ms(result: CaseResult) -> str:
    m = result.stats.get("median_s")
    return f"{m * 1e3:.4g} ms" if m else "?"
