"""Timing a torch_tpu call: the first calls (compiling), the wall-clock loop (measure.timing), then where the
plan asks for the device clock a pass under TorchTPU's profiler, whose XPlane trace gives each call's device
seconds (the ``XLA Modules`` events of the TPU plane, summed per call)."""

from __future__ import annotations

import contextlib
import glob
import os
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

import torch

from xlabench.backends.torch_tpu import env
from xlabench.measure.phases import Phases
from xlabench.measure.timing import TimingPlan, device_iters, passes, time_calls, with_timer
from xlabench.protocol.worker_messages import CaseResult
from xlabench.units import ns_to_s

TRACE_SOURCE = "device times from TorchTPU's profiler (the XPlane trace's XLA Modules events, summed per call)"


@dataclass
class Measurement:
    samples: list[float]
    out: Any
    compile_s: float  # the compiling calls' wall seconds (compile and one execution each)
    device: tuple[float, ...] | str = ()  # per call, device seconds; or why there are none

    def notes(self) -> list[str]:
        return [f"compile_s: the first call's wall seconds (TorchTPU compiles on it; {self.compile_s:.3g} s)"]


def surface(out: Any) -> None:
    """Read one element of the first tensor in ``out`` back to the host: TorchTPU reports a failed execution
    (a kernel out of VMEM, the chip out of memory) only when its outputs are used, so this makes it raise
    here, at the call that failed, not at a later one ('a required argument is in a failed state')."""
    items = out if isinstance(out, (tuple, list)) else (out,)
    first = next((t for t in items if isinstance(t, torch.Tensor)), None)
    if first is not None:
        first.detach().reshape(-1)[:1].to("cpu")


def measure(call: Callable[[], Any], plan: TimingPlan, compiling_calls: int = 1,
            phase: Optional[Phases] = None) -> Measurement:
    """``compiling_calls`` synced calls (a train step needs two: the first creates the optimizer state), then
    the wall loop (warm-up and timed calls), then the profiled device pass where the plan is device-timed;
    ``phase``: the case's phases, which the compiling calls (``compile``) and the rest (``timing``) add to."""
    phase = phase or Phases()
    started = time.perf_counter()
    with phase("compile"):
        for _ in range(compiling_calls):
            surface(call())
            env.sync()
    compile_s = time.perf_counter() - started
    with phase("timing"):
        samples, out = time_calls(call, lambda _: env.sync(), passes(plan))
        device: tuple[float, ...] | str = ()
        if plan.device_timed:
            device = profiled_seconds(call, device_iters(plan, samples), plan.trace_dir)
    return Measurement(samples, out, compile_s, device)


def with_device_times(result: CaseResult, plan: TimingPlan, m: Measurement) -> CaseResult:
    """The row's timer and device samples (wallclock, with the reason in the notes, where there are none)."""
    return with_timer(result, plan, m.device if plan.device_timed else (), source=TRACE_SOURCE)


@contextlib.contextmanager
def _trace_dir(keep: Optional[str]) -> Iterator[str]:
    if keep:
        os.makedirs(keep, exist_ok=True)
        yield keep
        return
    with tempfile.TemporaryDirectory(prefix="xlabench-torch-tpu-trace-") as tmp:
        yield tmp


def profiled_seconds(call: Callable[[], Any], iters: int, keep: Optional[str] = None) -> tuple[float, ...] | str:
    """Per call, the device seconds of ``iters`` synced calls under TorchTPU's profiler; or why there are none."""
    from torch_tpu._internal.profiler import _api as profiler

    with _trace_dir(keep) as folder:
        try:
            with profiler.profile(activities=[profiler.ProfilerActivity.TPU],
                                  on_trace_ready=profiler.xprof_trace_handler(folder)):
                for _ in range(iters):
                    call()
                    env.sync()
        except Exception as e:  # noqa: BLE001 (no device clock: the row says why and keeps the wall clock)
            return f"TorchTPU's profiler did not run: {type(e).__name__}: {e}"[:300]
        files = glob.glob(os.path.join(folder, "**", "*.xplane.pb"), recursive=True)
        if not files:
            return "TorchTPU's profiler wrote no .xplane.pb"
        return per_call_seconds(module_spans(max(files, key=os.path.getmtime)), iters)


def module_spans(path: str) -> list[tuple[float, float]]:
    """(start, seconds) of every XLA module execution on the first TPU device plane of an XPlane file (read as
    the JAX backend reads its traces: trace_timer.load_planes)."""
    from xlabench.backends.jax.trace_timer import load_planes

    planes = sorted((p for p in load_planes(path) if p.name.startswith("/device:TPU")), key=lambda p: p.name)
    for plane in planes:
        for line in plane.lines:
            if line.name == "XLA Modules":
                return sorted((float(e.start_ns), ns_to_s(float(e.duration_ns))) for e in line.events)
    return []


def per_call_seconds(spans: list[tuple[float, float]], calls: int) -> tuple[float, ...] | str:
    """Each call's device seconds: its k consecutive module executions summed, where the trace holds k per call."""
    if not spans:
        return "the trace holds no XLA module executions on a TPU plane"
    if len(spans) % calls:
        return f"{len(spans)} module executions over {calls} calls: not a whole number per call"
    k = len(spans) // calls
    return tuple(float(sum(s for _, s in spans[i * k:(i + 1) * k])) for i in range(calls))


def fresh_case() -> None:
    """Before a case: the last case's compiled graphs and tensors let go, the peak memory counter reset."""
    import gc

    torch._dynamo.reset()
    gc.collect()
    for name in ("empty_cache", "reset_peak_memory_stats"):
        try:
            getattr(torch.accelerator, name)()
        except Exception:  # noqa: BLE001 (not every torch / TorchTPU has them: the figure says what it is)
            pass


def peak_memory(hbm_bytes: Optional[float] = None) -> tuple[Optional[int], str]:
    """Peak device bytes where torch's accelerator API reports them for the TPU, and a figure no chip could
    hold (over ``hbm_bytes``, default the chip's datasheet HBM; TorchTPU 0.2.0 gave 139 TB on a 16 GiB v5e)
    left out, saying so."""
    hbm_bytes = hbm_bytes or env.hbm_bytes()
    source = "torch.accelerator.max_memory_allocated"
    try:
        n = int(torch.accelerator.max_memory_allocated())
    except Exception:  # noqa: BLE001
        return None, "peak memory: not reported by TorchTPU"
    if n <= 0 or (hbm_bytes and n > hbm_bytes):
        return None, (f"peak memory: not recorded ({source} said {n} bytes, "
                      f"{'none' if n <= 0 else 'more than the chip holds'})")
    return n, f"peak memory: {source}"
