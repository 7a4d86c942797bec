"""The one place a run's row is assembled: ``case_row`` takes the case, the run's context, the worker's
environment, and either the worker's typed results (one CaseResult per repeat) or the reason the case
ended without one, and returns the CSV row and its samples. The scheduler only collects those pieces; the
compile session and a run that cannot start take their first columns from ``identity``.

The walk from the CLI to a row: cli/run.py `run` -> run/session.py run_suite -> run/scheduler.py
run_cases (start_case, run_repeat: a worker's CaseResult) -> here case_row (repeats.pool,
timing.device_headline, metrics.derive) -> results.RowWriter.write."""

from __future__ import annotations

import datetime as dt
import statistics
from typing import Any, Mapping, Optional, Sequence

from xlabench import audit
from xlabench import impls as catalog
from xlabench import results
from xlabench.protocol.worker_messages import CaseResult
from xlabench.protocol.status import OK
from xlabench.measure.timing import device_headline
from xlabench.run import repeats
from xlabench.run.metrics import derive
from xlabench.suite import Case

ENV_KEYS = ("device_kind", "device_count", "process_count", "framework_version")


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def interpreted(info: Optional[catalog.ImplInfo], platform: str) -> bool:
    """Whether an impl (its catalog entry) runs in the Pallas interpreter on ``platform`` (the worker is
    told so)."""
    return bool(info and info.interpreted(platform))


_FIND = object()


def identity(case: Case, ctx: Any, platform: Optional[str] = None, info: Any = _FIND) -> dict[str, Any]:
    """The columns every row of the case has, whatever happened to it: ids, the case's parameters, where
    and by which xlabench it ran (``info``: the impl's catalog entry, looked up here when not given)."""
    platform = platform or ctx.platform
    if info is _FIND:
        info = catalog.find(case.backend, case.impl, case.workload)
    row: dict[str, Any] = {
        "schema_version": results.SCHEMA_VERSION, "run_id": ctx.run_id, "suite": case.suite,
        "profile": case.profile, "case_id": case.case_id, "workload": case.workload,
        "backend": case.backend, "impl": case.impl, "hostname": ctx.hostname, "git_sha": ctx.git_sha,
        "platform": platform, "warmup": case.measure.warmup,
    }
    row.update({k: v for k, v in case.params.items() if k in results.CASE_COLUMN_NAMES})
    row["interpret"] = interpreted(info, platform)
    return row


def case_row(case: Case, ctx: Any, env: Mapping[str, Any] | None = None, replies: Sequence[CaseResult] = (),
             ended: Optional[tuple[str, Optional[str]]] = None, calib: Sequence[float] = (), info: Any = _FIND
             ) -> tuple[dict[str, Any], list[float]]:
    """(row, samples) of a case that has ended: ``ended`` = (status, error) when it ended without a result
    (skipped before a worker, a worker failure, a failed or skipped reply), else its ``replies`` pooled,
    put on the device clock where it ran on one, its rates derived; ``calib``: the host's calibration
    kernel seconds beside its repeats; ``env``: the worker's environment (empty: no worker was reached)."""
    env = dict(env or {})
    platform = env.get("platform") or ctx.platform
    row = identity(case, ctx, platform, info)
    if env:
        row.update({k: env.get(k) for k in ENV_KEYS})
    if ended is not None:
        status, error = ended
        row.update(status=status, error=error, timestamp=now())
        return row, []
    result = device_headline(repeats.pool(replies), platform, case.workload)
    row.update(status=OK, error=None, repeats=len(replies))
    row.update(result.fields)
    if calib:
        row["host_calib_s"] = statistics.median(calib)
    peaks = {**env, **ctx.cpu_peaks} if platform == "cpu" else env
    row.update(derive(result, peaks, case.devices, ctx.peak_override or case.peak_tflops, bool(row["interpret"])))
    notes = [row.get("notes")]
    if result.correct is False:
        notes.append("WRONG RESULT: error above tolerance")
    if ctx.jobs > 1:
        notes.append(f"timed with {ctx.jobs} jobs at once (--jobs): the host's cores were shared")
    host = audit.Host(llc_bytes=getattr(ctx, "llc_bytes", None))
    notes.append(audit.cache_resident(row, host))
    row["notes"] = "; ".join(filter(None, notes)) or None
    row["suspect"] = audit.suspect_text(audit.check_row(row, host))
    row["timestamp"] = now()
    return row, list(result.samples)
