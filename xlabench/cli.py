"""The ``xlabench`` command: parse, call into the modules, print, exit code. No framework imports here.

Exit codes: 0 success; 1 a case failed or gave a wrong result (run), a confirmed regression (compare);
2 bad input (suite file, CSV, option); 130 / 143 interrupted by SIGINT / SIGTERM (run, gate).
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Optional

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from xlabench import hardware, results, summary
from xlabench.run import interrupts, workers, scheduler
from xlabench import suite as suite_lib
from xlabench.run.envs import Interpreters

# Piped output (CI logs) gets a wide console instead of rich's 80-column default.
console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True, highlight=False)


class BadInput(click.ClickException):
    """Bad user input: a clear message and exit code 2, never a traceback."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        err_console.print(f"[bold red]error:[/] {self.message}", markup=True, soft_wrap=True)


def _load_suite(path: str) -> suite_lib.Suite:
    try:
        return suite_lib.load(path)
    except suite_lib.SuiteError as e:
        raise BadInput(str(e)) from None


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="xlabench")
def main() -> None:
    """Benchmark attention kernels and training steps on XLA devices; report MFU; gate regressions."""


# ------------------------------------------------------------------------------------------------ info


@main.command()
@click.option("--backend", default="jax", show_default=True, help="Framework whose view of the machine to show.")
@click.option("--devices", default=1, show_default=True, help="Virtual CPU devices for the probe.")
@click.option("--peaks", is_flag=True, help="Also print the whole peak table and the compile targets, with sources.")
@click.option("--python-torch-xla", "python_torch_xla", default=None, type=click.Path(),
              help="Python of the torch_xla environment (see `run --help`).")
def info(backend: str, devices: int, peaks: bool, python_torch_xla: Optional[str]) -> None:
    """Platform, devices, framework versions and the peak FLOP/s used for MFU (with its source)."""
    try:
        env = workers.probe(backend, devices, Interpreters(torch_xla_override=python_torch_xla))
    except workers.WorkerError as e:
        raise click.ClickException(f"could not start a {backend} worker: {e}") from None
    peak = hardware.device_peak(env["platform"], env["device_kind"], env.get("measured_cpu_tflops"),
                                env.get("measured_cpu_gbytes_per_s"), env["device_count"])
    t = Table(show_header=False, box=None)
    for k in ("backend", "platform", "device_kind", "device_count", "process_count", "framework_version"):
        t.add_row(k, str(env.get(k)))
    t.add_row("peak TFLOP/s per device", f"{peak.tflops:.3f}" if peak.tflops else "unknown")
    t.add_row("peak GB/s per device", f"{peak.gbytes_per_s:.1f}" if peak.gbytes_per_s else "unknown")
    t.add_row("peak source", peak.source)
    if env["platform"] == "cpu":
        t.add_row("note", "CPU: Pallas TPU/GPU kernels run in interpret mode (pipeline check, not kernel speed)")
    console.print(t)
    if peaks:
        pt = Table(title="peak table (dense bf16, per chip)")
        for col in ("name", "TFLOP/s", "HBM GB/s", "devices/chip", "source"):
            pt.add_column(col)
        for p in hardware.PEAKS:
            pt.add_row(p.name, f"{p.bf16_tflops_per_chip:g}", f"{p.hbm_gbytes_per_s_per_chip:g}",
                       str(p.devices_per_chip), p.source)
        console.print(pt)
        tt = Table(title="compile targets (xlabench compile --target)")
        for col in ("name", "topology", "chips", "devices/chip", "HBM GiB/chip", "source"):
            tt.add_column(col)
        for t in hardware.TARGETS:
            opts = ", ".join(f"{k}={v}" for k, v in t.options)
            tt.add_row(t.name, t.topology + (f" ({opts})" if opts else ""), str(t.chips), str(t.devices_per_chip),
                       f"{t.hbm_gib_per_chip:g}", t.source)
        console.print(tt)


@main.command()
@click.option("--markdown", is_flag=True, help="Print a markdown table (as in the README).")
def columns(markdown: bool) -> None:
    """Every CSV column with its unit and meaning (the schema in xlabench/results.py)."""
    if markdown:
        click.echo("| column | unit | group | meaning |\n|---|---|---|---|")
        for c in results.COLUMNS:
            click.echo(f"| `{c.name}` | {c.unit} | {c.group} | {c.doc.replace('|', '/')} |")
        return
    t = Table(title=f"results CSV columns (schema version {results.SCHEMA_VERSION})")
    for col in ("column", "unit", "group", "meaning"):
        t.add_column(col)
    for c in results.COLUMNS:
        t.add_row(c.name, c.unit, c.group, c.doc)
    console.print(t)


# -------------------------------------------------------------------------------------- validate, list


@main.command()
@click.argument("suite_files", nargs=-1, required=True, type=click.Path())
def validate(suite_files: tuple[str, ...]) -> None:
    """Check suite files; print how many cases each profile expands to."""
    for path in suite_files:
        s = _load_suite(path)
        counts = [("base", len(s.cases("")))] + [(n, len(s.cases(n))) for n in s.profile_names()]
        shown = ", ".join(f"{n}: {c}" for n, c in counts)
        console.print(f"[green]ok[/] {path}: suite {s.name!r}, workload {s.spec.workload}; cases per profile: {shown}")
        for name, _ in counts:  # --- gate: samples per case (docs/gate.md) ---
            _warn_samples(f"{path} profile {name}", s.cases("" if name == "base" else name))


def _warn_samples(where: str, cases: list[suite_lib.Case]) -> None:
    """Warn (stderr) when the cases time too few samples to be judged by the gate (gate.sample_shortfall)."""
    from xlabench import gate

    short = gate.sample_shortfall([c.measure.iters * c.measure.repeats for c in cases])
    if short:
        err_console.print(f"[yellow]warning:[/] {gate.shortfall_message(where, len(cases), *short)}",
                          markup=True, soft_wrap=True)


def _platform_backend(s: suite_lib.Suite, interpreters: Interpreters) -> str:
    """The suite's first backend (any profile's) whose environment exists: its worker detects the platform."""
    backends = list(dict.fromkeys(s.spec.backends + [b for p in s.spec.profiles.values() for b in p.backends or []]))
    for b in backends:
        if not interpreters.missing(b):
            return b
    raise click.ClickException("; ".join(interpreters.missing(b) or "" for b in backends))


def _resolve_profile(s: suite_lib.Suite, profile: Optional[str]) -> tuple[str, Optional[str]]:
    """(profile, platform): the platform is probed only when no profile was named."""
    if profile is not None:
        return s.pick_profile(None, profile), None
    try:
        env = workers.probe(_platform_backend(s, Interpreters()), 1)
    except workers.WorkerError as e:
        raise click.ClickException(f"could not detect the platform ({e}); pass --profile") from None
    return s.pick_profile(env["platform"]), env["platform"]


@main.command(name="list")
@click.argument("suite_file", type=click.Path())
@click.option("--profile", default=None, help="Profile to expand (default: picked from the detected platform; 'base' for none).")
def list_cases(suite_file: str, profile: Optional[str]) -> None:
    """The expanded cases as a table."""
    s = _load_suite(suite_file)
    prof, platform = _resolve_profile(s, profile)
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


# ------------------------------------------------------------------------------------------------- run


@main.command()
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
def run(suite_file: str, **options: Any) -> None:
    """Run a suite: one row per case in results/<suite>/<run-id>.csv, written as each case ends."""
    try:
        with interrupts.interruptible():
            outcome = run_suite(_load_suite(suite_file), **options)
    except interrupts.Interrupted as e:
        err_console.print(interrupted_message(e, suite_file, options), markup=False, soft_wrap=True)
        sys.exit(e.exit_code)
    if outcome.failed or outcome.wrong:
        sys.exit(1)


# The `run` options that choose or measure the cases: a resume must repeat them (the profile is in the meta).
_RESUME_OPTIONS = {"only_impls": "--impl", "shard_spec": "--shard", "repeats": "--repeats", "timeout_s": "--timeout",
                   "peak_tflops": "--peak-tflops", "local_devices": "--local-devices",
                   "python_torch_xla": "--python-torch-xla"}


def resume_command(suite_file: str, csv: Path, options: dict[str, Any]) -> str:
    """The `xlabench run` line that completes an interrupted run."""
    words = ["xlabench", "run", suite_file, "--resume", str(csv)]
    for key, flag in _RESUME_OPTIONS.items():
        value = options.get(key)
        for v in (value if isinstance(value, (tuple, list)) else [value]):
            if v is not None:
                words += [flag, str(v)]
    return shlex.join(words)


def interrupted_message(e: interrupts.Interrupted, suite_file: str, options: dict[str, Any]) -> str:
    """What an interrupted `run` says: how far it got and how to finish it."""
    multihost = any(options.get(k) is not None for k in ("coordinator", "num_processes", "process_id"))
    where = (f"interrupted: {e.done} of {e.total} cases done" if e.total is not None
             else "interrupted while starting the first worker")
    if e.csv is None:
        return where + ("" if e.total is not None else "; no case ran, nothing to resume")
    if multihost:
        return f"{where}; rows so far in {e.csv} (a multi-host run does not resume: start it again everywhere)"
    return f"{where}; resume with: {resume_command(suite_file, e.csv, options)}"


@dataclass
class RunOutcome:
    """What run_suite did: the run's files, the profile used, the cases it ran and their rows."""

    files: results.RunFiles
    profile: str
    cases: list[suite_lib.Case]
    rows: list[dict[str, Any]]

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["status"] == "failed"]

    @property
    def wrong(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r.get("correct") is False]


def run_suite(s: suite_lib.Suite, profile: Optional[str] = None, out_dir: str = "results",
              resume_csv: Optional[str] = None, timeout_s: Optional[float] = None,
              peak_tflops: Optional[float] = None, only_impls: tuple[str, ...] = (),
              shard_spec: Optional[str] = None, coordinator: Optional[str] = None,
              num_processes: Optional[int] = None, process_id: Optional[int] = None,
              local_devices: Optional[int] = None, init_timeout: int = 120,
              only_case_ids: Optional[Iterable[str]] = None, run_id: Optional[str] = None,
              python_torch_xla: Optional[str] = None, repeats: Optional[int] = None) -> RunOutcome:
    """The body of `xlabench run` (also `xlabench gate`'s runs): ``only_case_ids`` runs just those
    cases, ``run_id`` names a new run, ``repeats`` overrides measure.repeats. Bad input raises
    BadInput; failed cases are rows."""
    from xlabench.run import distributed, shard

    try:
        shard_of = shard.parse_shard(shard_spec) if shard_spec is not None else None
        dist = distributed.from_options(coordinator, num_processes, process_id, init_timeout)
    except ValueError as e:
        raise BadInput(str(e)) from None
    primary = dist is None or dist.is_primary
    if peak_tflops is not None and peak_tflops <= 0:
        raise BadInput(f"--peak-tflops must be > 0, got {peak_tflops}")
    if repeats is not None and repeats < 1:
        raise BadInput(f"--repeats must be >= 1, got {repeats}")
    done: set[str] = set()
    if resume_csv:
        try:
            files, prior, done, run_id = results.read_prior(Path(resume_csv))
        except results.ResultsFileError as e:
            raise BadInput(f"--resume: {e}") from None
        if len(prior) and set(prior["suite"].astype(str)) != {s.name}:
            raise BadInput(f"--resume: {resume_csv} holds suite(s) {sorted(set(prior['suite'].astype(str)))}, not {s.name!r}")
        if profile is None and files.meta.exists():
            profile = json.loads(files.meta.read_text()).get("profile") or "base"
    else:
        run_id = run_id or scheduler.new_run_id()
        files = results.RunFiles(Path(out_dir) / s.name / f"{run_id}.csv")
    files.csv.parent.mkdir(parents=True, exist_ok=True)
    interpreters = Interpreters(torch_xla_override=python_torch_xla)
    if python_torch_xla and interpreters.missing("torch_xla"):
        raise BadInput(f"--python-torch-xla: {interpreters.missing('torch_xla')}")
    log = files.log if primary else files.log.with_name(f"{files.csv.stem}.p{dist.process_id}.log")
    pool = workers.WorkerPool(log, interpreters, dist=dist, local_devices=local_devices)
    tally: dict[str, int | None] = {"done": None, "total": None}  # what an interrupt reports
    try:
        with interrupts.interruptible():
            return _run_with_pool(s, pool, files, run_id=run_id, done=done, tally=tally, dist=dist,
                                  profile=profile, timeout_s=timeout_s, peak_tflops=peak_tflops,
                                  only_impls=only_impls, shard_of=shard_of, shard_spec=shard_spec,
                                  only_case_ids=only_case_ids, repeats=repeats)
    except interrupts.Interrupted as e:
        pool.kill_all()
        e.done, e.total = tally["done"], tally["total"]
        e.csv = files.csv if primary and files.csv.exists() else None
        raise


def _run_with_pool(s: suite_lib.Suite, pool: workers.WorkerPool, files: results.RunFiles, *, run_id: str,
                   done: set[str], tally: dict[str, int | None], dist: Any, profile: str | None,
                   timeout_s: float | None, peak_tflops: float | None, only_impls: tuple[str, ...],
                   shard_of: tuple[int, int] | None, shard_spec: str | None,
                   only_case_ids: Iterable[str] | None, repeats: int | None) -> RunOutcome:
    """run_suite once its workers can start: probe, pick the cases, run them. ``tally`` counts the cases
    with a row (done) out of the run's cases (total), for the interrupt message."""
    from xlabench.run import shard

    primary = dist is None or dist.is_primary
    interpreters = pool.interpreters
    started = time.time()
    try:
        first = pool.get(_platform_backend(s, interpreters), 1)
    except workers.WorkerError as e:
        if dist is None:
            raise click.ClickException(str(e)) from None
        _fail_all(s, profile, files, run_id, f"multi-host start failed: {e}", primary)
    platform = first.env["platform"]
    try:
        prof = s.pick_profile(platform, profile)
    except suite_lib.SuiteError as e:
        pool.close()
        raise BadInput(str(e)) from None
    cases = s.cases(prof)
    if only_impls:
        unknown = set(only_impls) - {c.impl for c in cases}
        if unknown:
            pool.close()
            raise BadInput(f"--impl {', '.join(sorted(unknown))}: not in this suite (impls: "
                           f"{', '.join(sorted({c.impl for c in cases}))})")
        cases = [c for c in cases if c.impl in only_impls]
    if shard_of is not None:
        cases = shard.select(cases, *shard_of)
    if only_case_ids is not None:
        wanted = set(only_case_ids)
        cases = [c for c in cases if c.case_id in wanted]
    if repeats is not None:
        cases = [dataclasses.replace(c, measure=c.measure.model_copy(update={"repeats": repeats})) for c in cases]
    _warn_samples(f"suite {s.name} profile {prof or 'base'}", cases)  # --- gate: samples per case ---
    todo = [c for c in cases if c.case_id not in done]
    tally["done"], tally["total"] = len(cases) - len(todo), len(cases)
    for backend in dict.fromkeys(c.backend for c in todo):
        if pool.missing(backend):
            err_console.print(f"[yellow]warning:[/] {pool.missing(backend)}; its cases become skipped rows",
                              markup=True, soft_wrap=True)
    cpu_peaks = {k: first.env[k] for k in ("measured_cpu_tflops", "measured_cpu_gbytes_per_s") if k in first.env}
    ctx = scheduler.RunContext(run_id=run_id, platform=platform, peak_override=peak_tflops, timeout_override=timeout_s,
                            cpu_peaks=cpu_peaks)
    meta = {"run_id": run_id, "suite": s.name, "shard": shard_spec, "suite_file": str(s.path), "profile": prof,
            "workload": s.spec.workload, "command": sys.argv, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "env": first.env, "git_sha": ctx.git_sha, "hostname": ctx.hostname, "schema_version": results.SCHEMA_VERSION,
            "suite_spec": s.spec.model_dump(mode="json")}
    if primary:
        results.write_meta(files, meta)
    console.print(f"suite [bold]{s.name}[/] profile [bold]{prof or 'base'}[/] on {platform} "
                  f"({first.env['device_kind']}, {first.env['framework_version']}): {len(todo)} case(s)"
                  + (f", {len(done)} already done" if done else ""))
    if platform == "cpu":
        console.print("[dim]CPU: Pallas kernels run in interpret mode; their rows say interpret=true "
                      "(a pipeline check, not kernel speed)[/]")
    rows: list[dict[str, Any]] = []
    with (results.RowWriter(files) if primary else results.NullWriter()) as writer, Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("eta"), TimeRemainingColumn(), console=console, transient=True) as progress:
        # The bar counts runs (a case with measure.repeats K is K runs, taken in passes over the suite).
        task = progress.add_task(s.name, total=sum(c.measure.repeats for c in todo))
        runs_done: dict[str, int] = {}

        def on_repeat(case: suite_lib.Case) -> None:
            runs_done[case.case_id] = runs_done.get(case.case_id, 0) + 1
            progress.advance(task)

        def on_row(case: suite_lib.Case, row: dict[str, Any]) -> None:
            status = row["status"]
            extra = f"{float(row['median_s']) * 1e3:.3f} ms" if status == "ok" else (row.get("error") or "")[:120]
            colour = {"ok": "green", "failed": "red", "skipped": "yellow"}[status]
            progress.console.print(f"[{colour}]{status:7}[/] {case.label()}  {extra}", markup=True, soft_wrap=True)
            progress.advance(task, case.measure.repeats - runs_done.get(case.case_id, 0))  # runs it will not take
            tally["done"] = (tally["done"] or 0) + 1

        try:
            rows = scheduler.run_cases(todo, writer, ctx, pool, on_row, on_repeat)
        finally:
            pool.close()
    outcome = RunOutcome(files, prof, todo, rows)
    table = summary.build(rows, [c.params for c in todo])
    if table.table is not None:
        console.print(table.table)
    for line in table.lines():
        console.print(line, style="yellow", markup=False, soft_wrap=True)
    counts = {st: sum(r["status"] == st for r in rows) for st in results.STATUSES}
    wrong = len(outcome.wrong)
    console.print(f"{counts['ok']} ok, {counts['failed']} failed, {counts['skipped']} skipped "
                  f"in {time.time() - started:.1f}s" + (f"; {wrong} WRONG RESULT(S)" if wrong else ""))
    console.print(f"results: {files.csv}" if primary else
                  f"process {dist.process_id}: results are written by process 0")
    return outcome


def _fail_all(s: suite_lib.Suite, profile: Optional[str], files: results.RunFiles, run_id: str, error: str,
              primary: bool) -> None:
    """A run that cannot start its workers (e.g. a multi-host peer or coordinator is unreachable):
    every case gets a failed row naming the cause, then exit 1."""
    prof = s.pick_profile(None, profile) if profile is not None else ""
    ctx = scheduler.RunContext(run_id=run_id, platform="")
    if primary:
        with results.RowWriter(files) as writer:
            for case in s.cases(prof):
                writer.write({**scheduler.base_row(case, ctx), "status": "failed", "error": error})
    err_console.print(f"[red]{error}[/]" + (f"\nresults: {files.csv}" if primary else ""))
    sys.exit(1)


@main.command()
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


if __name__ == "__main__":
    # Run as a script: hand over to the real module, so command modules register on one `main`.
    import runpy

    runpy.run_module("xlabench", run_name="__main__")
else:
    # Commands defined in their own modules, imported after `main` and BadInput exist.
    from xlabench import cli_plot

    main.add_command(cli_plot.plot)
    main.add_command(cli_plot.report)
    from xlabench import cli_gate

    main.add_command(cli_gate.compare)
    main.add_command(cli_gate.gate)
    from xlabench import cli_compile

    main.add_command(cli_compile.compile_cmd)
