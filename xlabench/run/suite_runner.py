"""`xlabench run` as a library call: resume, pick the cases, start the workers, run, write the run's files.

No printing: the caller passes ``RunHooks`` (the CLI draws a progress bar from them; the gate's runs use
the same). Bad input raises RunInputError, workers that cannot start raise RunStartError; a failing case
is a row, never an exception.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

from xlabench import hardware
from xlabench import impls as catalog
from xlabench import results
from xlabench import suite as suite_lib
from xlabench.measure import last_level_cache, sample_size
from xlabench.run import budget, distributed, recorded, shard
from xlabench.run.envs import Interpreters, guess_device_count, guess_platform
from xlabench.run.run_options import Filter, OptionError, RunOptions
from xlabench.run import rows as row_builder
from xlabench.run.scheduler import RunContext, platform_skip, run_cases
from xlabench.run.table_held import Held, case_held, tune_table_warning, untunable  # noqa: F401 (the CLI's)
from xlabench.run.session import RunInputError, Session, check_resumed, open_session
from xlabench.run.workers import WorkerError
from xlabench.protocol.replies import Reply
from xlabench.impls import workload_rules
from xlabench.protocol.status import FAILED, OK
from xlabench.tune import default_dir as tune_cache_dir
from xlabench.suite import slice_fit
from xlabench.tune import table

# The model fit's compiles (suite/slice_fit.py): a few candidates x impls, each compiled once, never run
WRONG = "wrong"  # counts(): the ok rows whose result is wrong
FIT_TIMEOUT_S = 1800.0
# `xlabench tune`: each case's measurement after its search is one call, on the wall clock.
TUNE_ONLY_MEASURE = {"warmup": 1, "iters": 1, "min_time_s": 0.0, "repeats": 1, "timer": "wallclock"}


class RunStartError(Exception):
    """The run could not start its first worker (the CLI exits 1)."""


def _ignore(*args: Any, **kwargs: Any) -> None:
    return None


@dataclass
class RunHooks:
    """Progress of a run or a compile (run/compile_runner.py), for whoever shows it: ``start(lines, runs, cases,
    jobs=N)`` once the cases are known (``runs`` counts steps: a run's repeats, a compile's one per case;
    ``cases``: the ones to run; ``jobs``: how many run at once), ``case_start(job, case)`` when a job takes a
    case, ``repeat(case)`` after each step, ``row(case, row)`` after each case's row."""

    warning: Callable[[str], None] = _ignore
    note: Callable[[str], None] = _ignore  # what the run decided or is doing between cases (fitting the model)
    start: Callable[..., None] = _ignore
    case_start: Callable[[int, suite_lib.Case], None] = _ignore
    repeat: Callable[[suite_lib.Case], None] = _ignore
    row: Callable[[suite_lib.Case, dict[str, Any]], None] = _ignore


@dataclass
class RunOutcome:
    """What run_suite (or compile_suite) did: the run's files, the profile used, the cases it ran and their rows."""

    files: results.RunFiles
    profile: str
    cases: list[suite_lib.Case]
    rows: list[dict[str, Any]]
    primary: bool = True  # this process writes the CSV (multi-host: process 0)
    process_id: int = 0
    seconds: float = 0.0
    start_error: Optional[str] = None  # the workers could not start: every case is a failed row naming it
    warnings: list[str] = field(default_factory=list)
    samples_note: Optional[str] = None  # too few samples for `compare` to judge the run (a tune times one call)
    target: Optional[hardware.Target] = None  # a compile's target
    jobs: int = 1
    job_peak_bytes: list[Optional[int]] = field(default_factory=list)  # a compile's workers, peak resident memory each

    def count(self, status: str) -> int:
        return sum(r["status"] == status for r in self.rows)

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["status"] == FAILED]

    @property
    def wrong(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["status"] == OK and r.get("correct") is False]

    def counts(self) -> dict[str, int]:
        """Rows by status, and ``wrong``: the ok rows whose result is wrong, not counted as ok."""
        out = {st: self.count(st) for st in results.STATUSES}
        out[WRONG] = len(self.wrong)
        out[OK] -= out[WRONG]
        return out

    def file_counts(self) -> dict[str, int]:
        """counts() over every row of the run's file (a resumed run: the rows before it too)."""
        df = results.read_rows(self.files.csv, cut_last=True)
        out = {st: int((df["status"] == st).sum()) for st in results.STATUSES}
        out[WRONG] = int(((df["status"] == OK) & (df["correct"] == False)).sum()) if "correct" in df else 0  # noqa: E712
        out[OK] -= out[WRONG]
        return out


def samples_note(cases: list[suite_lib.Case], suite_measure: suite_lib.Measure) -> Optional[str]:
    """A note when the cases time too few samples for `compare` to judge them (sample_size.samples_note; a
    quick profile, one that cuts its suite's measure, is told that two runs of it cannot be compared)."""
    return sample_size.samples_note([c.measure.iters * c.measure.repeats for c in cases],
                                    suite_measure.iters * suite_measure.repeats,
                                    min((c.measure.iters for c in cases), default=1))


def jobs_refused(jobs: int, platform: str) -> Optional[str]:
    """Why a timed run cannot take ``jobs`` cases at once on ``platform`` (None: it can)."""
    if jobs > 1 and platform != "cpu":
        return (f"--jobs {jobs}: timed runs on an accelerator ({platform}) run one case at a time (every job "
                "would share its devices); --jobs applies to CPU runs and to `xlabench compile`")
    return None


def platform_backend(s: suite_lib.Suite, interpreters: Interpreters) -> str:
    """The suite's first backend (any profile's) whose environment exists: its worker detects the platform."""
    backends = list(dict.fromkeys(s.spec.backends + [b for p in s.spec.profiles.values() for b in p.backends or []]))
    for b in backends:
        if not interpreters.missing(b):
            return b
    raise RunStartError("; ".join(interpreters.missing(b) or "" for b in backends))


def resolve_profile(s: suite_lib.Suite, profile: Optional[str]) -> tuple[str, Optional[str]]:
    """(profile, platform): the platform is guessed from the host (envs.guess_platform, no worker) only
    when no profile was named."""
    if profile is not None:
        return s.pick_profile(None, profile), None
    platform = guess_platform()
    return s.pick_profile(platform), platform


def run_suite(s: suite_lib.Suite, opts: RunOptions = RunOptions(), hooks: RunHooks = RunHooks()) -> RunOutcome:
    """The body of `xlabench run` (also `xlabench gate`'s runs), as ``opts`` says: its case filters,
    ``only_case_ids`` (the gate's re-run), ``run_id``, measure overrides; ``trace_dir`` keeps each case's
    profile under it (``<case_id>/``; the trace timer's pass, so RunOptions sets ``timer='trace'``),
    listed in the meta JSON under ``traces``."""
    try:
        shard_of = shard.parse_shard(opts.shard_spec) if opts.shard_spec is not None else None
        dist = distributed.from_options(opts.coordinator, opts.num_processes, opts.process_id, opts.init_timeout)
    except ValueError as e:
        raise RunInputError(str(e)) from None
    if (opts.jobs or 1) > 1 and dist is not None:
        raise RunInputError(f"--jobs {opts.jobs}: a multi-host run times one case at a time on every host")
    chosen = None  # (profile, cases): decided here, before a worker starts or a folder is made, when named
    if opts.profile is not None:
        try:
            prof = s.pick_profile(None, opts.profile)
            chosen = prof, select_cases(s, prof, opts, shard_of)
        except suite_lib.SuiteError as e:
            raise RunInputError(str(e)) from None
    interpreters = Interpreters(torch_xla_override=opts.python_torch_xla)
    check_torch_xla_option(opts)
    sess = open_session(s, opts, hooks.warning, interpreters=interpreters, dist=dist)
    if opts.resume_csv and opts.profile is None and sess.files.meta.exists():  # read_prior checked it
        sess.opts = sess.opts.replace(profile=results.read_meta(sess.files).get("profile") or "base")
    with sess.interruptible():
        return _run_with_pool(sess, dist=dist, shard_of=shard_of, hooks=hooks, chosen=chosen)


@dataclass
class RunPlan:
    """What `run --dry-run` shows: the profile and platform, each case with why it would be skipped (None:
    it would run), and the cases a --resume file already holds."""

    profile: str
    platform: str
    cases: list[tuple[suite_lib.Case, Optional[str]]]
    done: set[str]
    samples_note: Optional[str] = None  # too few samples for `compare` to judge the run (samples_note)
    estimate: list[str] = field(default_factory=list)  # the run's time from recorded runs (run/budget.py)


def predict_skip(c: Any, platform: str) -> Optional[str]:
    """The skip a built-in kernel's own rule gives a case in its worker (impls.workload_rules: by its
    workload's record)."""
    return workload_rules.predict_skip(c.workload, c.backend, c.impl, c.params, platform)


def table_coverage(s: suite_lib.Suite, opts: RunOptions, shipped: table.Table, platform: str = "tpu") -> tuple[str, list[Held]]:
    """(profile, what ``shipped`` holds for each case of the suite's profile for ``platform`` (--profile, else
    the one that platform picks) that ``opts`` selects). RunInputError for a bad profile or filter."""
    try:
        prof = s.pick_profile(platform, opts.profile)
    except (ValueError, suite_lib.SuiteError) as e:
        raise RunInputError(str(e)) from None
    return prof, [case_held(c, shipped, platform) for c in select_cases(s, prof, opts)]


def check_torch_xla_option(opts: RunOptions) -> None:
    """A --python-torch-xla that names no usable environment is bad input (RunInputError) where cases run."""
    missing = Interpreters(torch_xla_override=opts.python_torch_xla).missing("torch_xla") if opts.python_torch_xla else None
    if missing:
        raise RunInputError(f"--python-torch-xla: {missing}")


def plan_run(s: suite_lib.Suite, opts: RunOptions) -> RunPlan:
    """The run ``opts`` asks for, decided without a worker and without writing anything: the platform is
    guessed from the host (envs.guess_platform), skips come from the impl catalog and the environments."""
    done: set[str] = set()
    if opts.resume_csv:
        try:
            _, prior, done, _ = results.read_prior(Path(opts.resume_csv), hold=False)  # a plan only reads
        except results.ResultsFileError as e:
            raise RunInputError(f"--resume: {e}") from None
        check_resumed(s, opts.resume_csv, prior)  # another suite's file: refused as the run refuses it
    platform = guess_platform()
    try:
        shard_of = shard.parse_shard(opts.shard_spec) if opts.shard_spec is not None else None
        prof = s.pick_profile(platform, opts.profile)
    except (ValueError, suite_lib.SuiteError) as e:
        raise RunInputError(str(e)) from None
    cases = select_cases(s, prof, opts, shard_of, slice_fit.Slice(platform, guess_device_count(platform)))
    interpreters = Interpreters(torch_xla_override=opts.python_torch_xla)
    return RunPlan(prof, platform, [(c, platform_skip(c, platform) or interpreters.missing(c.backend)
                                     or predict_skip(c, platform)) for c in cases], done,
                   None if opts.tune_only else samples_note(cases, s.spec.measure),
                   planned_estimate(s, opts, prof, platform, shard_of, interpreters, done))


def planned_estimate(s: suite_lib.Suite, opts: RunOptions, prof: str, guessed: str, shard_of: Any,
                     interpreters: Interpreters, done: set[str]) -> list[str]:
    """A dry run's estimate lines, on the platform the profile is for (guessed from the host otherwise), a
    model list fitted as the suite's recorded run on it was (budget.recorded_fit)."""
    platform = budget.profile_platform(s, prof, guessed)
    runs = recorded.recorded_runs(s.name, platform)
    fitted = slice_fit.Slice(platform, guess_device_count(platform), budget.recorded_fit(runs, s.name))

    def select(p: str) -> list[suite_lib.Case]:
        return [c for c in select_cases(s, p, opts, shard_of, fitted) if c.case_id not in done]

    return budget.lines(s, prof, select(prof), platform, select, interpreters, runs=runs)


def _with_impl_paths(s: suite_lib.Suite, opts: RunOptions) -> suite_lib.Suite:
    """``--impl package.module:fn`` adds a user impl the suite does not list (other --impl values filter)."""
    paths = [i for i in opts.only_impls if catalog.is_path(i)]
    return s.with_user_impls(paths) if paths else s


def select_cases(s: suite_lib.Suite, prof: str, opts: RunOptions = RunOptions(),
                 shard_of: tuple[int, int] | None = None,
                 slice: Optional[slice_fit.Slice] = None) -> list[suite_lib.Case]:
    """The profile's cases that the filters of ``opts`` (``--impl``, ``--backend``, ``-k``), ``--shard``
    and the gate's re-run list leave, with ``--repeats`` and ``--timer`` applied (shared by `run`,
    `compile` and `list`); fitted to ``slice`` (suite/slice_fit.py) when given."""
    try:
        cases = Filter(opts).apply(_with_impl_paths(s, opts).cases(prof, slice))
    except (OptionError, suite_lib.SuiteError) as e:
        raise RunInputError(str(e)) from None
    if shard_of is not None:
        cases = shard.select(cases, *shard_of)
    if opts.only_case_ids is not None:
        wanted = set(opts.only_case_ids)
        cases = [c for c in cases if c.case_id in wanted]
    if opts.tune_only:  # `xlabench tune`: the search, then one timed call (the winner's correctness checked)
        cases = [dataclasses.replace(c, measure=c.measure.model_copy(update=TUNE_ONLY_MEASURE)) for c in cases]
    for key in ("repeats", "timer"):  # else the suite's (timer: or the worker's platform default)
        if getattr(opts, key) is not None:
            cases = [dataclasses.replace(c, measure=c.measure.model_copy(update={key: getattr(opts, key)}))
                     for c in cases]
    return cases


def _run_with_pool(sess: Session, *, dist: Any, shard_of: tuple[int, int] | None,
                   hooks: RunHooks, chosen: Optional[tuple[str, list[suite_lib.Case]]] = None) -> RunOutcome:
    """run_suite once its session is open: probe, pick the cases (unless ``chosen``: a named profile's,
    picked before), run them; the session's tally counts the cases with a row (done) out of the run's cases
    (total), for the interrupt message."""
    process_id = 0 if dist is None else dist.process_id
    started = time.time()
    try:
        first = sess.pool.get(platform_backend(sess.suite, sess.pool.interpreters), 1)
    except WorkerError as e:
        if dist is None:
            raise RunStartError(str(e)) from None
        return _fail_all(sess, f"multi-host start failed: {e}", process_id)
    platform = first.env["platform"]
    prof, cases = _pick_cases(sess, platform, shard_of, chosen, _slice(first, platform, hooks))
    todo = [c for c in cases if c.case_id not in sess.done]
    unroll = any(c.unroll_best for c in cases)
    sess.tally.planned(len(cases), len(todo))
    warnings = _missing_backends(sess, todo, hooks)
    ctx = _context(sess, first.env, platform, len(todo))
    no_table = tune_table_warning(todo, platform, str(first.env.get("device_kind", "")), ctx.tune)
    if no_table:
        warnings.append(no_table)
        hooks.warning(no_table)
    meta = sess.write_meta(prof, ctx, {**first.env, **({"llc_bytes": ctx.llc_bytes} if ctx.llc_bytes else {})},
                           ctx.jobs, shard=sess.opts.shard_spec, workload=sess.suite.spec.workload,
                           cases_planned=len(cases))  # the unrolled best point comes on top
    note = None if sess.opts.tune_only else samples_note(cases, sess.suite.spec.measure)
    hooks.start(_start_lines(sess, prof, platform, first.env, len(todo), ctx.jobs, unroll, note, todo),
                sum(c.measure.repeats for c in todo) + unroll, todo, jobs=ctx.jobs)
    on_row = sess.tally.counting(hooks.row)
    sess.add_jobs(ctx.jobs)  # --jobs: a pool per job
    prior = _prior_rows(sess) if unroll else []
    with sess.writing(meta, ctx.phase_s) as writer:  # an interrupt: the meta says the run was cut short
        rows = run_cases(todo, writer, ctx, sess.pool, on_row, hooks.repeat, sess.more, on_start=hooks.case_start)
        best = slice_fit.unrolled_best(cases, prior + rows, results.case_id) if unroll else None
        if best is not None and best.case_id not in sess.done:
            hooks.note(f"the ladder's best point again unrolled: {best.label(['model', 'global_batch'])}")
            sess.tally.total = (sess.tally.total or 0) + 1
            rows += run_cases([best], writer, ctx, sess.pool, on_row, hooks.repeat, sess.more,
                              on_start=hooks.case_start)
            todo.append(best)
        if sess.primary:  # the end, before the workers close: a signal during their close leaves it
            if ctx.trace_root is not None:
                meta["traces"] = traces_of(ctx.trace_root, todo)
            results.finish_meta(sess.files, meta, rows, ctx.phase_s)
    return RunOutcome(sess.files, prof, todo, rows, primary=sess.primary, process_id=process_id,
                      seconds=time.time() - started, warnings=warnings,
                      samples_note=note)


def _missing_backends(sess: Session, todo: list[suite_lib.Case], hooks: RunHooks) -> list[str]:
    """A warning per backend of ``todo`` whose environment is absent here, each said (its cases become
    skipped rows)."""
    warnings = [f"{sess.pool.missing(b)}; its cases become skipped rows"
                for b in dict.fromkeys(c.backend for c in todo) if sess.pool.missing(b)]
    for w in warnings:
        hooks.warning(w)
    return warnings


def _pick_cases(sess: Session, platform: str, shard_of: tuple[int, int] | None,
                chosen: Optional[tuple[str, list[suite_lib.Case]]],
                slice: Optional[slice_fit.Slice] = None) -> tuple[str, list[suite_lib.Case]]:
    """(profile, cases) of the run on ``platform``, fitted to ``slice`` (``chosen``: the profile picked
    before the worker started); bad input closes the session's pool and raises RunInputError."""
    opts = sess.opts
    try:
        if refused := jobs_refused(opts.jobs or 1, platform):
            raise RunInputError(refused)
        prof = chosen[0] if chosen is not None else sess.suite.pick_profile(platform, opts.profile)
        return prof, select_cases(sess.suite, prof, opts, shard_of, slice)
    except (suite_lib.SuiteError, RunInputError) as e:
        sess.pool.close()
        raise RunInputError(str(e)) from None


def worker_fitter(request: Callable[[dict[str, Any]], Reply], where: str, extra: dict[str, Any],
                  say: Callable[[str], None], warn: Callable[[str], None]) -> slice_fit.ModelFitter:
    """A suite's model list fitted by a worker's op ``fit`` (``request``: the message to its reply; ``extra``:
    the op's platform and, compiling, its target), run's and compile's alike; a fit that fails plans the
    smallest listed model and says why."""

    def fit(candidates: list[dict[str, Any]], impls: list[str]) -> list[slice_fit.Probe]:
        say(f"fitting the model to {where}: compiling {', '.join(c['model'] for c in candidates)} "
            f"({', '.join(impls)}), never run")
        try:
            reply = request({"op": "fit", "candidates": candidates, "impls": impls, **extra})
        except WorkerError as e:
            reply = Reply(error=str(e))
        if reply.fit is None:
            warn(f"the model fit failed ({reply.error}): the smallest listed model is planned")
            return []
        return [slice_fit.Probe(**p) for p in reply.fit]

    return fit


def _slice(worker: Any, platform: str, hooks: RunHooks) -> slice_fit.Slice:
    """The slice the first worker found: its devices, and its op ``fit`` for a suite's model list."""
    n = int(worker.env.get("device_count") or 1)
    fit = worker_fitter(lambda msg: worker.request(msg, FIT_TIMEOUT_S), f"{n} x {worker.env.get('device_kind')}",
                        {"platform": platform}, hooks.note, hooks.warning)
    return slice_fit.Slice(platform, n, fit)


def _prior_rows(sess: Session) -> list[dict[str, Any]]:
    """A resumed run's rows so far (the ladder's best point may be among them)."""
    if not sess.done or not sess.files.csv.exists():
        return []
    return results.read_rows(sess.files.csv, cut_last=True).to_dict("records")


def _context(sess: Session, env: dict[str, Any], platform: str, todo: int) -> RunContext:
    """The run's context: the first worker's platform and CPU peaks, the run's options, the tuning cache."""
    opts = sess.opts
    cpu_peaks = run_peaks(sess.files, bool(sess.done), env)
    env.update(cpu_peaks)  # the meta records the peak every row of the run is rated against
    return RunContext(run_id=sess.run_id, platform=platform, peak_override=opts.peak_tflops,
                      timeout_override=opts.timeout_s, cpu_peaks=cpu_peaks, trace_root=sess.trace_root(),
                      jobs=max(1, min(opts.jobs or 1, todo)), tune=True if opts.tune_only else opts.tune,
                      tune_dir=str(tune_cache_dir()), llc_bytes=last_level_cache.llc_bytes() if platform == "cpu" else None,
                      # CPU workers are started with the virtual devices each case asks for: no limit there
                      device_count=None if platform == "cpu" else int(env.get("device_count") or 0) or None)


CPU_PEAK_KEYS = ("measured_cpu_tflops", "measured_cpu_gbytes_per_s", "cpu_peak_source")


def run_peaks(files: Any, resuming: bool, env: dict[str, Any]) -> dict[str, Any]:
    """The host peaks a CPU run rates every row against: a resumed run keeps those its meta recorded when it
    started (a host's measured peak drifts between runs: 0.096 then 0.174 TFLOP/s, and a resumed CSV held
    rows of both), else the first worker's."""
    mine = {k: env[k] for k in CPU_PEAK_KEYS if k in env}
    if not resuming or not mine:
        return mine
    try:
        prior = results.read_meta(files).get("env") or {}
    except results.ResultsFileError:  # read_prior checked it at the start; gone since: the worker's peaks
        return mine
    kept = {k: prior[k] for k in CPU_PEAK_KEYS if prior.get(k) is not None}
    return {**mine, **kept} if kept.get("measured_cpu_tflops") else mine


def _start_lines(sess: Session, prof: str, platform: str, env: dict[str, Any], todo: int, jobs: int,
                 unroll: bool = False, note: Optional[str] = None, cases: Iterable[suite_lib.Case] = ()) -> list[str]:
    """What the run says before its first case (``note``: too few samples to compare: samples_note; the
    estimate of its ``cases``' time on this slice from the runs recorded there: run/budget.py)."""
    done = sess.done
    n = int(env.get("device_count") or 1)
    lines = [f"suite {sess.suite.name} profile {prof or 'base'} on {platform} ({n} x {env['device_kind']}, "
             f"{env['framework_version']}): {todo} case(s)" + (f", {len(done)} already done" if done else "")
             + (" + the best again unrolled" if unroll else "") + (f", {jobs} jobs at once" if jobs > 1 else "")]
    if platform == "cpu":
        lines.append("CPU: Pallas kernels run in interpret mode; their rows say interpret=true "
                     "(a pipeline check, not kernel speed)")
    lines += budget.lines(sess.suite, prof, list(cases), platform, lambda p: select_cases(sess.suite, p, sess.opts),
                          sess.pool.interpreters, recorded.slice_label(env), quiet=True) if cases else []
    return lines + ([f"note: {note}"] if note else [])


def traces_of(root: Path, cases: Iterable[suite_lib.Case]) -> dict[str, list[str]]:
    """case_id -> the profile files its run kept under ``root`` (xplane.pb for xprof / TensorBoard,
    perfetto_trace.json.gz for Perfetto); cases that kept none are left out."""
    out: dict[str, list[str]] = {}
    for c in cases:
        found = sorted(str(p) for p in (root / c.case_id).rglob("*") if p.name.endswith((".xplane.pb", ".json.gz")))
        if found:
            out[c.case_id] = found
    return out


def _fail_all(sess: Session, error: str, process_id: int) -> RunOutcome:
    """A run that cannot start its workers (e.g. a multi-host peer or coordinator is unreachable):
    every case gets a failed row naming the cause."""
    s, profile = sess.suite, sess.opts.profile
    prof = s.pick_profile(None, profile) if profile is not None else ""
    ctx = RunContext(run_id=sess.run_id, platform="")
    rows = [row_builder.case_row(case, ctx, ended=(FAILED, error))[0] for case in s.cases(prof)]
    with sess.writer() as writer:
        for row in rows:
            writer.write(row)
    return RunOutcome(sess.files, prof, s.cases(prof), rows, primary=sess.primary, process_id=process_id,
                      start_error=error)
