"""What the parent decides for a case before its worker runs it, once: the platform, whether its kernel
runs in the Pallas interpreter, which clock is its row's headline, how it is tuned (off, fixed or a
search, with the cache folder) and how it is timed. The request carries the plan (RunRequest); the
worker follows it and the row builder (run/rows.py) reads the same plan, so no rule runs twice.
Framework-free."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from xlabench import impls as catalog
from xlabench.protocol.timing_plan import Clock, TimingPlan, Tuning, default_tune
from xlabench.protocol.worker_messages import RunRequest
from xlabench.suite import Case
from xlabench.workloads import WORKLOADS

INTERPRETED = "the kernel runs in the Pallas interpreter, whose timings say nothing of a chip"


@dataclass(frozen=True)
class CasePlan:
    """The parent's decisions for one case (``timing`` holds the headline clock and the tuning too)."""

    platform: str
    interpret: bool
    timing: TimingPlan

    @property
    def headline(self) -> Clock:
        return self.timing.headline

    def request(self, case: Any, trace_dir: Optional[str] = None) -> RunRequest:
        """The worker's request for one repeat (``trace_dir``: that repeat's kept profile)."""
        return RunRequest.from_case(case, dataclasses.replace(self.timing, trace_dir=trace_dir),
                                    interpret=self.interpret, platform=self.platform)


def interpreted(info: Optional[catalog.ImplInfo], platform: str) -> bool:
    """Whether an impl (its catalog entry) runs in the Pallas interpreter on ``platform``."""
    return bool(info and info.interpreted(platform))


def headline(platform: str, workload: str, timing: TimingPlan) -> Clock:
    """The clock of the row's headline: the device clock for a workload whose record says so (a kernel's,
    as tokamax and xprof report it) timed by it (the trace timer) on an accelerator; else the wall clock (a
    train step's pipelined loop: what a training loop pays, the device seconds beside it)."""
    w = WORKLOADS.get(workload)
    on_device = timing.device_timed and platform != "cpu" and w is not None and w.headline == "device"
    return "device" if on_device else "wall"


def tuning(case: Case, interpret: bool, platform: str, asked: Optional[bool]) -> tuple[Tuning, str]:
    """(mode, note) of a kernel's block-size search, if it has one (the worker knows its space): ``fixed``
    when the suite sets the blocks (a case parameter of its workload record's ``fixed_by``); ``off`` for an
    interpreted kernel (refused, saying why, when --tune asked: ``asked``) or when tuning is off (--no-tune,
    or by default on CPU); else ``search``."""
    w = WORKLOADS.get(case.workload)
    if w is not None and any(case.params.get(k) is not None for k in w.fixed_by):
        return "fixed", ""
    if interpret:
        return "off", f"not tuned{' (--tune refused)' if asked else ''}: {INTERPRETED}"
    return ("search" if (default_tune(platform) if asked is None else asked) else "off"), ""


def plan_case(case: Case, info: Optional[catalog.ImplInfo], platform: str, ctx: Any) -> CasePlan:
    """Every decision the parent makes for ``case`` on ``platform`` under the run's context ``ctx``
    (its --tune / --no-tune and tuning cache folder)."""
    interpret = interpreted(info, platform)
    timing = case.measure.timing_plan(platform)
    mode, note = tuning(case, interpret, platform, ctx.tune)
    timing = dataclasses.replace(timing, headline=headline(platform, case.workload, timing), tune=mode,
                                 tune_dir=ctx.tune_dir if mode == "search" else None, tune_note=note,
                                 reference=getattr(ctx, "references", {}).get(case.case_id, ""))
    return CasePlan(platform, interpret, timing)


def shared_references(cases: Sequence[Case]) -> dict[str, str]:
    """case_id -> the mode whose reference the case computes where not its own (TimingPlan.reference): for a
    case whose twin (same backend and reference_twin key: its workload record's) of the covering mode comes
    later in ``cases``, that mode (attention: a fwd case followed by its shape's fwd_bwd). Its worker computes
    the covering reference once and keeps it for the twin's cases (a suite runs a shape's fwd cases, then its
    fwd_bwd ones): the forward is not computed twice. A hint: a worker that keeps no reference ignores it."""
    later: set[tuple] = set()
    out: dict[str, str] = {}
    for c in reversed(list(cases)):
        w = WORKLOADS.get(c.workload)
        if w is None or w.reference_twin is None:
            continue
        key, mode, covering = w.reference_twin(c.params)
        if mode == covering:
            later.add((c.backend, key))
        elif (c.backend, key) in later:
            out[c.case_id] = covering
    return out
