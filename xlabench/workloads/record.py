"""What a workload is, in one record (issue 51): its name, params model, tuned parameters, tune key, headline
clock and kernel family, how a suite of it expands, and how its rows are read and drawn. Each workload module
declares its WORKLOAD beside its params model; workloads.WORKLOADS collects them, and every per-workload table
(the schema's tuned columns, the case plan's choices, the kernel families, the tuner's keys, the report's
figures and fit charts) derives from that registry: no module outside workloads/ dispatches on a workload's
name (tests/test_workload_records.py). The backends' runner tables are read from these records (tests check
each workload's runner is in each backend)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal, Optional

# The kernel families a workload runs (impls/kernel.py: a kernel module serves one family's workloads).
ATTENTION_KERNELS, PAGED_KERNELS = "attention", "paged"


@dataclass(frozen=True)
class SummaryFigure:
    """A figure of merit a summary shows beside the time: ``format(row[column] * scale, spec)`` under ``header``."""
    header: str
    column: str
    scale: float
    spec: str


MFU_FIGURE = SummaryFigure("MFU %", "mfu", 100, ".2f")  # the share of the device's peak
# A kernel's figures: its compute rate and its share of the device's peak (a workload's default).
KERNEL_FIGURES = (SummaryFigure("TFLOP/s", "tflops_per_s", 1, ".4g"), MFU_FIGURE)


@dataclass(frozen=True)
class FitChart:
    """How the memory fit of its compile rows (`xlabench compile`) is read and drawn: the report's fit chart
    (report/plots.py) and Fit table (report/markdown.py), per-device memory against one case column."""
    x: str  # the case column the memory is drawn against (the chart's x, the table's sizes)
    xlabel: str  # the x axis's label
    what: str  # the chart's title
    lines: tuple[str, ...] = ("impl",)  # the case columns one line is (after the target)
    panels: tuple[str, ...] = ("target",)  # the case columns one panel is
    named: tuple[str, ...] = ()  # panel columns whose values show as name=value in a panel's title
    colour_by: str = "impl"  # the line column that picks a line's colour (as in the workload's run charts)
    dash_by: str = "impl"  # the line column that picks its dash
    # The x column holds a spec of lengths ('uniform:256-1024'), not a number: drawn at the mean length,
    # labelled with the spec.
    x_is_spec: bool = False
    columns_by: str = ""  # a panel column whose every value gets a column of panels ("": two columns)
    # The Fit table gives each line's largest x that fits and smallest that does not (a sweep of the x to
    # the capacity); False: each impl's case outcomes and its oom cases.
    largest_fit: bool = False


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
    # (backend, params) -> why that backend cannot run the case at all, or None: the worker skips it for that
    # reason and the dry run predicts it, whether or not the parent predicts the kernels' skips.
    case_skip: Optional[Callable[[str, dict[str, Any]], Optional[str]]] = None
    # Its backend runners, "module:function" in each backend's package (backends/runners.py): the function
    # that runs one case, and the one that compiles it for a target (a backend that compiles).
    runner: str = ""
    compiler: str = ""
    # What a wall-clock sample spans: one synced call ("call"), or steps dispatched back to back with one
    # sync per sample ("steps": a training loop's time).
    wall_clock: Literal["call", "steps"] = "call"
    # A case is one program over a mesh of devices, its batch split by a sharding mode (params' sharding,
    # mesh): torch_xla runs it in an SPMD worker; cases whose modes are one program on their mesh run once
    # (suite/slice_fit.py's program_key); the charts draw a line per sharding mode.
    sharded: bool = False
    # A suite of it is a study of a model on a slice: expansion fits it to the slice (suite/slice_fit.py:
    # its devices, the largest of its model presets that fits, its batch ladder).
    fits_slice: bool = False
    # A built-in impl's case drops the block sizes its rule does not take (impls/attention_rules.py: naive
    # runs once per shape of a block sweep, not once per block); False: the case keeps the suite's blocks.
    drops_untaken_blocks: bool = False
    # Where explain finds a row's analytic attention FLOPs per device per step (the attention roofline of its
    # breakdown): the row's kernel_flops column (the row is the kernel), its params model's attention_flops()
    # (the attention share of a step's model FLOPs), or nowhere ("").
    attention_flops: Literal["", "kernel_flops", "params"] = ""
    # A case whose float32 reference another mode's reference covers (attention: a fwd case's output is its
    # fwd_bwd twin's): params -> (what its reference depends on besides the mode, its mode, the mode whose
    # reference covers the others); None: each case computes its own (run/case_plan.py: shared_references).
    reference_twin: Optional[Callable[[dict[str, Any]], tuple[Any, str, str]]] = None
    figures: tuple[SummaryFigure, ...] = KERNEL_FIGURES  # what a summary shows beside the time
    fit: Optional[FitChart] = None  # its memory fit chart and table (None: its compile rows get none)

    @property
    def fixed_by(self) -> tuple[str, ...]:
        """The case parameters that, set, fix the kernel's blocks (the row is measured at exactly those)."""
        return self.tuned if self.fixes_blocks is None else self.fixes_blocks
