"""The one case loop, of `run` and `compile`: runs cases in workers and writes one row per case as soon as it
ends, each case taken through an action (CaseAction: Measure times it, repeats in passes over the suite;
run/compile_runner.py's CompileOnly compiles it for a target), skips planned from the impl catalog; each row
assembled once (run/rows.py).

Repeats are taken in passes over the cases, the order shuffled after the first pass (random
interleaving, as Google Benchmark's --benchmark_enable_random_interleaving): a case's runs are
spread over the run instead of back to back, so a slow stretch of a shared host hits every case
a little instead of all of one case's runs (benchmarks/gate_quality.py measures the effect). The
first pass keeps suite order but shuffles the configurations of a sweep among their places
(first_pass), so that no configuration always runs first."""

from __future__ import annotations

import datetime as dt
import random
import secrets
import os
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Protocol, Sequence

from xlabench import impls as catalog
from xlabench import results
from xlabench.run import envs
from xlabench.run import rows as row_builder
from xlabench.run.calibrate import host_calib_s
from xlabench.run.envs import worker_variant
from xlabench.run.interrupts import interruptible, uninterrupted
from xlabench.run.parallel import in_parallel
from xlabench.run.workers import Worker, WorkerError, WorkerPool, ask
from xlabench.suite import Case
from xlabench.protocol.worker_messages import CaseResult
from xlabench.run.case_plan import CasePlan, plan_case, shared_references
from xlabench.workloads import TUNED_PARAMS
from xlabench.protocol.status import SKIPPED


def new_run_id() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


def git_sha() -> str:
    """The checkout's short sha (+dirty), or $XLABENCH_GIT_SHA where it is set: a copy of a working tree run
    elsewhere (the device machine of docs/tpu.md gets the files, not the history: its git said the session's
    first commit, +dirty, for every run) says what it is a copy of."""
    if os.environ.get("XLABENCH_GIT_SHA"):
        return os.environ["XLABENCH_GIT_SHA"]
    root = envs.ROOT
    try:
        sha = subprocess.run(["git", "rev-parse", "--short=10", "HEAD"], cwd=root, capture_output=True,
                             text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return (sha + ("+dirty" if dirty else "")) if sha else ""
    except Exception:
        return ""


@dataclass
class RunContext:
    run_id: str
    platform: str
    git_sha: str = field(default_factory=git_sha)
    hostname: str = field(default_factory=socket.gethostname)
    peak_override: Optional[float] = None
    timeout_override: Optional[float] = None
    # The host's measured CPU peaks (from the run's first worker): every CPU row of the run, whatever its
    # framework, is rated against the same figure, so MFU/MBU compare across frameworks.
    cpu_peaks: dict[str, Any] = field(default_factory=dict)  # and where the peak comes from (cpu_peak_source)
    trace_root: Optional[Path] = None  # `run --trace DIR`: each case's profile under DIR/<case_id>/
    jobs: int = 1  # cases at once (`run --jobs`, CPU only): their rows say they shared the host
    tune: Optional[bool] = None  # `run --tune/--no-tune` (None: protocol.timing_plan.default_tune of the platform)
    tune_dir: Optional[str] = None  # the tuning cache folder a search uses (run_suite: tune.default_dir())
    llc_bytes: Optional[int] = None  # CPU: the host's last-level cache (audit: cache-resident rows)
    device_count: Optional[int] = None  # the slice's devices (the first worker's): a case needing more is skipped
    phase_s: dict[str, float] = field(default_factory=dict)  # the workers' seconds per phase, summed (the meta's)
    # case_id -> the mode whose reference the case computes (case_plan.shared_references of the cases run)
    references: dict[str, str] = field(default_factory=dict)

    def trace_dir(self, case: Case, repeat: int) -> Optional[str]:
        if self.trace_root is None:
            return None
        return str((self.trace_root / case.case_id / (f"repeat-{repeat + 1}" if case.measure.repeats > 1 else "")).resolve())


def platform_skip(case: Case, platform: str, info: Optional[catalog.ImplInfo] = None,
              target: Optional[str] = None) -> Optional[str]:
    """Why a case cannot run on this platform at all (decided without a worker), or None; ``info``: its
    catalog entry, when the caller has it; ``target``: a compile for that target (the impl must run there
    natively: an interpreter compiles for no chip)."""
    info = info or catalog.find(case.backend, case.impl, case.workload)
    if info is None:
        return f"impl {case.impl!r} does not exist for backend {case.backend!r}"
    if not (platform in info.platforms if target else info.runs_on(platform)):
        return f"{case.backend}/{case.impl} runs on {', '.join(info.platforms)}, not {platform}" + \
            (f" ({target})" if target else "")
    return None


@dataclass
class CaseRun:
    """One case in flight: what its row will be built from (its action's row: run/rows.py case_row or
    compile_row)."""

    case: Case
    info: Optional[catalog.ImplInfo] = None  # its impl's catalog entry (looked up once)
    plan: Optional[CasePlan] = None  # the parent's decisions for it (case_plan.plan_case), once its platform is known
    replies: list[Any] = field(default_factory=list)  # one per step done: a repeat's CaseResult, a compile's figures
    ended: Optional[tuple[str, Optional[str]]] = None  # (status, error) when it ended without a result
    env: dict[str, Any] = field(default_factory=dict)  # the worker's environment (device kind, CPU peaks)
    calib: list[float] = field(default_factory=list)  # calibration kernel seconds before and after each repeat
    wanted: int = 0  # the steps it takes: its repeats (0, the default) or one compile

    def __post_init__(self) -> None:
        self.wanted = self.wanted or self.case.measure.repeats

    @property
    def done(self) -> bool:
        return self.ended is not None or len(self.replies) >= self.wanted


def start_case(case: Case, pool: WorkerPool, ctx: RunContext) -> CaseRun:
    """A case about to run; one that cannot run here at all is done at once (a skipped row)."""
    state = CaseRun(case, catalog.find(case.backend, case.impl, case.workload))
    reason = platform_skip(case, ctx.platform, state.info) or pool.missing(case.backend) or _too_big(case, ctx)
    if reason:
        state.ended = (SKIPPED, reason)
    return state


def _too_big(case: Case, ctx: RunContext) -> Optional[str]:
    """Why the slice cannot hold the case (more devices than it has), or None."""
    if ctx.device_count and case.devices > ctx.device_count:
        return (f"the case needs {case.devices} devices; this slice has {ctx.device_count} (a suite that does not "
                "pin devices uses every device the slice has)")
    return None


def run_repeat(state: CaseRun, pool: WorkerPool, ctx: RunContext) -> None:
    """One independent run of the case (fresh inputs, trace and, for JAX, compile; its own warm-up).

    Never raises for the case's own failures: they end the case (a failed row, workers.ask)."""
    case = state.case
    i, n = len(state.replies), state.wanted

    def request(worker: Worker) -> dict[str, Any]:
        state.env = state.env or worker.env.to_message()
        if case.devices > worker.env.device_count:
            raise WorkerError(f"case needs {case.devices} devices; the {case.backend} worker sees "
                              f"{worker.env.get('device_count')} ({worker.env.process_count} process(es))")
        state.plan = state.plan or plan_case(case, state.info, worker.env.get("platform", ctx.platform), ctx)
        return state.plan.request(case, ctx.trace_dir(case, i)).to_message()

    out = ask(pool, (case.backend, case.devices, worker_variant(case.backend, case.workload, case.params)), request,
              ctx.timeout_override or case.measure.timeout_s, CaseResult.from_message,
              f"repeat {i + 1} of {n}: " if n > 1 else "")  # which repeat a failure happened in
    if isinstance(out, CaseResult):
        state.replies.append(out)
    else:
        state.ended = out


def _sweep_key(case: Case) -> tuple:
    """The case without its workload's tuned parameters: configurations of one sweep share it."""
    tuned = TUNED_PARAMS.get(case.workload, ())
    return (case.workload, case.backend, case.impl, case.devices,
            tuple(sorted((k, str(v)) for k, v in case.params.items() if k not in tuned)))


def first_pass(cases: list[Case], rng: random.Random) -> list[Case]:
    """Suite order, except that the configurations of one sweep (cases that differ only in tuned
    parameters, e.g. attention's block sizes) take their places in a shuffled order: with one repeat
    there is no later pass, and the configuration listed first (the default) would always run first
    (a warm-up or cache effect then reads as a difference between configurations: `best` measured a
    2.15x "win" of that kind)."""
    places: dict[tuple, list[int]] = {}
    for i, c in enumerate(cases):
        places.setdefault(_sweep_key(c), []).append(i)
    order = list(cases)
    for idx in places.values():
        members = [cases[i] for i in idx]
        rng.shuffle(members)
        for i, c in zip(idx, members):
            order[i] = c
    return order


def _groups(cases: list[Case]) -> list[list[Case]]:
    """The cases by worker (backend, devices, variant), backends in the order they first appear."""
    order: dict[str, int] = {}
    for case in cases:
        order.setdefault(case.backend, len(order))
    groups: dict[tuple, list[Case]] = {}
    for case in sorted(cases, key=lambda c: order[c.backend]):
        key = (case.backend, case.devices, worker_variant(case.backend, case.workload, case.params))
        groups.setdefault(key, []).append(case)
    return list(groups.values())


class CaseAction(Protocol):
    """What run_cases does with each case, Measure's (a run's timed repeats) or a compile's for a target that
    this host does not have (run/compile_runner.py CompileOnly); the loop owns the rest (passes, jobs, writer,
    interrupts). ``groups``: the cases by the worker that takes them (each group's worker started once);
    ``first``: a group's first pass in the order its cases start (``jobs`` at once); ``start``: a case about to
    start, done at once where it cannot (a skipped row); ``step``: one repeat or its compile in ``pool``'s
    worker, never raising for the case's own failures (workers.ask); ``row``: (row, samples) of a case that
    is done (run/rows.py builds both actions' rows)."""

    def groups(self, cases: list[Case]) -> list[list[Case]]: ...
    def first(self, group: list[Case], rng: random.Random, jobs: int) -> list[Case]: ...
    def start(self, case: Case, pool: WorkerPool, ctx: RunContext) -> CaseRun: ...
    def step(self, state: CaseRun, pool: WorkerPool, ctx: RunContext) -> None: ...
    def row(self, state: CaseRun, ctx: RunContext) -> tuple[dict[str, Any], list[float]]: ...


class Measure:
    """A run's action: each case timed in its worker, its repeats in passes (the module's docstring), the
    host's calibration kernel timed just before and after each repeat (run/calibrate.py)."""

    def groups(self, cases: list[Case]) -> list[list[Case]]:
        return _groups(cases)

    def first(self, group: list[Case], rng: random.Random, jobs: int) -> list[Case]:
        return first_pass(group, rng)  # suite order, sweeps shuffled

    def start(self, case: Case, pool: WorkerPool, ctx: RunContext) -> CaseRun:
        return start_case(case, pool, ctx)

    def step(self, state: CaseRun, pool: WorkerPool, ctx: RunContext) -> None:
        before = host_calib_s()
        run_repeat(state, pool, ctx)
        state.calib.extend(t for t in (before, host_calib_s()) if t is not None)

    def row(self, state: CaseRun, ctx: RunContext) -> tuple[dict[str, Any], list[float]]:
        row, samples = row_builder.case_row(state.case, ctx, state.env, state.replies, state.ended, state.calib,
                                            state.info, state.plan)
        row_builder.add_phases(ctx.phase_s, state.replies)
        return row, samples


MEASURE = Measure()


def run_cases(cases: Iterable[Case], writer: results.RowWriter, ctx: RunContext, pool: WorkerPool,
              on_row: Callable[[Case, dict[str, Any]], None] = lambda c, r: None,
              on_repeat: Callable[[Case], None] = lambda c: None,
              more_pools: Sequence[WorkerPool] = (), *, action: CaseAction = MEASURE,
              on_start: Callable[[int, Case], None] = lambda job, c: None,
              peaks: Optional[list[Optional[int]]] = None) -> list[dict[str, Any]]:
    """Take every case through ``action`` (Measure: timed, repeats in passes as the module's docstring says;
    or compiled once), writing each row as soon as its case ends. Cases are grouped by the worker that takes
    them (``action.groups``) so an accelerator's worker is started once per group. With ``more_pools``
    (``--jobs``: CPU runs, compiles) each pass takes 1 + len(more_pools) steps at once, one per pool, each
    job's start said by ``on_start(job, case)``; ``peaks[job]`` gets the peak resident memory of that
    job's workers. Rows are still written here, as their cases end; ``on_repeat`` follows each step.
    An interrupt (see ``interruptible``) kills the workers and propagates: the case in flight gets no row.
    """
    cases = list(cases)
    ctx.references.update(shared_references(cases))
    pools = [pool, *more_pools]
    rng = random.Random(ctx.run_id)  # the order is reproducible from the run id
    rows: list[tuple[int, dict[str, Any]]] = []  # (the case's place in the suite, its row)
    position = {id(c): i for i, c in enumerate(cases)}

    def step(job: int, state: CaseRun) -> CaseRun:
        action.step(state, pools[job], ctx)
        return state

    def ended(state: CaseRun) -> None:
        if state.done:
            row, samples = action.row(state, ctx)
            with uninterrupted():
                writer.write(row, samples)
                rows.append((position[id(state.case)], row))
                on_row(state.case, row)

    def kill_all() -> None:
        for p in pools:
            p.kill_all()

    def run_pass(states: list[CaseRun]) -> None:
        """One step of each case (those that cannot start end at once), in the given order."""
        for state in states:
            if state.done:
                ended(state)
        for state, _ in in_parallel([s for s in states if not s.done], len(pools), step,
                                    lambda job, s: on_start(job, s.case), _job_end(pools, peaks), kill_all):
            on_repeat(state.case)
            ended(state)

    with interruptible():
        try:
            for group in action.groups(cases):
                states = [action.start(case, pool, ctx) for case in action.first(group, rng, len(pools))]
                run_pass(states)
                while pending := [s for s in states if not s.done]:
                    rng.shuffle(pending)
                    run_pass(pending)
        except KeyboardInterrupt:  # Interrupted, or a plain Ctrl-C off the main thread's handler
            kill_all()
            raise
    return [row for _, row in sorted(rows, key=lambda pr: pr[0])]  # the CSV has them as they ended


def _job_end(pools: list[WorkerPool], peaks: Optional[list[Optional[int]]]) -> Callable[[int], None]:
    """What a job does when a pass leaves it nothing (in its own thread): note its workers' peak memory (in
    ``peaks``, when given), then, with several jobs, close them (the next group wants other workers)."""

    def end(job: int) -> None:
        if peaks is not None:
            peaks[job] = max((p for p in (peaks[job], pools[job].peak_rss_bytes()) if p is not None), default=None)
        if len(pools) > 1:
            pools[job].close()

    return end
