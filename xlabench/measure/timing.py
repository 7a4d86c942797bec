"""Timing: warm-up, timed iterations each ended by the framework's sync, every sample kept.

Knows nothing about attention or any framework: it gets a zero-argument call and a sync function.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from typing import Any, Callable, Sequence

import numpy as np

from xlabench.protocol.plan import TimingPlan, default_timer
from xlabench.protocol.timers import TIMERS
from xlabench.protocol.worker_messages import CaseResult

__all__ = ["TIMERS", "TimingPlan", "default_timer"]  # re-exported: protocol.timers, protocol.plan


def time_calls(call: Callable[[], Any], sync: Callable[[Any], Any], plan: TimingPlan) -> tuple[list[float], Any]:
    """Run warm-up, then at least ``plan.iters`` timed iterations and at least ``min_time_s`` seconds
    (capped at ``max_iters``). Each sample is one call plus its sync (e.g. block_until_ready).

    Returns the per-iteration seconds and the last output (for the correctness check).
    """
    out = None
    for _ in range(plan.warmup):
        out = sync(call())
    samples: list[float] = []
    clock = time.perf_counter
    started = clock()
    while len(samples) < plan.iters or (
            clock() - started < plan.min_time_s and len(samples) < plan.max_iters):
        t0 = clock()
        out = call()
        sync(out)
        samples.append(clock() - t0)
    return samples, out


def best_seconds(call: Callable[[], Any], sync: Callable[[Any], Any], reps: int) -> float:
    """Fastest of ``reps`` synced calls after one untimed call (compilation): a throughput probe."""
    sync(call())
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        sync(call())
        best = min(best, time.perf_counter() - t0)
    return best


def percentile(a: Any, q: Any, axis: int | None = None) -> Any:
    """The one quantile of the project (numpy's linear interpolation): the rows' p10/p90, the device
    columns and the gate's p10 statistic all agree on it. ``q`` in percent; the median is q=50."""
    return np.percentile(np.asarray(a, dtype=np.float64), q, axis=axis)


def summarize(samples: list[float]) -> dict[str, float | int]:
    """Median (the headline), mean, min, p10, p90, stdev, cv and n of per-iteration seconds."""
    a = np.asarray(samples, dtype=np.float64)
    mean = float(a.mean())
    stdev = float(statistics.stdev(a)) if len(a) > 1 else 0.0
    return {
        "n": int(len(a)),
        "median_s": float(percentile(a, 50)),
        "mean_s": mean,
        "min_s": float(a.min()),
        "p10_s": float(percentile(a, 10)),
        "p90_s": float(percentile(a, 90)),
        "stdev_s": stdev,
        "cv": stdev / mean if mean > 0 else 0.0,
    }


def device_summary(samples: Sequence[float]) -> dict[str, float]:
    """device_median_s, device_p10_s, device_p90_s of per-iteration device seconds (empty: none)."""
    if not len(samples):
        return {}
    a = np.asarray(samples, dtype=np.float64)
    med, p10, p90 = (float(v) for v in percentile(a, [50, 10, 90]))
    return {"device_median_s": med, "device_p10_s": p10, "device_p90_s": p90}


def with_timer(result: CaseResult, plan: TimingPlan, traced: tuple[float, ...] | str,
               source: str = "") -> CaseResult:
    """The result with the timer it was measured with and its per-iteration device seconds (or, when
    none were found, a note saying why and empty device columns: never a zero). Every backend's ending:
    ``traced`` is the JAX trace pass's seconds or torch_xla's ExecuteTime ones; ``source`` says where
    they came from, in the row's notes."""
    if not plan.device_timed:
        return result.replace(timer="wallclock")
    if isinstance(traced, str):
        note = f"trace timer: no device times ({traced}); device columns empty"
        return result.replace(timer="trace", notes="; ".join(filter(None, [result.notes, note])))
    stats = device_summary(traced)
    notes = "; ".join(filter(None, [result.notes, f"trace timer: {source}" if source else ""]))
    median = result.stats.get("median_s")
    if median and stats["device_median_s"] > median:  # seen on CPU for programs of tens of microseconds
        notes = "; ".join(filter(None, [notes, "trace timer: device_median_s above median_s: the profiled pass ran "
                                               "slower (the profiler's own cost on the threads that run the ops, "
                                               "or the host's drift between the passes)"]))
    return result.replace(timer="trace", device_samples=traced, device_stats=stats, notes=notes)


# The workloads whose headline is the device clock on an accelerator (kernels: what tokamax and xprof
# report); a train step keeps its pipelined loop's wall time (steps dispatched back to back, one sync: what
# a training loop pays), the device seconds beside it.
DEVICE_HEADLINE_WORKLOADS = ("attention", "paged_attention")


def _kernel_on_accelerator(platform: str, workload: str) -> bool:
    return platform != "cpu" and workload in DEVICE_HEADLINE_WORKLOADS


def device_is_headline(platform: str, workload: str, plan: TimingPlan) -> bool:
    """Whether the case's headline will be its device seconds (device_headline): a kernel workload timed by
    the device clock on an accelerator."""
    return plan.device_timed and _kernel_on_accelerator(platform, workload)


def passes(plan: TimingPlan, device_head: bool) -> TimingPlan:
    """The wall-clock loop's plan. Where the device clock is the headline, the wall clock is the column
    beside it (wall_median_s, host_overhead): ``iters`` synced calls, and ``min_time_s`` goes to the device
    pass (device_iters), which dispatches its calls back to back and costs the device's time, not the
    host's sync per call as well."""
    return dataclasses.replace(plan, min_time_s=0.0) if device_head else plan


def device_iters(plan: TimingPlan, wall_samples: Sequence[float], device_head: bool) -> int:
    """Calls in the device clock's pass: as many as the wall loop took; where the device clock is the
    headline, enough for ``min_time_s`` at the wall loop's median (an upper bound of the device's time per
    call), between ``iters`` and ``max_iters``."""
    n = len(wall_samples)
    if not device_head or plan.min_time_s <= 0 or not n:
        return n
    per_call = max(float(np.median(np.asarray(wall_samples, dtype=np.float64))), 1e-9)
    return max(n, min(plan.max_iters, math.ceil(plan.min_time_s / per_call)))


def device_headline(result: CaseResult, platform: str, workload: str = "attention") -> CaseResult:
    """On an accelerator, a result whose device clock ran (the trace timer) with its device seconds as the
    headline: samples, median_s ... cv, and every rate derived from them, are the device's per-iteration
    seconds, as tokamax and xprof report a kernel and as a training loop that never syncs each step pays;
    the wall clock's median per call stays in ``wall_median_s`` (host_overhead is their ratio). On CPU, or
    without device samples, the result is unchanged (``clock`` wall)."""
    if not result.device_samples or not _kernel_on_accelerator(platform, workload):
        return result
    return result.replace(samples=tuple(result.device_samples), stats=summarize(list(result.device_samples)),
                          clock="device", wall_median_s=result.stats.get("median_s"))


def max_normalised_error(outs: Sequence[np.ndarray], refs: Sequence[np.ndarray]) -> float:
    """max over tensors of max|out - ref| / max(1, max|ref|), in float32 on the host; inf if not finite.

    Framework-free (numpy in): every backend compares its outputs with its float32 reference this way.
    """
    worst = 0.0
    for o, r in zip(outs, refs):
        o = np.asarray(o, dtype=np.float32)
        r = np.asarray(r, dtype=np.float32)
        if not np.all(np.isfinite(o)):
            return float("inf")
        scale = max(1.0, float(np.max(np.abs(r))))
        worst = max(worst, float(np.max(np.abs(o - r))) / scale)
    return worst


def case_result(stats: dict[str, Any], samples: list[float], plan: TimingPlan, lower_s: float | None,
                compile_s: float, mem: int | None, err: float, err_tol: float, notes: str,
                tokens_per_step: float | None = None, tokens_global: bool = False, **metrics: Any) -> CaseResult:
    """The reply of a case runner (any backend): timings, correctness, counts (``metrics``, e.g. flops;
    ``tokens_per_step``, whose rate the parent derives) and samples."""
    return CaseResult(samples=tuple(samples), stats=stats, warmup=plan.warmup, compile_s=compile_s,
                      lower_s=lower_s, peak_memory_bytes=mem, max_abs_err=err, err_tol=err_tol,
                      correct=bool(err <= err_tol), notes=notes, metrics=metrics,
                      tokens_per_step=tokens_per_step, tokens_global=tokens_global, timer="wallclock")
