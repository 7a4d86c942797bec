"""What a workload is, in one record (issue 51): its name, params model, tuned parameters, tune key, headline
clock and kernel family. Each workload module declares its WORKLOAD beside its params model;
workloads.WORKLOADS collects them, and every per-workload table (the schema's tuned columns, the case plan's
choices, the kernel families, the tuner's keys) derives from that registry. The backends' runner tables are
read from these records (tests check each workload's runner is in each backend)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal, Optional

# The kernel families a workload runs (impls/kernel.py: a kernel module serves one family's workloads).
ATTENTION_KERNELS, PAGED_KERNELS = "attention", "paged"


@dataclass(frozen=True)
class Workload:
    name: str  # the suite's ``workload:`` and the rows' workload column
    params: type  # its params model (a pydantic BaseModel)
    kernels: str  # the family of kernels its impls are (ATTENTION_KERNELS, PAGED_KERNELS)
    tuned: tuple[str, ...] = ()  # the kernel parameters its kernels' search tunes (the schema's tuned_* columns)
    # What a tuned winner depends on: params -> the case without its blocks (the tuning cache's key); None:
    # the workload is not tuned.
    tune_key: Optional[Callable[[Any], dict[str, Any]]] = None
    # The row's headline clock on an accelerator when the trace timer times it: "device" for a kernel (what
    # tokamax and xprof report), "wall" for a train step (its pipelined loop's time: what training pays).
    headline: Literal["device", "wall"] = "device"
    fixes_blocks: Optional[tuple[str, ...]] = None  # the case parameters that fix its blocks (None: ``tuned``)
    predicts_skips: bool = True  # whether the parent predicts its kernels' skips from their rules (impls/)
    # Its backend runners, "module:function" in each backend's package (backends/runners.py): the function
    # that runs one case, and the one that compiles it for a target (a backend that compiles).
    runner: str = ""
    compiler: str = ""

    @property
    def fixed_by(self) -> tuple[str, ...]:
        """The case parameters that, set, fix the kernel's blocks (the row is measured at exactly those)."""
        return self.tuned if self.fixes_blocks is None else self.fixes_blocks
