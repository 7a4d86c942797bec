"""Timing for torch_xla: compile vs execute from torch_xla.debug.metrics, recompilations, peak memory.

torch_xla traces lazily and compiles at ``torch_xla.sync``: there is no AOT step to time apart. So the
first call (and the warm-up) compile, and their ``CompileTime`` metric delta is the row's compile_s;
every timed iteration is one call plus ``torch_xla.sync(wait=True)`` (tracing, graph hashing, the
cache lookup and execution: what a torch_xla user pays per step). A compilation *during* timing means
the graph changed between iterations: the row says so, because its median then includes compiling.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Optional

import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met

from xlabench.backends.torch_xla.env import sync
from xlabench.protocol.worker_messages import CaseResult
from xlabench.measure.phases import Phases
from xlabench.measure.timing import TimingPlan, time_calls, with_timer
from xlabench.units import ns_to_s, to_ms


@dataclass(frozen=True)
class MetricDelta:
    """Count and accumulated seconds of one torch_xla metric: totals when taken, or a difference."""

    count: int
    seconds: float

    @classmethod
    def take(cls, name: str) -> "MetricDelta":
        data = met.metric_data(name)  # None until the first sample; values in nanoseconds
        return cls(int(data[0]), ns_to_s(float(data[1]))) if data else cls(0, 0.0)

    def __sub__(self, other: "MetricDelta") -> "MetricDelta":
        return MetricDelta(self.count - other.count, self.seconds - other.seconds)



@dataclass
class XlaMeasurement:
    samples: list[float]
    out: Any
    compile_s: float
    compiles_in_warmup: int
    recompiles_while_timing: int
    executions: MetricDelta  # XLA's ExecuteTime (ExecuteReplicatedTime under SPMD) over the timed iterations
    execution_seconds: tuple[float, ...] = ()  # those executions' own seconds, in order (where retained)

    def device_seconds(self) -> tuple[float, ...] | str:
        """Per timed iteration, the seconds of its device executions (ExecuteTime samples; k executions
        per iteration are summed); or why there are none."""
        n, count = len(self.samples), self.executions.count
        if not count:
            return "torch_xla recorded no ExecuteTime in the timed iterations"
        if count % n:
            return f"{count} executions over {n} iterations: not a whole number per iteration"
        if len(self.execution_seconds) != count:
            return f"torch_xla kept {len(self.execution_seconds)} of the {count} ExecuteTime samples"
        k = count // n
        return tuple(float(sum(self.execution_seconds[i * k:(i + 1) * k])) for i in range(n))

    def notes(self) -> list[str]:
        """Row remarks: recompilations (suspicious timing) and what XLA's ExecuteTime saw."""
        out = []
        if self.recompiles_while_timing:
            out.append(f"suspicious: {self.recompiles_while_timing} recompilation(s) while timing "
                       "(the graph changed between iterations; the median includes compiling)")
        out.append(f"torch_xla CompileTime: {self.compiles_in_warmup} graph(s) compiled in warm-up")
        if self.executions.count:
            n = len(self.samples)
            out.append(f"torch_xla ExecuteTime: {to_ms(self.executions.seconds / n):.4g} ms per iteration on the "
                       f"device ({self.executions.count} execution(s) over {n} timed iterations)")
        return out


def _execution_samples() -> list[tuple[float, float]]:
    """(timestamp, seconds) of the ExecuteTime / ExecuteReplicatedTime samples torch_xla still holds."""
    out: list[tuple[int, float]] = []
    for name in ("ExecuteTime", "ExecuteReplicatedTime"):
        data = met.metric_data(name)
        if data:
            out += [(float(t), ns_to_s(float(v))) for t, v in data[2]]
    return sorted(out)


def with_device_times(result: CaseResult, plan: TimingPlan, m: "XlaMeasurement") -> CaseResult:
    """``measure.timer: trace`` on torch_xla: the device columns from XLA's own ExecuteTime metric (per
    execution, what the PJRT client measured), timer ``trace``; wallclock otherwise."""
    return with_timer(result, plan, m.device_seconds() if plan.device_timed else (),
                      source="device times from torch_xla's ExecuteTime metric")


def _executions() -> MetricDelta:
    """Device executions so far: ExecuteTime, or ExecuteReplicatedTime for SPMD programs."""
    a, b = MetricDelta.take("ExecuteTime"), MetricDelta.take("ExecuteReplicatedTime")
    return MetricDelta(a.count + b.count, a.seconds + b.seconds)


def measure(call: Callable[[], Any], plan: TimingPlan, compiling_calls: int = 1,
            phase: Optional[Phases] = None) -> XlaMeasurement:
    """``compiling_calls`` calls (a train step needs two: the first creates the optimizer state, so the
    second is a new graph) plus ``plan.warmup`` warm-up calls, then the timed iterations; ``phase``: the
    case's phases, which the compiling and warm-up calls (``compile``) and the timed ones (``timing``) add to."""
    phase = phase or Phases()
    c0 = MetricDelta.take("CompileTime")
    with phase("compile"):
        for _ in range(compiling_calls + plan.warmup):
            out = call()
            sync()
    c1, e1 = MetricDelta.take("CompileTime"), _executions()
    with phase("timing"):
        samples, out = time_calls(call, lambda _: sync(), dataclasses.replace(plan, warmup=0))
    c2, e2 = MetricDelta.take("CompileTime"), _executions()
    warm, timed = c1 - c0, c2 - c1
    held, count = _execution_samples(), (e2 - e1).count
    new = tuple(s for _, s in held[-count:]) if count and len(held) >= count else ()  # the timed loop's, newest last
    return XlaMeasurement(
        samples=samples, out=out, compile_s=warm.seconds,
        compiles_in_warmup=warm.count, recompiles_while_timing=timed.count, executions=e2 - e1,
        execution_seconds=new)


def peak_memory(device: torch.device) -> tuple[Optional[int], str]:
    """Peak device bytes where the runtime reports them (TPU); the PJRT CPU client does not."""
    try:
        info = xm.get_memory_info(device)
    except Exception:
        return None, "peak memory: not reported by this torch_xla device"
    for key in ("peak_bytes_used", "bytes_used"):
        if key in info:
            return int(info[key]), f"peak memory: xm.get_memory_info {key}"
    return None, "peak memory: not reported by this torch_xla device"


def xla_device() -> torch.device:
    return torch_xla.device()
