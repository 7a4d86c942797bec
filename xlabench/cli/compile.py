"""`xlabench compile`: parse, call xlabench.run.compile_runner with the run's progress and interrupt message, print
the compile's lines, table and counts."""

from __future__ import annotations

import sys
import time
from typing import Any, Optional

import click
from rich.console import Group
from rich.table import Table
from rich.text import Text

from xlabench import hardware, roofline
from xlabench.cli.common import BadInput, console, err_console, examples, load_suite, status_line
from xlabench.cli.click_options import run_options
from xlabench.cli.run import RunProgress, until_interrupted
from xlabench.run.run_options import RunOptions
from xlabench.protocol.status import COMPILED, FAILED, LOWERED, OOM, SKIPPED
from xlabench.units import GIB

_STYLE = {COMPILED: "green", LOWERED: "green", OOM: "magenta", FAILED: "red", SKIPPED: "yellow"}


def _gib(v: Any) -> str:
    return "" if v is None or v != v else f"{float(v) / GIB:.2f}"


def _pct(v: Any) -> str:
    return "" if v is None or v != v else f"{100 * float(v):.1f}"


def ceiling_text(row: dict[str, Any]) -> str:
    """The progress line's roofline words: the row's own MFU ceiling (roofline.roofline decides it once, where
    the row is built; the CSV, the report and the chart read the same cell), or why it has none."""
    if _pct(row.get("mfu_ceiling")):
        return f", {row.get('bound_by') or '?'}-bound, MFU ceiling {_pct(row.get('mfu_ceiling'))}%"
    if roofline.uncounted(row):
        return ", no MFU ceiling (XLA cannot count the kernel's FLOPs)"
    return ", no MFU ceiling (no roofline for this row)" if row.get("status") == COMPILED else ""


def summary_table(rows: list[dict[str, Any]], cases: dict[str, Any]) -> Group:
    """Compiled and oom rows with their memory, an error named by its number ('E1') and printed once, whole,
    under the table (summary.error_list); skipped ones are counted per reason below it."""
    from xlabench.report import summary

    shown = [r for r in rows if r["status"] != SKIPPED]
    errors: dict[str, int] = {}
    for r in shown:
        if r.get("error"):
            errors.setdefault(" ".join(str(r["error"]).split()), len(errors) + 1)
    varying = [k for k in dict.fromkeys(k for r in shown for k in cases[r["case_id"]].params)
               if len({str(cases[r["case_id"]].params.get(k)) for r in shown}) > 1]
    t = Table(title="compile summary (per device)")
    for col in ["impl", *varying, "status", "GiB", "of GiB", "HBM %", "compile s", "XLA/analytic FLOPs", "bound by",
                "MFU ceiling %", "note"]:
        t.add_column(col, overflow="fold")
    for r in shown:
        params = cases[r["case_id"]].params
        frac = r.get("hbm_fraction")
        blind = roofline.uncounted(r)  # no bound beside a kernel XLA cannot see into; the ceiling is the row's
        t.add_row(r["impl"], *[str(params.get(k)) for k in varying], Text(r["status"], style=_STYLE[r["status"]]),
                  _gib(r.get("peak_memory_bytes")), _gib(r.get("hbm_capacity_bytes")),
                  "" if frac is None else f"{100 * frac:.0f}",
                  "" if r.get("compile_s") is None else f"{r['compile_s']:.1f}",
                  "" if r.get("flops_ratio") is None else f"{r['flops_ratio']:.2f}",
                  "" if blind else r.get("bound_by") or "", _pct(r.get("mfu_ceiling")),
                  f"{summary.ERROR_MARK}{errors[' '.join(str(r['error']).split())]}" if r.get("error") else
                  roofline.UNCOUNTED_NOTE.format(ratio=r["flops_ratio"]) if blind else "")
    return Group(t, summary.error_list(errors)) if errors else Group(t)


def _skip_lines(rows: list[dict[str, Any]]) -> list[str]:
    reasons: dict[str, int] = {}
    for r in rows:
        if r["status"] == SKIPPED:
            reasons[r.get("error") or ""] = reasons.get(r.get("error") or "", 0) + 1
    return [f"{n} skipped: {why}" for why, n in sorted(reasons.items(), key=lambda kv: -kv[1])]


@click.command(name="compile", epilog=examples(
    "xlabench compile suites/attention.yaml --target v5e-8", "xlabench compile suites/llama.yaml --target v4-8 --slices 2",
    "xlabench compile suites/attention.yaml --target v5e-8 -k seq_len=4096 --impl splash",
    "xlabench compile suites/gpt2.yaml --target v4-8 --jobs 8"))
@click.argument("suite_file", type=click.Path())
@click.option("--target", "target_name", required=True,
              help=f"Slice to compile for: {', '.join(t.name for t in hardware.TARGETS)}.")
@click.option("--slices", default=1, show_default=True, type=click.IntRange(min=1),
              help="Slices of the target (multi-slice), >= 1.")
@run_options("profile", "only_impls", "backends", "where", "out_dir", "resume_csv", "timeout_s", "shard_spec",
             "cache_dir", "no_cache", "jobs", "explain", command="compile")
def compile_cmd(suite_file: str, target_name: str, slices: int, run_opts: RunOptions) -> None:
    """AOT-compile every case for a TPU slice (or lower it for a GPU) without having one.

    Uses libtpu's compile-only devices (pip install -e '.[tpu-compile]'): the real Mosaic kernels and
    the cases' shardings, per-device memory against the device's HBM, XLA's FLOPs next to the analytic
    ones. Rows: compiled, oom, lowered (GPU targets), failed, skipped, in
    results/<suite>/<run-id>.compile.csv. A program compiled before is not compiled again: its figures
    come from the compilation cache (rows say compile_cached; --no-cache to compile afresh). Exit 0 when nothing failed (oom rows are findings, not
    failures), 1 when a case failed, 2 for bad input or a host without libtpu, 130 / 143 interrupted by
    SIGINT / SIGTERM (it says how to resume).
    """
    s = load_suite(suite_file)
    started = time.time()
    outcome = until_interrupted(lambda: _compile(s, target_name, slices, run_opts), suite_file, run_opts,
                                ["compile", "--target", target_name, *(["--slices", str(slices)] if slices > 1 else [])])
    _print_outcome(outcome, started)
    if failed := outcome.count(FAILED):
        err_console.print(f"{failed} case(s) failed to compile", style="red")
        sys.exit(1)


def _compile(s: Any, target_name: str, slices: int, opts: RunOptions) -> Any:
    """compile_runner.compile_suite with the run's progress, one step per case and a compile's line per case
    (_case_line); bad input is BadInput (exit 2)."""
    from xlabench.run import compile_runner

    shown = RunProgress(s.name, line=_case_line, steps=lambda case: 1)
    try:
        return compile_runner.compile_suite(s, target_name, slices, opts, shown.hooks())
    except compile_runner.CompileError as e:
        raise BadInput(str(e)) from None
    finally:
        shown.stop()


def _case_line(case: Any, row: dict[str, Any], width: Optional[int]) -> Optional[Text]:
    """A compiled case's progress line: its memory and compile time (or the cache) and its ceiling, or why it
    failed; none for a skip (counted per reason at the end)."""
    st = row["status"]
    if st == SKIPPED:
        return None
    extra = (f"{_gib(row.get('peak_memory_bytes'))} GiB of {_gib(row.get('hbm_capacity_bytes'))} per device, "
             + ("figures from the cache" if row.get("compile_cached") else f"compile {row.get('compile_s') or 0:.1f}s")
             + ceiling_text(row)
             if st in (COMPILED, OOM) else
             f"lowered in {row.get('lower_s') or 0:.1f}s" if st == LOWERED else (row.get("error") or "")[:120])
    return status_line(st, _STYLE[st], 8, f"{case.label()}  {extra}", width)


def _print_outcome(outcome: Any, started: float) -> None:
    """The compile's table, its skips per reason, the counts and where the rows are."""
    if any(r["status"] != SKIPPED for r in outcome.rows):
        console.print(summary_table(outcome.rows, {c.case_id: c for c in outcome.cases}))
    for line in _skip_lines(outcome.rows):
        console.print(line, style="yellow", soft_wrap=True)
    counts = ", ".join(f"{outcome.count(st)} {st}" for st in (COMPILED, LOWERED, OOM, FAILED, SKIPPED)
                       if outcome.count(st))
    peaks = [p for p in outcome.job_peak_bytes if p]
    console.print(f"{counts or 'no cases'} in {time.time() - started:.1f}s"
                  + (f" ({outcome.jobs} jobs)" if outcome.jobs > 1 else "")
                  + (f"; peak host memory per job: {', '.join(f'{p / GIB:.2f}' for p in peaks)} GiB" if peaks else ""),
                  soft_wrap=True)
    console.print(f"results: {outcome.files.csv}", soft_wrap=True)
