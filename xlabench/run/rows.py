"""The one place a run's row is assembled: ``case_row`` takes the case, the run's context, the case's plan
(run/case_plan.py), the worker's environment, and either the worker's samples (one CaseResult per repeat)
or the reason the case ended without one, and returns the CSV row and its samples. Every statistic of the
row (median_s ... cv, the device columns) is computed here, once, from every repeat's samples on the clock
the plan made the headline; the scheduler only collects the pieces. ``compile_row`` assembles a compile
session's row from the same pieces (identity, the worker's environment, the peak), so that a case's compile
and run rows agree on every column they share; a run that cannot start takes its first columns from ``identity``.

The walk from the CLI to a row: cli/run.py `run` -> run/suite_runner.py run_suite -> run/scheduler.py
run_cases (start_case, run_repeat: case_plan.plan_case, a worker's CaseResult) -> here case_row (measured:
pooled and summarised; metrics.derive) -> results.RowWriter.write.

Why repeats: on a shared host a run's median drifts between runs by more than the iterations of one run
vary, so no within-run statistic can see it. Each repeat is a separate worker request (fresh inputs,
fresh trace and compile, its own warm-up), taken in passes over the suite (scheduler.run_cases), so
pooling K of them averages K draws of that drift, spread over the run; the gate then compares pooled
samples (measured in benchmarks/gate_quality.py)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from xlabench import audit, hardware
from xlabench import impls as catalog
from xlabench import results
from xlabench.protocol.timing_plan import Clock
from xlabench.protocol.status import COMPILED, OK
from xlabench.stats.summary import device_summary, median, summarize
from xlabench.protocol.worker_messages import CaseResult
from xlabench.run.case_plan import CasePlan, plan_case
from xlabench.run.metrics import derive, peak_fields, roofline_fields
from xlabench.suite import Case
from xlabench.units import to_ms

ENV_KEYS = ("device_kind", "device_count", "process_count", "framework_version")


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Measured:
    """A case's measurement, summarised once: ``fields`` (the row's measured columns: the statistics of the
    headline ``samples``, the clock, the device columns, then the worker's own columns) and the counts
    whose rates the parent derives."""

    fields: dict[str, Any]
    samples: tuple[float, ...]
    tokens_per_step: Optional[float] = None
    tokens_global: bool = False
    correct: Optional[bool] = None


ABOVE_WALL = ("trace timer: device_median_s above median_s: the profiled pass ran slower (the profiler's own cost "
              "on the threads that run the ops, or the host's drift between the passes)")


def pooled(replies: Sequence[CaseResult]) -> CaseResult:
    """One reply for K ok replies of the same case: every sample (and device sample) in order, the worst
    error, correct only if every repeat was; other fields (compile time, losses, counts) from the first."""
    if not replies:
        raise ValueError("no replies to pool")
    if len(replies) == 1:
        return replies[0]
    first = replies[0]
    errs = [r.max_abs_err for r in replies]
    medians = ", ".join(f"{to_ms(median(r.samples)):.4g} ms" if r.samples else "?" for r in replies)
    return first.replace(samples=tuple(s for r in replies for s in r.samples),
                         device_samples=tuple(s for r in replies for s in r.device_samples),
                         max_abs_err=max(errs) if all(e is not None for e in errs) else first.max_abs_err,
                         correct=all(bool(r.correct) for r in replies),
                         notes="; ".join(filter(None, [first.notes, f"{len(replies)} repeats pooled (medians {medians})"])))


def measured(replies: Sequence[CaseResult], headline: Clock = "wall") -> Measured:
    """The replies pooled and summarised: on the device clock where the plan made it the headline and the
    device clock ran (samples, median_s ... cv, and every rate derived from them, are then the device's
    per-iteration seconds; the wall clock's median per call stays in ``wall_median_s``), else on the wall
    clock. Rates need nothing more: they are derived from the pooled median (metrics.derive)."""
    r = pooled(replies)
    wall = summarize(list(r.samples))
    device = device_summary(r.device_samples)
    on_device = headline == "device" and bool(r.device_samples)
    samples = tuple(r.device_samples) if on_device else tuple(r.samples)
    fields: dict[str, Any] = {**(summarize(list(samples)) if on_device else wall),
                              "clock": "device" if on_device else "wall", "wall_median_s": wall["median_s"]}
    worker = r.fields
    if "timer" in worker:
        fields["timer"] = worker.pop("timer")
    fields.update(device)
    fields.update(worker)
    if device and device["device_median_s"] > wall["median_s"]:  # seen on CPU for programs of tens of microseconds
        fields["notes"] = "; ".join(filter(None, [fields.get("notes"), ABOVE_WALL]))
    return Measured(fields, samples, r.tokens_per_step, r.tokens_global, r.correct)


def add_phases(total: dict[str, float], replies: Sequence[CaseResult]) -> dict[str, float]:
    """``total`` (a run's seconds per phase) with every repeat's phase seconds added (the CaseResult's
    ``phase_s``: not a CSV column, the meta's ``phase_s``); returned for chaining."""
    for r in replies:
        for name, s in r.phase_s.items():
            total[name] = round(total.get(name, 0.0) + float(s), 3)
    return total


_FIND = object()
# The rates a row with a wrong result does not get (issue 50 item 6: a kernel of the wrong output shape got 67% MFU).
WRONG_DROPS = ("tflops_per_s", "mfu", "mfu_palm", "gbytes_per_s", "mbu", "tokens_per_s", "tokens_per_s_per_device",
               "roofline_frac", "roofline_note")


def identity(case: Case, ctx: Any, plan: Optional[CasePlan] = None) -> dict[str, Any]:
    """The columns every row of the case has, whatever happened to it: ids, the case's parameters, where
    and by which xlabench it ran (``plan``: the case's; without one the row says only the run's platform)."""
    row: dict[str, Any] = {
        "schema_version": results.SCHEMA_VERSION, "run_id": ctx.run_id, "suite": case.suite,
        "profile": case.profile, "case_id": case.case_id, "workload": case.workload,
        "backend": case.backend, "impl": case.impl, "hostname": ctx.hostname, "git_sha": ctx.git_sha,
        "platform": plan.platform if plan else ctx.platform, "warmup": case.measure.warmup,
    }
    row.update({k: v for k, v in case.params.items() if k in results.CASE_COLUMN_NAMES})
    row["interpret"] = plan.interpret if plan else False
    return row


def case_row(case: Case, ctx: Any, env: Mapping[str, Any] | None = None, replies: Sequence[CaseResult] = (),
             ended: Optional[tuple[str, Optional[str]]] = None, calib: Sequence[float] = (), info: Any = _FIND,
             plan: Optional[CasePlan] = None) -> tuple[dict[str, Any], list[float]]:
    """(row, samples) of a case that has ended: ``ended`` = (status, error) when it ended without a result
    (skipped before a worker, a worker failure, a failed or skipped reply), else its ``replies`` pooled and
    summarised on the clock its ``plan`` made the headline, its rates derived; ``calib``: the host's
    calibration kernel seconds beside its repeats; ``env``: the worker's environment (empty: no worker was
    reached). Without a ``plan`` (no repeat ran) it is decided here, by the same rule (case_plan), from
    ``info`` (the impl's catalog entry, looked up when not given)."""
    env = dict(env or {})
    if plan is None:
        info = catalog.find(case.backend, case.impl, case.workload) if info is _FIND else info
        plan = plan_case(case, info, env.get("platform") or ctx.platform, ctx)
    platform = plan.platform
    row = identity(case, ctx, plan)
    if env:
        row.update({k: env.get(k) for k in ENV_KEYS})
    if ended is not None:
        status, error = ended
        if catalog.is_user(case.impl):  # a user impl that failed or was skipped ran nothing, interpreted or not
            row["interpret"] = False
        row.update(status=status, error=error, timestamp=now(), notes=getattr(case, "note", "") or None)
        return row, []
    m = measured(replies, plan.headline)
    row.update(status=OK, error=None, repeats=len(replies))
    row.update(m.fields)
    if calib:
        row["host_calib_s"] = median(calib)
    peaks = {**env, **ctx.cpu_peaks} if platform == "cpu" else env
    row.update(derive(m, peaks, case.devices, ctx.peak_override or case.peak_tflops, bool(row["interpret"]), row))
    notes = [getattr(case, "note", ""), row.get("notes")]  # what planning decided (the model, modes run once)
    if m.correct is False:  # its time is kept; a rate would credit it with work it did not do
        row.update(dict.fromkeys(WRONG_DROPS))
        notes.append("WRONG RESULT: error above tolerance (no rate or MFU: the work was not done right)")
    if ctx.jobs > 1:
        notes.append(f"timed with {ctx.jobs} jobs at once (--jobs): the host's cores were shared")
    host = audit.Host(llc_bytes=getattr(ctx, "llc_bytes", None))
    notes.append(audit.cache_resident(row, host))
    row["notes"] = "; ".join(filter(None, notes)) or None
    row["suspect"] = audit.suspect_text(audit.check_row(row, host))
    row["timestamp"] = now()
    return row, list(m.samples)


def compile_row(case: Case, ctx: Any, plan: CasePlan, env: Mapping[str, Any], outcome: Mapping[str, Any],
                target: hardware.Target, slices: int = 1) -> dict[str, Any]:
    """The row of a case compiled for ``slices`` of ``target`` (run/compile_runner.py): the columns of a run
    row of the case (``identity`` under its ``plan``, the worker's ``env``, the peak by the run's rule:
    metrics.peak_fields), the target's, the worker's ``outcome`` (status, error and the compiled program's
    figures) and, for a compiled program, its roofline on the target's topology."""
    row = identity(case, ctx, plan)
    row.update({k: env.get(k) for k in ENV_KEYS})
    row.update(warmup=None, process_count=env.get("process_count") or 1,  # nothing runs: no warm-up; one process
               target=target.name, topology=target.label(slices))
    row.update(outcome)
    if row.get("status") == COMPILED:
        row.update(_ceilings(row, env, ctx.peak_override or case.peak_tflops, target.topology, slices))
    row["notes"] = "; ".join(filter(None, [getattr(case, "note", ""), row.get("notes")])) or None
    row["timestamp"] = now()
    return row


def _ceilings(row: dict[str, Any], env: Mapping[str, Any], peak_override: Optional[float], topology: Optional[str],
              slices: int) -> dict[str, Any]:
    """The peaks and the roofline of a compiled row: what the slice could do with this program."""
    out = peak_fields(env, peak_override)
    out.update(roofline_fields({**row, **out}, str(row.get("device_kind") or ""), topology))
    if slices > 1 and out.get("collective_s") is not None:
        out["ici_source"] = (out.get("ici_source", "") + f"; {slices} slices: collectives between slices cross "
                             "DCN, which this model prices at ICI speed (optimistic)")
    return out
