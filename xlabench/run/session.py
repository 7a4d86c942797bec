"""One session for `run` and `compile`: it owns the run's files (a new run's or the one --resume continues),
the workers' compilation-cache folder, the worker pools (one per job), the meta JSON's shared keys, the row
writer and what a signal does to them (the mapping of a worker's reply or failure to a row's status is
workers.ask). Each runner gives only how a case becomes a row: the action it hands the scheduler's loop
(run/scheduler.py run_cases: a run's timed repeats; run/compile_runner.py: a compile for a target).
Framework-free: the parent never imports JAX."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Union

from xlabench import results
from xlabench import suite as suite_lib
from xlabench.explain.kept import explain_dir
from xlabench.run import compile_cache_dir
from xlabench.run.envs import Interpreters
from xlabench.run.interrupts import Interrupted, interruptible
from xlabench.run.run_options import RunOptions
from xlabench.run.scheduler import new_run_id
from xlabench.run.workers import WorkerPool


class RunInputError(Exception):
    """Bad input (an option, a --resume file, a profile): the message is user-facing (the CLI exits 2)."""


def open_run(s: suite_lib.Suite, out_dir: str, resume_csv: Optional[str], run_id: Optional[str] = None,
             suffix: str = ".csv", same: tuple[str, str] | None = None) -> tuple[results.RunFiles, set[str], str]:
    """(files, case ids already done, run id) of a new run under ``out_dir/<suite>/`` or of the one
    ``resume_csv`` continues; that one must hold this suite (and, with ``same = (column, value)``, only
    that value in the column: a compile's target)."""
    if not resume_csv:
        run_id = run_id or new_run_id()
        files = results.RunFiles(Path(out_dir) / s.name / f"{run_id}{suffix}")
        try:
            results.make_dir(files.csv.parent, "--out", f"rows go to OUT/<suite>/<run-id>{suffix}")
        except results.OutputPathError as e:
            raise RunInputError(str(e)) from None
        return files, set(), run_id
    try:
        files, prior, done, run_id = results.read_prior(Path(resume_csv))
    except results.ResultsFileError as e:
        raise RunInputError(f"--resume: {e}") from None
    try:
        check_resumed(s, resume_csv, prior, same)
    except RunInputError:
        files.release()
        raise
    return files, done, run_id  # files hold the run's lock until its writer closes (RunFiles.hold)


def check_resumed(s: suite_lib.Suite, resume_csv: str, prior: Any, same: tuple[str, str] | None = None) -> None:
    """RunInputError unless the rows ``resume_csv`` holds (``prior``) are this suite's (and, with ``same =
    (column, value)``, that value's only): a run and its dry run refuse another suite's file alike."""
    for column, want in [("suite", s.name)] + ([same] if same else []):
        have = sorted(set(prior[column].astype(str))) if len(prior) else [want]
        if have != [want]:
            raise RunInputError(f"--resume: {resume_csv} holds {column} {', '.join(map(repr, have))}, not {want!r}")


@dataclass
class Tally:
    """How far a run or a compile got, for an interrupt's message and its meta: the cases with a row (resumed
    ones included) of the cases planned (None: not known yet, the first worker was starting)."""

    done: Optional[int] = None
    total: Optional[int] = None

    def planned(self, cases: int, todo: int) -> None:
        self.done, self.total = cases - todo, cases

    def counting(self, on_row: Callable[[Any, dict[str, Any]], None]) -> Callable[[Any, dict[str, Any]], None]:
        """``on_row`` (a hook's) after counting the row."""

        def counted(case: Any, row: dict[str, Any]) -> None:
            self.done = (self.done or 0) + 1
            on_row(case, row)

        return counted


HLO_DUMP_DIR = ".hlo-dump"  # under the trace root: a torch_tpu worker's dumped programs, until a case keeps its own


def trace_root(opts: Any, csv: Path) -> Optional[Path]:
    """Where each case keeps its profile and HLO text: ``--trace DIR``, else ``<run-id>.explain/`` with
    --explain, else nowhere."""
    if opts.trace_dir is not None:
        return Path(opts.trace_dir)
    return explain_dir(csv) if opts.explain else None


@dataclass
class Session:
    """A run's or a compile's files, pools, meta and writer (``primary``: this process writes the files)."""

    suite: suite_lib.Suite
    opts: RunOptions
    files: results.RunFiles
    done: set[str]
    run_id: str
    pool: WorkerPool
    primary: bool = True
    more: list[WorkerPool] = field(default_factory=list)  # a pool per further job (--jobs)
    tally: Tally = field(default_factory=Tally)  # how far its cases got (an interrupt says it)

    @property
    def pools(self) -> list[WorkerPool]:
        return [self.pool, *self.more]

    def add_jobs(self, jobs: int) -> list[WorkerPool]:
        """A worker pool per job, the first the session's own: every job's worker is its own process."""
        self.more = [self.pool.like() for _ in range(jobs - 1)]
        return self.pools

    def trace_root(self) -> Optional[Path]:
        return trace_root(self.opts, self.files.csv)

    def write_meta(self, profile: str, ctx: Any, env: dict[str, Any], jobs: int, **more: Any) -> dict[str, Any]:
        """The meta JSON beside the CSV (primary only): the keys every run and compile has, then ``more``."""
        s, root = self.suite, self.trace_root()
        meta = {"run_id": self.run_id, "suite": s.name, "suite_file": str(s.path), "profile": profile,
                "command": sys.argv, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "env": env,
                "git_sha": ctx.git_sha, "hostname": ctx.hostname, "jobs": jobs,
                "schema_version": results.SCHEMA_VERSION, "suite_spec": s.spec.model_dump(mode="json"), **more}
        if root is not None:
            meta["trace_root"] = str(root.resolve())  # each case's profile and HLO text (xlabench explain)
        if self.primary:
            results.write_meta(self.files, meta)
        return meta

    def writer(self) -> Union[results.RowWriter, results.NullWriter]:
        return results.RowWriter(self.files) if self.primary else results.NullWriter()

    @contextlib.contextmanager
    def interruptible(self) -> Iterator[None]:
        """SIGINT / SIGTERM within the block (interrupts.interruptible): the workers are killed (no row for
        the cases in flight) and Interrupted goes on, saying how far it got (the session's tally) and which
        CSV a --resume continues (None: none was written)."""
        try:
            with interruptible():
                yield
        except Interrupted as e:
            self.kill_all()
            e.done, e.total = self.tally.done, self.tally.total
            e.csv = self.files.csv if self.primary and self.files.csv.exists() else None
            raise

    @contextlib.contextmanager
    def writing(self, meta: dict[str, Any], phase_s: dict[str, float]) -> Iterator[Any]:
        """The rows' writer, for the cases' loop; an interrupt within is recorded in the meta (the run was
        cut short after ``tally.done`` cases: results.run_progress reads it), and the workers close at the
        end either way."""
        with self.writer() as writer:
            try:
                yield writer
            except Interrupted as e:
                if self.primary:
                    results.record_interruption(self.files, {**meta, **results.phase_fields(phase_s)}, str(e.args[0]),
                                                self.tally.done)
                raise
            finally:
                self.close()

    def close(self) -> None:
        for p in self.pools:
            p.close()

    def kill_all(self) -> None:
        for p in self.pools:
            p.kill_all()


def open_session(s: suite_lib.Suite, opts: RunOptions, warning: Callable[[str], None], *, suffix: str = ".csv",
                 same: tuple[str, str] | None = None, interpreters: Interpreters = Interpreters(),
                 dist: Any = None) -> Session:
    """The session of a run (``dist``: a multi-host run's place) or a compile (``suffix`` .compile.csv, its
    target ``same``): its files, its cache folder (a folder that cannot be written costs ``warning`` and an
    uncached run) and its first worker pool. RunInputError for bad input."""
    files, done, run_id = open_run(s, opts.out_dir, opts.resume_csv, opts.run_id, suffix=suffix, same=same)
    primary = dist is None or dist.is_primary
    log = files.log if primary else files.log.with_name(f"{files.csv.stem}.p{dist.process_id}.log")
    cache_dir, cache_warning = compile_cache_dir.resolve(opts, s)
    if cache_warning:
        warning(cache_warning)
    root = trace_root(opts, files.csv)
    pool = WorkerPool(log, interpreters, dist=dist, local_devices=opts.local_devices,
                      search_path=(str(Path(s.path).resolve().parent),), compile_cache=cache_dir,
                      hlo_dump=str(root.resolve() / HLO_DUMP_DIR) if root is not None else None)
    return Session(s, opts, files, done, run_id, pool, primary)
