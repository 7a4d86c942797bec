"""`xlabench validate`, `list`, `run` and `merge`: parse, call xlabench.run.session, print progress and the summary."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any, Optional

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from xlabench import results
from xlabench.cli import history as history_commands
from xlabench.cli.common import BadInput, console, err_console, load_suite, warn
from xlabench.worker.timing import TIMERS
from xlabench.report import summary
from xlabench.run import session
from xlabench.run.interrupts import Interrupted, interruptible

_STYLE = {"ok": "green", "failed": "red", "skipped": "yellow"}


@click.command()
@click.argument("suite_files", nargs=-1, required=True, type=click.Path())
def validate(suite_files: tuple[str, ...]) -> None:
    """Check suite files; print how many cases each profile expands to."""
    for path in suite_files:
        s = load_suite(path)
        counts = [("base", len(s.cases("")))] + [(n, len(s.cases(n))) for n in s.profile_names()]
        shown = ", ".join(f"{n}: {c}" for n, c in counts)
        console.print(f"[green]ok[/] {path}: suite {s.name!r}, workload {s.spec.workload}; cases per profile: {shown}")
        for name, _ in counts:  # --- gate: samples per case (docs/gate.md) ---
            short = session.samples_warning(f"{path} profile {name}", s.cases("" if name == "base" else name))
            if short:
                warn(short)


@click.command(name="list")
@click.argument("suite_file", type=click.Path())
@click.option("--profile", default=None, help="Profile to expand (default: picked from the detected platform; 'base' for none).")
def list_cases(suite_file: str, profile: Optional[str]) -> None:
    """The expanded cases as a table."""
    s = load_suite(suite_file)
    try:
        prof, platform = session.resolve_profile(s, profile)
    except session.RunStartError as e:
        raise click.ClickException(str(e)) from None
    cases = s.cases(prof)
    cols = results.varying(c.params for c in cases)
    t = Table(title=f"{s.name}: {len(cases)} cases (profile {prof or 'base'}"
                    + (f", detected platform {platform})" if platform else ")"))
    for col in ["#", "case_id", "backend", "impl"] + cols:
        t.add_column(col)
    for c in cases:
        t.add_row(str(c.index), c.case_id, c.backend, c.impl, *[str(c.params.get(k)) for k in cols])
    console.print(t)
    fixed = {k: v for k, v in cases[0].params.items() if k not in cols} if cases else {}
    console.print("fixed: " + ", ".join(f"{k}={v}" for k, v in fixed.items()))


@click.command()
@click.argument("suite_file", type=click.Path())
@click.option("--profile", default=None, help="Profile to run (default: picked from the detected platform; 'base' for none).")
@click.option("--out", "out_dir", default="results", show_default=True, type=click.Path(), help="Results directory.")
@click.option("--resume", "resume_csv", default=None, type=click.Path(),
              help="Continue RUN.csv: skip cases that already have a row (any status).")
@click.option("--timeout", "timeout_s", default=None, type=float, help="Per-case limit in seconds (overrides the suite's measure.timeout_s).")
@click.option("--peak-tflops", default=None, type=float, help="Per-device peak TFLOP/s for MFU (overrides the table).")
@click.option("--impl", "only_impls", multiple=True, help="Run only these impls (repeatable).")
@click.option("--python-torch-xla", "python_torch_xla", default=None, type=click.Path(),
              help="Python of the torch_xla environment (default: $XLABENCH_TORCH_XLA_PYTHON, else "
                   ".venv-torch-xla/bin/python; create it with `make torch-xla-env`).")
@click.option("--shard", "shard_spec", default=None, metavar="I/N",
              help="Run only shard I of N (0-based): a deterministic, cost-balanced split for fanning a suite out "
                   "over machines; combine the pieces with `xlabench merge`.")
@click.option("--coordinator", default=None, metavar="HOST:PORT",
              help="Multi-host run: address of process 0's coordinator (with --num-processes, --process-id). "
                   "Without these, a SLURM or multi-host TPU launch is detected from the environment.")
@click.option("--num-processes", type=int, default=None, help="Multi-host run: number of processes.")
@click.option("--process-id", type=int, default=None, help="Multi-host run: this process's index (0 writes the CSV).")
@click.option("--local-devices", type=int, default=None,
              help="Virtual CPU devices per process (CPU only; default: the case's device count).")
@click.option("--init-timeout", type=int, default=120, show_default=True,
              help="Seconds to wait for all processes to join a multi-host run before failing.")
@click.option("--repeats", type=int, default=None,
              help="Independent runs of each case, taken in passes over the suite and pooled into its row "
                   "(overrides measure.repeats; for gating on a shared host see docs/gate.md).")
@click.option("--timer", type=click.Choice(TIMERS), default=None,
              help="wallclock | trace: also per-iteration device seconds from a profiler trace, a separate pass "
                   "(overrides measure.timer; default: trace on TPU/GPU, wallclock on CPU; JAX only).")
@click.option("--trace", "trace_dir", default=None, type=click.Path(file_okay=False),
              help="Keep each case's profile in DIR/<case_id>/ (.xplane.pb for xprof / TensorBoard, "
                   "perfetto_trace.json.gz for ui.perfetto.dev), listed in the run's meta JSON and linked by "
                   "`xlabench report`; implies --timer trace (JAX).")
@history_commands.history_option
def run(suite_file: str, history_url: Optional[str], **options: Any) -> None:
    """Run a suite: one row per case in results/<suite>/<run-id>.csv, written as each case ends
    (--history: then recorded in the history store)."""
    if history_url:
        history_commands.open_store(history_url).close()  # a bad store is refused before the run, not after
    try:
        with interruptible():
            outcome = run_with_progress(load_suite(suite_file), **options)
    except Interrupted as e:
        err_console.print(interrupted_message(e, suite_file, options), markup=False, soft_wrap=True)
        sys.exit(e.exit_code)
    if history_url and outcome.primary:
        added, _ = history_commands.add_runs(history_url, [outcome.files.csv])
        console.print(f"history: {'recorded in' if added else 'already in'} {history_url}")
    if outcome.failed or outcome.wrong:
        sys.exit(1)


def run_with_progress(s: Any, **options: Any) -> session.RunOutcome:
    """session.run_suite with a progress bar, a line per case, the summary table and the counts (also the
    gate's runs). Bad input is BadInput (exit 2); a run whose workers cannot start exits 1."""
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        TextColumn("eta"), TimeRemainingColumn(), console=console, transient=True)
    task: list[Any] = []
    runs_done: dict[str, int] = {}

    def start(lines: list[str], runs: int) -> None:
        console.print(lines[0], markup=False, soft_wrap=True)
        for line in lines[1:]:
            console.print(line, style="dim", markup=False, soft_wrap=True)
        progress.start()
        task.append(progress.add_task(s.name, total=runs))  # counts runs: a case with repeats K is K runs

    def repeat(case: Any) -> None:
        runs_done[case.case_id] = runs_done.get(case.case_id, 0) + 1
        progress.advance(task[0])

    def row(case: Any, r: dict[str, Any]) -> None:
        status = r["status"]
        extra = f"{float(r['median_s']) * 1e3:.3f} ms" if status == "ok" else (r.get("error") or "")[:120]
        progress.console.print(f"[{_STYLE[status]}]{status:7}[/] {case.label()}  {extra}", markup=True, soft_wrap=True)
        progress.advance(task[0], case.measure.repeats - runs_done.get(case.case_id, 0))  # runs it will not take

    hooks = session.RunHooks(warning=warn, start=start, repeat=repeat, row=row)
    try:
        outcome = session.run_suite(s, hooks=hooks, **options)
    except session.RunInputError as e:
        raise BadInput(str(e)) from None
    except session.RunStartError as e:
        raise click.ClickException(str(e)) from None
    finally:
        progress.stop()
    if outcome.start_error:
        err_console.print(f"[red]{outcome.start_error}[/]" + (f"\nresults: {outcome.files.csv}" if outcome.primary else ""))
        sys.exit(1)
    table = summary.build(outcome.rows, [c.params for c in outcome.cases])
    if table.table is not None:
        console.print(table.table)
    for line in table.lines():
        console.print(line, style="yellow", markup=False, soft_wrap=True)
    counts, wrong = outcome.counts(), len(outcome.wrong)
    console.print(f"{counts['ok']} ok, {counts['failed']} failed, {counts['skipped']} skipped "
                  f"in {outcome.seconds:.1f}s" + (f"; {wrong} WRONG RESULT(S)" if wrong else ""))
    console.print(f"results: {outcome.files.csv}" if outcome.primary else
                  f"process {outcome.process_id}: results are written by process 0")
    return outcome


# The `run` options that choose or measure the cases: a resume must repeat them (the profile is in the meta).
_RESUME_OPTIONS = {"only_impls": "--impl", "shard_spec": "--shard", "repeats": "--repeats", "timer": "--timer",
                   "timeout_s": "--timeout",
                   "peak_tflops": "--peak-tflops", "local_devices": "--local-devices",
                   "python_torch_xla": "--python-torch-xla", "trace_dir": "--trace"}


def resume_command(suite_file: str, csv: Path, options: dict[str, Any]) -> str:
    """The `xlabench run` line that completes an interrupted run."""
    words = ["xlabench", "run", suite_file, "--resume", str(csv)]
    for key, flag in _RESUME_OPTIONS.items():
        value = options.get(key)
        for v in (value if isinstance(value, (tuple, list)) else [value]):
            if v is not None:
                words += [flag, str(v)]
    return shlex.join(words)


def interrupted_message(e: Interrupted, suite_file: str, options: dict[str, Any]) -> str:
    """What an interrupted `run` says: how far it got and how to finish it."""
    multihost = any(options.get(k) is not None for k in ("coordinator", "num_processes", "process_id"))
    where = (f"interrupted: {e.done} of {e.total} cases done" if e.total is not None
             else "interrupted while starting the first worker")
    if e.csv is None:
        return where + ("" if e.total is not None else "; no case ran, nothing to resume")
    if multihost:
        return f"{where}; rows so far in {e.csv} (a multi-host run does not resume: start it again everywhere)"
    return f"{where}; resume with: {resume_command(suite_file, e.csv, options)}"


@click.command()
@click.argument("csv_files", nargs=-1, required=True, type=click.Path())
@click.option("-o", "--output", required=True, type=click.Path(), help="Merged CSV to write (samples beside it).")
def merge(csv_files: tuple[str, ...], output: str) -> None:
    """Combine the result CSVs of one suite run in shards (`run --shard I/N`) into one file."""
    from xlabench.results.merge import MergeError, merge as merge_files

    try:
        n = merge_files([Path(p) for p in csv_files], Path(output))
    except (MergeError, results.ResultsFileError) as e:
        raise BadInput(str(e)) from None
    console.print(f"merged {len(csv_files)} file(s), {n} rows -> {output}")
