"""What workers and the parent share: framework-free message shapes and the skip signal."""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

# The timing statistics of a reply (timing.summarize's keys, in its order).
STAT_FIELDS = ("n", "median_s", "mean_s", "min_s", "p10_s", "p90_s", "stdev_s", "cv")
# The statistics of the trace timer's device seconds (timing.device_summary's keys).
DEVICE_STAT_FIELDS = ("device_median_s", "device_p10_s", "device_p90_s")


class CaseSkipped(Exception):
    """Raised by a backend when an impl cannot run a case (the message is the reason in the row)."""


@dataclass(frozen=True)
class CaseResult:
    """The reply of every case runner (any backend, any workload): what the worker measured.

    Workers report counts per iteration (``metrics``: flops, bytes ...; ``tokens_per_step``); every
    rate (TFLOP/s, GB/s, tokens/s) is derived once in the parent after the repeats are pooled
    (xlabench.run.metrics.derive). Crosses the worker pipe as ``to_message()`` / ``from_message()``.
    """

    samples: tuple[float, ...]  # per-iteration seconds, every one kept
    stats: Mapping[str, Any]  # timing.summarize(samples): n, median_s, ...
    warmup: Optional[int] = None
    compile_s: Optional[float] = None
    lower_s: Optional[float] = None
    peak_memory_bytes: Optional[int] = None
    max_abs_err: Optional[float] = None
    err_tol: Optional[float] = None
    correct: Optional[bool] = None  # max_abs_err <= err_tol (kept, not recomputed: pooling ANDs it)
    notes: Optional[str] = None
    # Other row columns measured or counted in the worker, in row order (flops, kernel_flops, bytes,
    # flops_palm, params_count, losses ...). Never a rate per median_s.
    metrics: Mapping[str, Any] = field(default_factory=dict)
    tokens_per_step: Optional[float] = None  # tokens one iteration processes (not a column: the parent's tokens_per_s)
    tokens_global: bool = False  # tokens_per_step is a global batch over the case's devices: tokens_per_s_per_device too
    timer: Optional[str] = None  # wallclock | trace: how the row was timed (samples are wallclock either way)
    device_samples: tuple[float, ...] = ()  # trace timer: per-iteration device seconds of a separate profiled pass
    device_stats: Mapping[str, Any] = field(default_factory=dict)  # timing.device_summary(device_samples)

    @property
    def fields(self) -> dict[str, Any]:
        """The row columns of this result (no derived rates), in the order rows always had them."""
        out: dict[str, Any] = {**self.stats}
        if self.timer is not None:
            out["timer"] = self.timer
        out.update(self.device_stats)
        for name in ("lower_s", "compile_s", "warmup"):
            out[name] = getattr(self, name)
        out.update(self.metrics)
        for name in ("peak_memory_bytes", "max_abs_err", "err_tol", "correct", "notes"):
            out[name] = getattr(self, name)
        return out

    def replace(self, **changes: Any) -> "CaseResult":
        return dataclasses.replace(self, **changes)

    def to_message(self) -> dict[str, Any]:
        """The JSON-able reply body (the worker adds ``status``)."""
        msg: dict[str, Any] = {"fields": self.fields, "samples": list(self.samples)}
        if self.device_samples:
            msg["device_samples"] = list(self.device_samples)
        if self.tokens_per_step is not None:
            msg["tokens_per_step"] = self.tokens_per_step
            msg["tokens_global"] = self.tokens_global
        return msg

    @classmethod
    def from_message(cls, msg: Mapping[str, Any]) -> "CaseResult":
        """The inverse of ``to_message`` (an ``ok`` reply of a worker); absent fields are None."""
        fields = dict(msg.get("fields", {}))
        typed = {f.name for f in dataclasses.fields(cls)} - {"samples", "stats", "metrics", "tokens_per_step",
                                                             "tokens_global", "device_samples", "device_stats"}
        stats = {k: fields.pop(k) for k in STAT_FIELDS if k in fields}
        device_stats = {k: fields.pop(k) for k in DEVICE_STAT_FIELDS if k in fields}
        known = {k: fields.pop(k) for k in list(fields) if k in typed}
        return cls(samples=tuple(msg.get("samples", ())), stats=stats, metrics=fields,
                   device_samples=tuple(msg.get("device_samples", ())), device_stats=device_stats,
                   tokens_per_step=msg.get("tokens_per_step"), tokens_global=bool(msg.get("tokens_global", False)),
                   **known)


def runner_table(package: str, runners: dict[str, str]) -> Callable[[str], Callable[..., CaseResult]]:
    """A backend's ``runner_for``: workload -> ``"module:function"`` in ``package``, imported on first use
    (a worker imports only the workloads it runs)."""

    def runner_for(workload: str) -> Callable[..., CaseResult]:
        """The function that runs one case of ``workload`` and returns its CaseResult."""
        if workload not in runners:
            raise ValueError(f"the {package.rsplit('.', 1)[-1]} backend has no workload {workload!r} "
                             f"(it runs: {', '.join(runners)})")
        module, function = runners[workload].split(":")
        return getattr(importlib.import_module(f"{package}.{module}"), function)

    return runner_for
