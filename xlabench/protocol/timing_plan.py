"""How one case is timed and tuned: the plan the parent decides (run/case_plan.py) from the suite's
``measure`` block, the platform and the run's options, and sends; the worker follows it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from xlabench.protocol.timers import Timer

Clock = Literal["wall", "device"]  # the clock of a row's headline (samples, median_s ...)
Tuning = Literal["off", "fixed", "search"]  # the kernel's defaults | the suite's blocks | its search


@dataclass(frozen=True)
class TimingPlan:
    """Warm-up calls, then at least ``iters`` timed ones and ``min_time_s`` seconds (at most ``max_iters``)."""

    __pydantic_config__ = {"extra": "forbid"}  # a field the worker does not know is refused, named

    warmup: int = 2
    iters: int = 10
    min_time_s: float = 0.0
    max_iters: int = 1000
    timer: Timer = "wallclock"  # trace adds a profiled pass for device seconds (protocol.timers)
    trace_dir: str | None = None  # keep the profiled pass's trace here (xprof / TensorBoard / Perfetto)
    # "device": the device clock is the row's headline, so the wall loop takes ``iters`` synced calls and
    # ``min_time_s`` goes to the device pass (measure.timing.passes); decided in the parent, once.
    headline: Clock = "wall"
    tune: Tuning = "off"  # a kernel with a block-size search: search it (xlabench/tune) first, or not
    tune_dir: str | None = None  # the tuning cache folder (tune "search"; the parent always names it)
    tune_note: str = ""  # why a kernel with a search is not tuned, for its row's notes
    # The mode whose reference the case computes where not its own: "fwd_bwd" for an attention fwd case whose
    # fwd_bwd twin (same shape and mask) the run has later, so one float32 reference serves both (its output
    # is the fwd case's); empty: its own (run/case_plan.py: shared_references)
    reference: str = ""

    @property
    def device_timed(self) -> bool:
        """Whether the backend adds its device timer's seconds (JAX: a profiled pass; torch_xla: XLA's
        ExecuteTime): the one place a timer name decides what a backend does."""
        return self.timer == "trace"


def default_tune(platform: str) -> bool:
    """Whether `run` tunes block sizes when not told: on TPU and GPU; not on CPU, where the Pallas kernels
    run in an interpreter whose timings say nothing of a chip."""
    return platform != "cpu"


def default_timer(platform: str) -> Timer:
    """The timer when the suite names none: trace on an accelerator, wallclock on CPU (where the
    executable's ops run on the host's threads and the trace pass costs time for little news)."""
    return "wallclock" if platform == "cpu" else "trace"
