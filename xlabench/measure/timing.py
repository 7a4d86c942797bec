"""Timing: warm-up, timed iterations each ended by the framework's sync, every sample kept.

Knows nothing about attention or any framework: it gets a zero-argument call and a sync function. The
statistics of the samples are in xlabench/stats/summary.py (the parent summarises: run/rows.py).
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Callable, Sequence

import numpy as np

from xlabench.protocol.timing_plan import TimingPlan, default_timer
from xlabench.protocol.timers import TIMERS
from xlabench.protocol.worker_messages import CaseResult
from xlabench.stats.summary import median

__all__ = ["TIMERS", "TimingPlan", "default_timer"]  # re-exported: protocol.timers, protocol.timing_plan


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


def with_timer(result: CaseResult, plan: TimingPlan, traced: tuple[float, ...] | str,
               source: str = "") -> CaseResult:
    """The result with the timer it was measured with and its per-iteration device seconds (or, when
    none were found, a note saying why and no device samples: never a zero). Every backend's ending:
    ``traced`` is the JAX trace pass's seconds or torch_xla's ExecuteTime ones; ``source`` says where
    they came from, in the row's notes. No statistic: the parent summarises (run/rows.py)."""
    if not plan.device_timed:
        return result.replace(timer="wallclock")
    if isinstance(traced, str):
        note = f"trace timer: no device times ({traced}); device columns empty"
        return result.replace(timer="trace", notes="; ".join(filter(None, [result.notes, note])))
    notes = "; ".join(filter(None, [result.notes, f"trace timer: {source}" if source else ""]))
    return result.replace(timer="trace", device_samples=tuple(traced), notes=notes)


def passes(plan: TimingPlan) -> TimingPlan:
    """The wall-clock loop's plan. Where the device clock is the headline (``plan.headline``, the parent's
    decision), the wall clock is the column beside it (wall_median_s, host_overhead): ``iters`` synced
    calls, and ``min_time_s`` goes to the device pass (device_iters), which dispatches its calls back to
    back and costs the device's time, not the host's sync per call as well."""
    return dataclasses.replace(plan, min_time_s=0.0) if plan.headline == "device" else plan


def device_iters(plan: TimingPlan, wall_samples: Sequence[float]) -> int:
    """Calls in the device clock's pass: as many as the wall loop took; where the device clock is the
    headline, enough for ``min_time_s`` at the wall loop's median (an upper bound of the device's time per
    call), between ``iters`` and ``max_iters``."""
    n = len(wall_samples)
    if plan.headline != "device" or plan.min_time_s <= 0 or not n:
        return n
    per_call = max(median(wall_samples), 1e-9)
    return max(n, min(plan.max_iters, math.ceil(plan.min_time_s / per_call)))


def max_normalised_error(outs: Sequence[Any], refs: Sequence[Any],
                         parts: Callable[[Any, Any], tuple[bool, float, float]] | None = None) -> float:
    """max over tensors of max|out - ref| / max(1, max|ref|), in float32; inf if an output is not finite.

    Every backend compares its outputs with its float32 reference this way. ``parts(out, ref)`` reduces one
    pair to (all of out finite, max|ref|, max|out - ref|): on the host with numpy by default (framework-free);
    a backend may pass one that reduces where its arrays are (jax: on the device, common.device_error_parts).
    """
    worst = 0.0
    for o, r in zip(outs, refs):
        finite, scale, diff = (parts or host_error_parts)(o, r)
        if not finite:
            return float("inf")
        worst = max(worst, diff / max(1.0, scale))
    return worst


def host_error_parts(out: Any, ref: Any) -> tuple[bool, float, float]:
    """(all of ``out`` finite, max|ref|, max|out - ref|) in float32 on the host (max_normalised_error's)."""
    o = np.asarray(out, dtype=np.float32)
    r = np.asarray(ref, dtype=np.float32)
    if not np.all(np.isfinite(o)):
        return False, 0.0, 0.0
    return True, float(np.max(np.abs(r))), float(np.max(np.abs(o - r)))


def case_result(samples: list[float], plan: TimingPlan, lower_s: float | None,
                compile_s: float, mem: int | None, err: float, err_tol: float, notes: str,
                tokens_per_step: float | None = None, tokens_global: bool = False, **metrics: Any) -> CaseResult:
    """The reply of a case runner (any backend): its samples, correctness, counts (``metrics``, e.g. flops;
    ``tokens_per_step``, whose rate the parent derives); no statistic of the samples."""
    return CaseResult(samples=tuple(samples), warmup=plan.warmup, compile_s=compile_s,
                      lower_s=lower_s, peak_memory_bytes=mem, max_abs_err=err, err_tol=err_tol,
                      correct=bool(err <= err_tol), notes=notes, metrics=metrics,
                      tokens_per_step=tokens_per_step, tokens_global=tokens_global, timer="wallclock")
