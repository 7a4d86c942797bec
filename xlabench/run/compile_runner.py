"""``xlabench compile``: every case of a suite AOT-compiled for a target slice this host does not have.

Each case is compiled in a JAX worker (the same fault isolation, timeout and resume as a run) for the
compile-only devices of a TPU topology, with the real kernels and the case's shardings, and becomes a
row of ``results/<suite>/<run-id>.compile.csv``: ``compiled`` (with per-device memory and XLA's FLOPs),
``oom`` (does not fit the device's HBM), ``lowered`` (GPU targets), ``failed`` or ``skipped``.
Framework-free: the parent never imports JAX.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from xlabench import hardware, results, tune
from xlabench import impls as catalog
from xlabench.results.files import software
from xlabench.run import parallel, scheduler, shard, workers
from xlabench.run import rows as row_builder
from xlabench import suite as suite_lib
from xlabench.protocol.worker_messages import CompileRequest, CompileResult
from xlabench.protocol.target import TargetSpec
from xlabench.run.case_plan import CasePlan, plan_case
from xlabench.run.envs import COMPILE_VARIANT
from xlabench.run.run_options import RunOptions
from xlabench.run.session import RunInputError, Session, open_session
from xlabench.run.suite_runner import FIT_TIMEOUT_S, RunHooks, RunOutcome, select_cases, worker_fitter
from xlabench.suite import slice_fit
from xlabench.protocol.status import SKIPPED

# The backends that compile only on the chip they run on: their rows of a compile are skipped, saying so.
NO_COMPILE_ONLY = {
    "torch_xla": ("torch_xla 2.9 has no compile-only TPU client (it compiles only on the devices it runs on); the "
                  "JAX rows compile the same Pallas kernels that torch_xla's custom_kernel traces"),
    "torch_tpu": ("TorchTPU compiles only on the chip it runs on (no compile-only client); the JAX rows compile "
                  "the same Pallas kernels (flash, splash, paged, ragged paged) that it calls"),
}


class CompileError(Exception):
    """Bad input or a host that cannot compile for the target (no libtpu): the message says which."""


def target_spec(target: hardware.Target, slices: int) -> TargetSpec:
    return TargetSpec(target.name, target.platform, target.topology, tuple(target.options), slices)


def _skip_reason(case: suite_lib.Case, target: hardware.Target) -> Optional[str]:
    """Why a case is not compiled for this target, decided without a worker (scheduler.platform_skip)."""
    return NO_COMPILE_ONLY.get(case.backend) or scheduler.platform_skip(case, target.platform, target=target.name)


def _framework_version(jax_versions: Optional[str], target: hardware.Target) -> Optional[str]:
    """'jax 0.10.2 / jaxlib 0.10.2 / libtpu 0.0.42.1' for a TPU target: libtpu compiled the program, and a
    new libtpu changes its memory and FLOP figures as much as a new jaxlib does."""
    libtpu = software()["libtpu_version"] if target.platform == "tpu" else None
    return f"{jax_versions} / libtpu {libtpu}" if jax_versions and libtpu else jax_versions


def _checked(s: suite_lib.Suite, target_name: str, slices: int, opts: RunOptions,
             fit: Optional[slice_fit.ModelFitter] = None) -> tuple[hardware.Target, str, list[suite_lib.Case]]:
    """(target, profile, cases) of a compile, planned for the target's devices (``fit``: the compiling
    worker's model fit; None: a plan that takes the largest listed model), or CompileError naming what is
    wrong."""
    try:
        target = hardware.find_target(target_name)
    except hardware.UnknownTarget as e:
        raise CompileError(f"--target: {e}") from None
    if slices < 1:
        raise CompileError(f"--slices must be >= 1, got {slices}")
    if slices > 1 and target.platform != "tpu":
        raise CompileError(f"--slices applies to TPU targets, not {target.name}")
    try:
        prof = s.pick_profile(None, opts.profile if opts.profile is not None else default_profile(s, target))
        shard_of = shard.parse_shard(opts.shard_spec) if opts.shard_spec is not None else None
    except (suite_lib.SuiteError, ValueError) as e:
        raise CompileError(str(e)) from None
    try:
        return target, prof, select_cases(s, prof, opts.replace(repeats=None, timer=None), shard_of,
                                          slice_fit.Slice(target.platform, target.devices * slices, fit))
    except RunInputError as e:
        raise CompileError(str(e)) from None


def default_profile(s: suite_lib.Suite, target: hardware.Target) -> str:
    """The profile a compile for ``target`` takes unless --profile names one: the one named after the target
    (gpt2's v4-8: the seed study), else the one named after its platform, else the base suite (fitted to the
    target's devices)."""
    for name in (target.name, target.platform):
        if name in s.spec.profiles:
            return name
    return "base"


def _fitter(sess: Session, spec: TargetSpec, hooks: RunHooks) -> slice_fit.ModelFitter:
    """A suite's model list fitted to the target by the compiling worker (op fit, the target's devices)."""
    return worker_fitter(lambda msg: sess.pool.get("jax", 1, COMPILE_VARIANT).request(msg, FIT_TIMEOUT_S),
                         spec.name, {"platform": "tpu", "target": spec.to_message()}, hooks.note, hooks.warning)


def mesh_note(cases: list[suite_lib.Case], target: hardware.Target, slices: int) -> Optional[str]:
    """What to say when cases set a device count other than the target's (a gpt2 tpu profile's devices: 4 on a
    v5e-8 compiled a 4-device mesh of the 8 devices, silently)."""
    have = target.devices * slices
    meshes = [c.devices for c in cases if 1 < c.devices != have]  # a one-device case compiles one chip's kernel
    if not meshes:
        return None
    other, n = sorted(set(meshes)), len(meshes)
    return (f"{n} case(s) compile a mesh of {', '.join(map(str, other))} device(s), not the {have} of {target.name}"
            f"{f' x {slices}' if slices > 1 else ''} (the suite's devices); set devices: {have} (e.g. -k devices={have}"
            " where the suite sweeps it) to compile for the whole slice")


def compile_suite(s: suite_lib.Suite, target_name: str, slices: int = 1, opts: RunOptions = RunOptions(),
                  hooks: RunHooks = RunHooks()) -> RunOutcome:
    """Compile every case of the suite's profile (``opts.profile``, default the target's platform: tpu, gpu)
    that ``opts``' filters leave for ``target_name``; ``opts.timeout_s`` limits each compile,
    ``opts.resume_csv`` continues a compile.

    The cases go through the run's loop (scheduler.run_cases) with the CompileOnly action, its session's
    writer and interrupts: ``opts.jobs`` cases compile at once (default: parallel.default_jobs()), each job
    in a worker of its own. ``hooks`` are the run's (RunHooks); ``warning`` says what the user should know (a
    cache folder that cannot be written, a mesh smaller than the slice).
    Raises CompileError for bad input and for a host that cannot compile for the target."""
    target, prof, cases = _checked(s, target_name, slices, opts)
    sess = _open(s, target, cases, slices, opts, hooks.warning)
    with sess.interruptible():
        return _compile_cases(sess, target_name, target, prof, slices, opts, hooks)


def start_line(suite: str, prof: str, target_name: str, env: dict[str, Any], todo: int, done: int, jobs: int) -> str:
    """The compile's first line: what compiles for what, on which framework, how many cases."""
    return (f"suite {suite} profile {prof or 'base'} compiled for {target_name} ({env.get('device_count')} x "
            f"{env.get('device_kind')}, {env.get('framework_version')}): {todo} case(s)"
            + (f", {done} already done" if done else "") + (f", {jobs} jobs" if jobs > 1 else ""))


def _compile_cases(sess: Session, target_name: str, target: hardware.Target, prof: str, slices: int,
                   opts: RunOptions, hooks: RunHooks) -> RunOutcome:
    """compile_suite once its session is open: the target's worker, the cases planned with its model fit,
    then every case not done through the run's loop."""
    spec = target_spec(target, slices)
    env, host_env = _target_env(sess, target, spec)
    cases = _checked(sess.suite, target_name, slices, opts, _fitter(sess, spec, hooks))[2]  # the worker's fit
    todo = [c for c in cases if c.case_id not in sess.done]
    sess.tally.planned(len(cases), len(todo))
    ctx = scheduler.RunContext(run_id=sess.run_id, platform=target.platform, timeout_override=opts.timeout_s,
                               tune_dir=str(tune.default_dir()))
    jobs = max(1, min(opts.jobs or parallel.default_jobs(), sum(_skip_reason(c, target) is None for c in todo)))
    meta = sess.write_meta(prof, ctx, env, jobs, target=target.name, topology=target.label(slices),
                           slices=slices, host_env=host_env, cases_planned=len(cases))
    hooks.start([start_line(sess.suite.name, prof, target_name, env, len(todo), len(sess.done), jobs)], len(todo),
                todo, jobs=jobs)
    sess.add_jobs(jobs)  # one worker pool per job
    peaks: list[Optional[int]] = [None] * jobs
    on_row = sess.tally.counting(hooks.row)
    with sess.writing(meta, ctx.phase_s) as writer:  # an interrupt: the meta says the compile was cut short
        rows = scheduler.run_cases(todo, writer, ctx, sess.pool, on_row, hooks.repeat, sess.more,
                                   action=CompileOnly(target, spec, slices, env, sess.trace_root()),
                                   on_start=hooks.case_start, peaks=peaks)
    return RunOutcome(sess.files, prof, todo, rows, target=target, jobs=jobs, job_peak_bytes=peaks)


@dataclass(frozen=True)
class CompileOnly:
    """The compile's action for the run's loop (scheduler.CaseAction): each case compiled once, never run, by
    the compiling worker (op compile, a TPU topology's compile-only devices), its row compile_row's.
    ``env``: the target's devices, the rows' environment; ``keep_root``: where each case keeps its
    optimized HLO text (--explain)."""

    target: hardware.Target
    spec: TargetSpec
    slices: int
    env: dict[str, Any]
    keep_root: Optional[Path] = None

    def groups(self, cases: list[suite_lib.Case]) -> list[list[suite_lib.Case]]:
        return [cases] if cases else []  # one worker kind compiles every backend's case

    def first(self, group: list[suite_lib.Case], rng: Any, jobs: int) -> list[suite_lib.Case]:
        """With several jobs, the costliest cases first so that no job is left with a long compile at the end
        (rows are written as they finish, whatever the order)."""
        return group if jobs == 1 else sorted(group, key=lambda c: -shard.estimated_cost(c))

    def start(self, case: suite_lib.Case, pool: workers.WorkerPool, ctx: scheduler.RunContext) -> scheduler.CaseRun:
        state = scheduler.CaseRun(case, catalog.find(case.backend, case.impl, case.workload), wanted=1)
        state.plan = plan_case(case, state.info, self.target.platform, ctx)
        if reason := _skip_reason(case, self.target):
            state.ended = (SKIPPED, reason)
        return state

    def step(self, state: scheduler.CaseRun, pool: workers.WorkerPool, ctx: scheduler.RunContext) -> None:
        case = state.case
        keep = str(self.keep_root.resolve() / case.case_id) if self.keep_root else None
        state.replies.append(_compile_one(case, state.plan, pool, self.spec,
                                          ctx.timeout_override or case.measure.timeout_s, keep))

    def row(self, state: scheduler.CaseRun, ctx: scheduler.RunContext) -> tuple[dict[str, Any], list[float]]:
        """compile_row of the worker's figures, or of the skip ``start`` decided (no samples: nothing ran)."""
        status, error = state.ended or (SKIPPED, None)
        outcome = state.replies[0] if state.replies else {"status": status, "error": error}
        return row_builder.compile_row(state.case, ctx, state.plan, self.env, outcome, self.target, self.slices), []


def _open(s: suite_lib.Suite, target: hardware.Target, cases: list[suite_lib.Case], slices: int, opts: RunOptions,
          on_warning: Callable[[str], None]) -> Session:
    """The compile's session (a .compile.csv of this target), after saying what the cases' meshes leave out;
    the cache folder holds the worker's figures per program (measure/figure_store.py, docs/compile.md)."""
    if note := mesh_note(cases, target, slices):
        on_warning(note)
    try:
        return open_session(s, opts.replace(run_id=None, trace_dir=None, local_devices=None), on_warning,
                            suffix=results.COMPILE_SUFFIX, same=("target", target.name))
    except RunInputError as e:
        raise CompileError(str(e)) from None


def _target_env(sess: Session, target: hardware.Target, spec: TargetSpec) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the target's devices as the rows' environment, the compiling worker's own), or CompileError when
    this host cannot compile for the target (the session is closed)."""
    try:
        worker = sess.pool.get("jax", 1, COMPILE_VARIANT)
        env = {**(worker.request({"op": "target", "target": spec.to_message()}, sess.pool.PROBE_TIMEOUT_S).env or {}),
               "framework_version": _framework_version(worker.env.get("framework_version"), target)}
    except workers.WorkerError as e:
        sess.close()
        raise CompileError(f"cannot compile for {target.name}: {e}") from None
    return env, worker.env


def _compile_one(case: suite_lib.Case, plan: CasePlan, pool: workers.WorkerPool, target: TargetSpec,
                 timeout_s: float, keep_dir: Optional[str] = None) -> dict[str, Any]:
    """One case's compile in the worker, under its case plan: the row fields it adds (status, error,
    figures); ``keep_dir``: where the worker writes its optimized HLO text (`compile --explain`). Failures:
    workers.ask."""
    request = CompileRequest.from_case(case, target, plan.timing, interpret=plan.interpret, keep_dir=keep_dir)
    out = workers.ask(pool, ("jax", 1, COMPILE_VARIANT), lambda worker: request.to_message(), timeout_s,
                      CompileResult.from_message)
    if isinstance(out, tuple):  # skipped or failed
        return {"status": out[0], "error": out[1]}
    return {"status": out.status, "error": out.error, **out.fields}
