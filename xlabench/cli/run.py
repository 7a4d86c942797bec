"""`xlabench validate`, `list`, `run` and `merge`: parse, call xlabench.run.suite_runner, print progress and the summary.

Imports stay light (no pandas, scipy or framework): `list` and `validate` must start fast; what only a
run needs is imported inside it.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import click
from rich.table import Table

from xlabench import results
from xlabench.cli import history as history_commands
from xlabench.cli.common import (
    BadInput, console, err_console, examples, load_suite, output_dir, output_file, status_line, warn,
)
from xlabench.cli.click_options import run_options
from xlabench.run.run_options import RunOptions, resume_words
from xlabench.protocol import status as st
from xlabench.units import to_ms

_STYLE = {st.OK: "green", st.FAILED: "red", st.SKIPPED: "yellow"}


@click.command(epilog=examples("xlabench validate suites/attention.yaml", "xlabench validate suites/*.yaml"))
@click.argument("suite_files", nargs=-1, required=True, type=click.Path())
def validate(suite_files: tuple[str, ...]) -> None:
    """Check suite files; print how many cases each profile expands to."""
    from xlabench.run.suite_runner import samples_note

    bad = 0
    for path in suite_files:
        try:
            s = load_suite(path)
        except BadInput as e:  # every file gets its verdict; the exit status says whether any was bad
            if len(suite_files) == 1:
                raise
            e.show()
            bad += 1
            continue
        cases = {n: s.cases("" if n == "base" else n) for n in ["base", *s.profile_names()]}
        notes = {n: samples_note(c, s.spec.measure) for n, c in cases.items()}  # gate: samples per case (docs/gate.md)
        shown = ", ".join(f"{n}: {len(c)}" + (f" ({notes[n]})" if notes[n] else "") for n, c in cases.items())
        console.print(status_line("ok", "green", 2, f"{path}: suite {s.name!r}, workload {s.spec.workload}; "
                                                     f"cases per profile: {shown}"), soft_wrap=True)
    if bad:
        raise BadInput(f"{bad} of {len(suite_files)} suite file(s) invalid")


@click.command(name="list", epilog=examples(
    "xlabench list suites/gpt2.yaml", "xlabench list suites/attention.yaml --profile cpu -k seq_len=512 -k impl=flash",
    "xlabench list suites/attention.yaml --backend torch_xla --json | jq '.cases[].case_id'"))
@click.argument("suite_file", type=click.Path())
@run_options("profile", "only_impls", "backends", "where", "shard_spec")
@click.option("--json", "as_json", is_flag=True, help="Print the cases as JSON (profile, platform, cases with params).")
def list_cases(suite_file: str, run_opts: RunOptions, as_json: bool) -> None:
    """The expanded cases as a table (or JSON); the filters are those of `run`."""
    from xlabench.run import shard, suite_runner
    from xlabench.suite import SuiteError

    s = load_suite(suite_file)
    try:
        prof, platform = suite_runner.resolve_profile(s, run_opts.profile)
        shard_of = shard.parse_shard(run_opts.shard_spec) if run_opts.shard_spec else None
        cases = suite_runner.select_cases(s, prof, run_opts, shard_of)
    except (suite_runner.RunInputError, SuiteError) as e:
        raise BadInput(str(e)) from None
    if as_json:
        click.echo(json.dumps({"suite": s.name, "profile": prof or "base", "detected_platform": platform,
                               "cases": [{"index": c.index, "case_id": c.case_id, "backend": c.backend, "impl": c.impl,
                                          "params": c.params} for c in cases]}, indent=2, default=str))
        return
    cols = results.varying(c.params for c in cases)
    t = Table(title=f"{s.name}: {len(cases)} cases (profile {prof or 'base'}"
                    + (f", detected platform {platform})" if platform else ")"))
    for col in ["#", "case_id", "backend", "impl"] + cols:
        t.add_column(col)
    for c in cases:
        t.add_row(str(c.index), c.case_id, c.backend, c.impl, *[str(c.params.get(k)) for k in cols])
    console.print(t)
    fixed = {k: v for k, v in cases[0].params.items() if k not in cols} if cases else {}
    console.print("fixed: " + ", ".join(f"{k}={v}" for k, v in fixed.items()), soft_wrap=True)


@click.command(epilog=examples(
    "xlabench run suites/attention.yaml", "xlabench run suites/attention.yaml --dry-run -k seq_len=512",
    "xlabench run suites/attention.yaml --backend jax --impl flash --repeats 3 --timeout 300",
    "xlabench run suites/gpt2.yaml --resume results/gpt2/RUN.csv"))
@click.argument("suite_file", type=click.Path())
@run_options("profile", "only_impls", "backends", "where", "out_dir", "resume_csv", "timeout_s", "peak_tflops",
             "repeats", "timer", "shard_spec", "python_torch_xla", "trace_dir", "explain", "dry_run",
             "coordinator", "num_processes", "process_id", "local_devices", "init_timeout", "cache_dir", "no_cache",
             "jobs", "tune", command="run")
@history_commands.record_option()
def run(suite_file: str, run_opts: RunOptions, history_url: Optional[str]) -> None:
    """Run a suite: one row per case in results/<suite>/<run-id>.csv, written as each case ends."""
    if history_url:
        history_commands.open_store(history_url).close()  # a bad store is refused before the run, not after
    s = load_suite(suite_file)
    if run_opts.dry_run:
        print_dry_run(s, run_opts)
        return
    if run_opts.trace_dir is not None:  # each case's profile goes there: refused now, not as a failed row per case
        output_dir(run_opts.trace_dir, "--trace", "each case's profile and HLO text")
    outcome = until_interrupted(lambda: run_with_progress(s, run_opts), suite_file, run_opts)
    if history_url and outcome.primary:
        added, _ = history_commands.add_runs(history_url, [outcome.files.csv])
        console.print(f"history: {'recorded in' if added else 'already in'} {history_url}")
    if outcome.failed or outcome.wrong:
        sys.exit(1)


def print_dry_run(s: Any, opts: RunOptions) -> None:
    """`run --dry-run`: each case that would run, each that would be skipped with why; nothing runs."""
    from xlabench.run import suite_runner

    try:
        plan = suite_runner.plan_run(s, opts)
    except suite_runner.RunInputError as e:
        raise BadInput(str(e)) from None
    todo = [(c, why) for c, why in plan.cases if c.case_id not in plan.done]
    console.print(f"dry run: suite {s.name} profile {plan.profile or 'base'} on {plan.platform} (guessed from the "
                  f"host; a run asks its worker): {len(todo)} case(s)"
                  + (f", {len(plan.done)} already done" if plan.done else ""), soft_wrap=True)
    for note in dict.fromkeys([c.note for c, _ in todo if c.note] + [plan.samples_note]):  # the model chosen,
        if note:  # modes run once, too few samples to compare
            console.print(f"plan: {note}", style="dim", soft_wrap=True)
    if any(c.unroll_best for c, why in todo if not why):
        console.print("plan: the ladder runs scanned; its best point then runs again unrolled (one more case)",
                      style="dim", soft_wrap=True)
    reasons: dict[str, int] = {}  # each skip reason once, below the cases, by number
    keys = results.varying([c.params for c, _ in todo]) if len(todo) > 1 else None  # what tells them apart
    for c, why in todo:
        if why:
            reasons.setdefault(why, len(reasons) + 1)
        console.print(status_line("skip" if why else "run", "yellow" if why else "green", 4,
                                  c.label(keys) + (f"  (skip reason {reasons[why]})" if why else "")), soft_wrap=True)
    for why, n in reasons.items():
        console.print(f"skip reason {n}: {why}", style="yellow", soft_wrap=True)
    skipped = sum(1 for _, why in todo if why)
    runs = sum(c.measure.repeats for c, why in todo if not why)
    console.print(f"would run {len(todo) - skipped} case(s) ({runs} run(s) with repeats), skip {skipped}; "
                  "nothing was run", soft_wrap=True)
    for line in plan.estimate:
        console.print(line, soft_wrap=True)


def run_with_progress(s: Any, opts: RunOptions, summary: bool = True) -> Any:
    """suite_runner.run_suite with a progress bar, a line per case, the summary table and the counts (also the
    gate's runs). Bad input is BadInput (exit 2); a run whose workers cannot start exits 1."""
    from xlabench.run import suite_runner

    shown = RunProgress(s.name)
    try:
        outcome = suite_runner.run_suite(s, opts, hooks=shown.hooks())
    except suite_runner.RunInputError as e:
        raise BadInput(str(e)) from None
    except suite_runner.RunStartError as e:
        raise click.ClickException(str(e)) from None
    finally:
        shown.stop()
    if outcome.start_error:
        err_console.print(outcome.start_error + (f"\nresults: {outcome.files.csv}" if outcome.primary else ""),
                          style="red", soft_wrap=True)
        sys.exit(1)
    _print_outcome(outcome, opts, summary)
    return outcome


class RunProgress:
    """The hooks of `run` (and `compile`): the start lines, a progress bar counting steps (``steps(case)``: a
    run's case with repeats K is K runs; a compile's case is one), with several jobs a line per job naming its
    case, and a line per case: ``line(case, row, width)`` (None: no line), else the run's."""

    def __init__(self, name: str, line: Optional[Callable[[Any, dict[str, Any], Optional[int]], Any]] = None,
                 steps: Callable[[Any], int] = lambda case: case.measure.repeats):
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                   TimeRemainingColumn)

        self.name, self.line, self.steps = name, line, steps
        self.progress = Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(), console=console,
                                 transient=True)
        self.task: Any = None
        self.job_tasks: dict[int, Any] = {}  # with several jobs, one line per job naming its case
        self.runs_done: dict[str, int] = {}
        self.shown_keys: Optional[list[str]] = None  # the parameters that tell the run's cases apart
        self.reasons: dict[str, int] = {}  # each failure or skip reason printed whole once, then named by its number

    def hooks(self) -> Any:
        """These as the run's RunHooks, with the CLI's warnings and notes."""
        from xlabench.run.suite_runner import RunHooks

        return RunHooks(warning=warn, start=self.start, case_start=self.case_start, repeat=self.repeat, row=self.row,
                        note=lambda text: self.progress.console.print(text, style="dim", soft_wrap=True))

    def stop(self) -> None:
        if self.task is not None:  # stopping a bar never started prints a blank line (rich, off a terminal)
            self.progress.stop()

    def start(self, lines: list[str], runs: int, cases: Sequence[Any] = (), jobs: int = 1) -> None:
        if len(cases) > 1:
            self.shown_keys = results.varying([c.params for c in cases])
        one_line = not console.is_terminal  # a log keeps each line whole; a terminal wraps between words
        console.print(lines[0], soft_wrap=one_line)
        for line in lines[1:]:
            console.print(line, style="dim", soft_wrap=one_line)
        self.progress.start()
        self.task = self.progress.add_task(self.name + (f" ({jobs} jobs)" if jobs > 1 else ""), total=runs)
        if jobs > 1:
            self.job_tasks = {j: self.progress.add_task(f"  job {j + 1}", total=None) for j in range(jobs)}

    def case_start(self, job: int, case: Any) -> None:
        if job in self.job_tasks:
            self.progress.update(self.job_tasks[job], description=f"  job {job + 1}: {case.label(self.shown_keys)}"[:44])

    def repeat(self, case: Any) -> None:
        self.runs_done[case.case_id] = self.runs_done.get(case.case_id, 0) + 1
        self.progress.advance(self.task)

    def row(self, case: Any, r: dict[str, Any]) -> None:
        out = self.progress.console
        width = out.width if out.is_terminal else None  # a log: one line per case
        line = (self.line(case, r, width) if self.line else  # a time is kept whole; a reason may break between words
                _case_line(r, case.label(self.shown_keys), width, self.reasons))
        if line is not None:
            out.print(line, soft_wrap=True)
        self.progress.advance(self.task, self.steps(case) - self.runs_done.get(case.case_id, 0))  # runs it will not take


def _print_outcome(outcome: Any, opts: RunOptions, summary: bool) -> None:
    """The summary table (``summary``), the counts, the samples note and where the rows are."""
    from xlabench.report import summary as summary_table
    from xlabench.run.suite_runner import WRONG

    if summary:
        table = summary_table.build(outcome.rows, [c.params for c in outcome.cases])
        console.print(table)  # fits the console: a fixed line, then the table
        for line in table.lines():  # word-wrapped to the console (a skip reason is prose)
            console.print(line, style="yellow")
    counts = outcome.counts()
    said = f"in {outcome.seconds:.1f}s"
    if opts.resume_csv and outcome.primary:  # the whole file's rows, not only the cases run now
        counts = outcome.file_counts()
        said = f"in {outcome.files.csv.name} ({len(outcome.rows)} case(s) run now, in {outcome.seconds:.1f}s)"
    wrong = counts[WRONG]  # timed, but wrong: not ok
    console.print(f"{counts['ok']} ok, " + (f"{wrong} WRONG RESULT(S), " if wrong else "")
                  + f"{counts['failed']} failed, {counts['skipped']} skipped {said}")
    if outcome.samples_note and counts["ok"]:
        console.print(f"note: {outcome.samples_note}", style="dim", soft_wrap=True)
    if summary:
        console.print(f"results: {outcome.files.csv}" if outcome.primary else
                      f"process {outcome.process_id}: results are written by process 0", soft_wrap=True)


def _case_line(r: dict[str, Any], label: str, width: Optional[int], reasons: dict[str, int]) -> Any:
    """A case's progress line: ok and its time, WRONG and its time and why (never "ok"), or the status and its
    reason (each reason whole once, then named by its number in ``reasons``)."""
    status = r["status"]
    if status == st.OK and r.get("correct") is False:  # timed, but its output is wrong
        return status_line("WRONG", "bold red", 7, f"{label}  {_wrong_why(r)}", width,
                           f"{to_ms(float(r['median_s'])):.3f} ms")
    if status == st.OK:
        return status_line(status, _STYLE[status], 7, label, width, f"{to_ms(float(r['median_s'])):.3f} ms")
    why = r.get("error") or ""
    seen = why in reasons
    n = reasons.setdefault(why, len(reasons) + 1)
    return status_line(status, _STYLE[status], 7, f"{label}  reason {n}" + (" (above)" if seen else f": {why}"), width)


def _wrong_why(r: dict[str, Any]) -> str:
    """Why a row is wrong, from its notes (the worker's 'wrong output: …'), else its error against the tolerance."""
    from xlabench.report.summary import wrong_note

    return wrong_note(r) or f"WRONG RESULT: max_abs_err {r.get('max_abs_err')} > err_tol {r.get('err_tol')}"


def resume_command(suite_file: str, csv: Path, opts: RunOptions, command: Sequence[str] = ("run",)) -> str:
    """The `xlabench run` line that completes an interrupted run (``command``: the words before the suite file
    and after it: `compile`'s target)."""
    return shlex.join(["xlabench", command[0], suite_file, *command[1:], "--resume", str(csv), *resume_words(opts)])


def interrupted_message(e: Any, suite_file: str, opts: RunOptions, command: Sequence[str] = ("run",)) -> str:
    """What an interrupted `run` (or ``command``: `compile`) says: how far it got and how to finish it."""
    where = (f"interrupted: {e.done} of {e.total} cases done" if e.total is not None
             else "interrupted while starting the first worker")
    if e.csv is None:
        return where + ("" if e.total is not None else "; no case ran, nothing to resume")
    if opts.multihost:
        return f"{where}; rows so far in {e.csv} (a multi-host run does not resume: start it again everywhere)"
    return f"{where}; resume with: {resume_command(suite_file, e.csv, opts, command)}"


def until_interrupted(call: Callable[[], Any], suite_file: str, opts: RunOptions,
                      command: Sequence[str] = ("run",)) -> Any:
    """``call()`` (a run or a compile with its progress) under interrupts.interruptible: SIGINT / SIGTERM print
    how far it got and how to resume (interrupted_message), and exit 130 / 143."""
    from xlabench.run.interrupts import Interrupted, interruptible

    try:
        with interruptible():
            return call()
    except Interrupted as e:
        err_console.print(interrupted_message(e, suite_file, opts, command), soft_wrap=True)
        sys.exit(e.exit_code)


@click.command(epilog=examples(
    "xlabench merge results/attention/r-0.csv results/attention/r-1.csv -o results/attention/r.csv"))
@click.argument("csv_files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="Merged CSV to write (samples beside it).")
def merge(csv_files: tuple[str, ...], output: str) -> None:
    """Combine the result CSVs of one suite run in shards (`run --shard I/N`) into one file."""
    from xlabench.results.merge import MergeError, inputs, merge as merge_files

    output_file(output, "-o", "the merged CSV")
    files, notes = inputs([Path(p) for p in csv_files])
    for note in notes:
        err_console.print(f"note: {note}", soft_wrap=True, markup=False)
    try:
        n = merge_files(files, Path(output))
    except (MergeError, results.ResultsFileError) as e:
        raise BadInput(str(e)) from None
    console.print(f"merged {len(files)} file(s), {n} rows -> {output}", soft_wrap=True)
