"""Pool the K independent runs of one case (``measure.repeats``) into one row and one set of samples.

Why: on a shared host a run's median drifts between runs by more than the iterations of one run
vary, so no within-run statistic can see it. Each repeat is a separate worker request (fresh inputs,
fresh trace and compile, its own warm-up), taken in passes over the suite (scheduler.run_cases), so
pooling K of them averages K draws of that drift, spread over the run; the gate then compares pooled
samples (measured in benchmarks/gate_quality.py).
"""

from __future__ import annotations

from typing import Any, Sequence

from xlabench import results
from xlabench.harness import summarize

# Worker fields that are rates per median_s (tokens/s ...): rescaled to the pooled median. TFLOP/s,
# GB/s, MFU and MBU are derived after pooling (metrics.derive), so they need nothing.
_RATE_FIELDS = [c.name for c in results.COLUMNS if c.unit.endswith("/s") and c.group == "metric"]


def pool(replies: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One reply for K ok replies of the same case: every sample, stats over all of them, the worst
    error, correct only if every repeat was; other fields (compile time, losses) from the first."""
    if not replies:
        raise ValueError("no replies to pool")
    if len(replies) == 1:
        return replies[0]
    first = replies[0]["fields"]
    samples = [s for r in replies for s in r["samples"]]
    fields = {**first, **summarize(samples)}
    scale = first["median_s"] / fields["median_s"] if first.get("median_s") and fields["median_s"] else None
    for name in _RATE_FIELDS:
        if fields.get(name) is not None and scale is not None:
            fields[name] = fields[name] * scale
    errs = [r["fields"].get("max_abs_err") for r in replies]
    if all(e is not None for e in errs):
        fields["max_abs_err"] = max(errs)
    fields["correct"] = all(bool(r["fields"].get("correct")) for r in replies)
    fields["notes"] = "; ".join(filter(None, [first.get("notes"), f"{len(replies)} repeats pooled "
                                              f"(medians {', '.join(_ms(r['fields']) for r in replies)})"]))
    return {**replies[0], "fields": fields, "samples": samples}


def _ms(fields: dict[str, Any]) -> str:
    m = fields.get("median_s")
    return f"{m * 1e3:.4g} ms" if m else "?"
