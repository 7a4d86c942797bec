"""Runs cases in worker processes and writes one row per case as soon as it ends.

The parent never imports a framework. Each worker is a ``python -m xlabench.worker`` process per
(backend, device count), reused across cases; a crash, a hang past the case's timeout or an OOM kill
costs one case (a ``failed`` row naming the cause) and the next case gets a fresh worker.

SIGINT and SIGTERM during a run raise ``Interrupted`` (see ``interruptible``): the case in flight is
dropped (no row; it reruns on ``--resume``), every worker's process group is killed, the rows written so
far stay on disk. Workers also die on their own when the parent does (xlabench/worker.py).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import random
import re
import secrets
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

from xlabench import impls as catalog
from xlabench import repeats, results
from xlabench.distributed import DistributedConfig
from xlabench.envs import Interpreters, worker_environ, worker_variant
from xlabench.metrics import derive
from xlabench.suite import Case
from xlabench.worker_api import CaseResult


class WorkerError(Exception):
    """The worker died, hung or answered nonsense; the message says which and is row-ready."""


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM stopped the run. A KeyboardInterrupt, so no ``except Exception`` swallows it and
    code that knows nothing of it still treats it as Ctrl-C. ``run_suite`` fills in how far the run got."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.done: int | None = None  # cases with a row (this run's, resumed ones included)
        self.total: int | None = None  # the run's cases; None: interrupted before they were known
        self.csv: Path | None = None  # the run's CSV, if it exists (what --resume continues)
        self.saved: Path | None = None  # a file whose writing the signal waited for (the gate's baseline)

    @property
    def exit_code(self) -> int:
        """128 + the signal, as a shell reports a process killed by it: 130 for SIGINT, 143 for SIGTERM."""
        return 128 + self.signum


class _SignalState:
    active = False  # an interruptible() block is in force
    critical = 0  # depth of uninterrupted() blocks
    pending: int | None = None  # a signal that arrived in a critical block
    raised = False  # Interrupted was raised; later signals wait for its cleanup (bounded: SIGKILL + wait)


_signals = _SignalState()
INTERRUPT_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _on_signal(signum: int, frame: Any) -> None:
    if _signals.raised:
        return
    if _signals.critical:
        _signals.pending = signum
        return
    _signals.raised = True
    raise Interrupted(signum)


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Within the block SIGINT and SIGTERM raise Interrupted (SIGTERM would otherwise end the process
    with no cleanup, and Ctrl-C would be click's bare "Aborted!"). Nested blocks are the outer one;
    off the main thread, where Python cannot handle signals, it does nothing."""
    if _signals.active or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in INTERRUPT_SIGNALS}
    _signals.active, _signals.pending, _signals.raised = True, None, False
    try:
        for s in INTERRUPT_SIGNALS:
            signal.signal(s, _on_signal)
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)
        _signals.active = False


@contextlib.contextmanager
def uninterrupted() -> Iterator[None]:
    """A signal arriving within the block is raised when it ends: a row and its samples are written
    (and counted) whole or not at all, a baseline is copied whole or not at all."""
    _signals.critical += 1
    try:
        yield
    finally:
        _signals.critical -= 1
    if not _signals.critical and _signals.pending is not None and not _signals.raised:
        signum, _signals.pending = _signals.pending, None
        _signals.raised = True
        raise Interrupted(signum)


@dataclass
class WorkerSpec:
    backend: str
    devices: int  # local (virtual CPU) devices of this worker
    python: str = sys.executable
    dist: Optional[DistributedConfig] = None
    variant: str = ""  # process-global framework mode (torch_xla SPMD): one worker per variant

    @property
    def key(self) -> tuple[str, int, str, str]:
        return (self.backend, self.devices, self.python, self.variant)

    def environ(self) -> dict[str, str]:
        env = worker_environ(self.backend, self.devices, dict(os.environ), self.variant)
        if self.dist is not None:
            env.update(self.dist.worker_env())
        env["PYTHONUNBUFFERED"] = "1"
        # The worker must import this very xlabench, whichever Python runs it.
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        return env


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except (ValueError, TypeError):
        return str(code)


class Worker:
    """One worker process and its line-based JSON pipe."""

    def __init__(self, spec: WorkerSpec, log_path: Optional[Path]):
        self.spec = spec
        self.log_path = log_path
        self._log = open(log_path, "ab") if log_path else subprocess.DEVNULL
        self._log_start = log_path.stat().st_size if log_path else 0
        # The worker dies with this process (--parent-pid; PR_SET_PDEATHSIG on Linux). PDEATHSIG fires
        # when the spawning *thread* exits: the runner starts workers from its main thread, which lives
        # as long as the process; a worker started from a short-lived thread would die with that thread.
        self.proc = subprocess.Popen(
            [spec.python, "-m", "xlabench.worker", "--backend", spec.backend, "--parent-pid", str(os.getpid())],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, env=spec.environ(),
            start_new_session=True)
        self._buf = b""
        self.env: dict[str, Any] = {}

    def request(self, msg: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        try:
            self.proc.stdin.write((json.dumps(msg) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise WorkerError(self._death_message()) from None
        deadline = time.monotonic() + timeout_s
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buf:
                left = deadline - time.monotonic()
                if left <= 0:
                    self.kill()
                    raise WorkerError(f"timeout: no result after {timeout_s:g}s (compile + run); worker killed")
                if not sel.select(timeout=min(left, 1.0)):
                    continue
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    self.proc.wait(timeout=30)
                    raise WorkerError(self._death_message())
                self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            reply = json.loads(line)
        except json.JSONDecodeError:
            self.kill()
            raise WorkerError(f"worker sent an unreadable reply: {line[:200]!r}") from None
        if "fatal" in reply:
            self.kill()
            raise WorkerError(reply["fatal"])
        return reply

    def _death_message(self) -> str:
        code = self.proc.wait(timeout=30)
        how = f"killed by {_signal_name(code)}" if code < 0 else f"exit code {code}"
        if code == -signal.SIGKILL:
            how += " (the OOM killer sends SIGKILL)"
        tail = self.log_tail()
        return f"worker crashed ({how})" + (f"; log tail: {tail}" if tail else "")

    def log_tail(self, lines: int = 3) -> str:
        if not self.log_path or not self.log_path.exists():
            return ""
        with open(self.log_path, "rb") as f:
            f.seek(self._log_start)
            text = f.read().decode(errors="replace")
        kept = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("--- case")]
        # glog fatal lines ("F1202 ...") and Python exceptions say why; stack frames ("@ 0x...") do not.
        fatal = [ln for ln in kept if re.match(r"F\d{4} |\w*(Error|Exception)\b", ln)]
        chosen = fatal[-1:] + [ln for ln in kept[-lines:] if not ln.startswith("@")]
        return " | ".join(dict.fromkeys(chosen))[:800]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the worker's process group (the worker and anything it started)."""
        if self.proc.returncode is None:  # not reaped yet: its pid, the group's id, is still ours
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=30)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except Exception:
                self.kill()
        if self._log is not subprocess.DEVNULL:
            self._log.close()


class WorkerPool:
    """At most one live worker per spec; a worker that failed is replaced on next use.

    A worker on an accelerator holds its devices: before another worker starts, such a worker is
    closed (a JAX and a torch_xla process cannot share a TPU). On CPU they coexist.
    """

    PROBE_TIMEOUT_S = 300.0

    def __init__(self, log_path: Optional[Path], interpreters: Interpreters = Interpreters(),
                 dist: Optional[DistributedConfig] = None, local_devices: Optional[int] = None):
        self.log_path = log_path
        self.interpreters = interpreters
        self.dist = dist
        self.local_devices = local_devices
        self._workers: dict[tuple, Worker] = {}
        self._start_failures: dict[tuple, str] = {}

    def missing(self, backend: str) -> Optional[str]:
        """Why ``backend`` cannot run here at all (its environment is absent), or None."""
        return self.interpreters.missing(backend)

    def get(self, backend: str, devices: int, variant: str = "") -> Worker:
        if self.dist is not None:
            # One worker per backend for the whole run: every process must start (and join) its workers
            # in lockstep, and the coordinator's port is held by process 0's live worker.
            devices = self.local_devices or 1
            for key, w in list(self._workers.items()):
                if key[0] != backend:
                    self.discard(w)
        elif self.local_devices:
            devices = self.local_devices
        spec = WorkerSpec(backend, devices, self.interpreters.python_for(backend), self.dist, variant)
        if spec.key in self._start_failures:  # a worker that cannot start will not start next case either
            raise WorkerError(self._start_failures[spec.key])
        w = self._workers.get(spec.key)
        if w is not None and w.alive():
            return w
        if w is not None:
            w.close()
        for other in [o for o in self._workers.values() if o.alive() and o.env.get("platform", "cpu") != "cpu"]:
            self.discard(other)
        w = Worker(spec, self.log_path)
        self._workers[spec.key] = w
        try:
            w.env = w.request({"op": "probe"}, self.PROBE_TIMEOUT_S)["env"]
        except WorkerError as e:
            self._workers.pop(spec.key, None)
            w.close()
            self._start_failures[spec.key] = f"{backend} worker did not start: {e}"
            raise WorkerError(self._start_failures[spec.key]) from None
        return w

    def discard(self, w: Worker) -> None:
        w.kill()
        w.close()
        self._workers = {k: v for k, v in self._workers.items() if v is not w}

    def close(self) -> None:
        try:
            for w in self._workers.values():
                w.close()
        except KeyboardInterrupt:
            self.kill_all()
            raise
        self._workers.clear()

    def kill_all(self) -> None:
        """Kill every worker's process group now: after an interrupt, no goodbye to a worker that may hang."""
        for w in self._workers.values():
            w.kill()
            w.close()
        self._workers.clear()


def probe(backend: str = "jax", devices: int = 1, interpreters: Interpreters = Interpreters()) -> dict[str, Any]:
    """The environment a worker sees (platform, devices, versions, CPU peak), without importing it here."""
    reason = interpreters.missing(backend)
    if reason:
        raise WorkerError(reason)
    w = Worker(WorkerSpec(backend, devices, interpreters.python_for(backend)), None)
    try:
        return w.request({"op": "probe"}, WorkerPool.PROBE_TIMEOUT_S)["env"]
    except KeyboardInterrupt:
        w.kill()
        raise
    finally:
        w.close()


def new_run_id() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


def git_sha() -> str:
    root = Path(__file__).resolve().parent.parent
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
    cpu_peaks: dict[str, float] = field(default_factory=dict)


def base_row(case: Case, ctx: RunContext) -> dict[str, Any]:
    row: dict[str, Any] = {
        "schema_version": results.SCHEMA_VERSION, "run_id": ctx.run_id, "suite": case.suite,
        "profile": case.profile, "case_id": case.case_id, "workload": case.workload,
        "backend": case.backend, "impl": case.impl, "hostname": ctx.hostname, "git_sha": ctx.git_sha,
        "platform": ctx.platform, "warmup": case.measure.warmup,
    }
    row.update({k: v for k, v in case.params.items() if k in results.CASE_COLUMN_NAMES})
    info = catalog.find(case.backend, case.impl, case.workload)
    row["interpret"] = bool(info and info.interpreted(ctx.platform))
    return row


def plan_skip(case: Case, platform: str) -> Optional[str]:
    """Why a case cannot run on this platform at all (decided without a worker), or None."""
    info = catalog.find(case.backend, case.impl, case.workload)
    if info is None:
        return f"impl {case.impl!r} does not exist for backend {case.backend!r}"
    if not info.runs_on(platform):
        return f"{case.backend}/{case.impl} runs on {', '.join(info.platforms)}, not {platform}"
    return None


@dataclass
class CaseRun:
    """One case in flight: its row so far and the replies of the repeats done."""

    case: Case
    row: dict[str, Any]
    replies: list[dict[str, Any]] = field(default_factory=list)
    final: Optional[dict[str, Any]] = None  # the worker's last reply when the case ended early (failed)
    env: dict[str, Any] = field(default_factory=dict)  # the worker's environment (device kind, CPU peaks)
    done: bool = False

    @property
    def wanted(self) -> int:
        return self.case.measure.repeats


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def start_case(case: Case, pool: WorkerPool, ctx: RunContext) -> CaseRun:
    """A case about to run; one that cannot run here at all is done at once (a skipped row)."""
    state = CaseRun(case, base_row(case, ctx))
    reason = plan_skip(case, ctx.platform) or pool.missing(case.backend)
    if reason:
        state.row.update(status="skipped", error=reason, timestamp=_now())
        state.done = True
    return state


def run_repeat(state: CaseRun, pool: WorkerPool, ctx: RunContext) -> None:
    """One independent run of the case (fresh inputs, trace and, for JAX, compile; its own warm-up).

    Never raises for the case's own failures: they end the case with a failed row."""
    case, row = state.case, state.row
    i, n = len(state.replies), state.wanted
    attempt = f"repeat {i + 1} of {n}: " if n > 1 else ""  # which repeat a failure happened in
    worker: Optional[Worker] = None
    try:
        worker = pool.get(case.backend, case.devices, worker_variant(case.backend, case.workload, case.params))
        env = worker.env
        if case.devices > int(env.get("device_count", 1)):
            raise WorkerError(f"case needs {case.devices} devices; the {case.backend} worker sees "
                              f"{env.get('device_count')} ({env.get('process_count', 1)} process(es))")
        row.update({k: env.get(k) for k in ("device_kind", "device_count", "process_count", "framework_version")})
        row["platform"] = env.get("platform", ctx.platform)
        msg = {"op": "run", "platform": row["platform"],
               "case": {"case_id": case.case_id, "workload": case.workload, "backend": case.backend,
                        "impl": case.impl, "params": case.params, "interpret": row["interpret"],
                        "measure": case.measure.model_dump()}}
        reply = worker.request(msg, ctx.timeout_override or case.measure.timeout_s)
    except WorkerError as e:
        if worker is not None and not worker.alive():
            pool.discard(worker)
        row.update(status="failed", error=f"{attempt}{e}", timestamp=_now())
        state.done = True
        return
    if reply["status"] != "ok":
        if reply["status"] == "failed":
            reply = {**reply, "error": f"{attempt}{reply.get('error')}"}
        state.final = reply
        state.done = True
    else:
        state.env = state.env or worker.env
        state.replies.append(reply)
        state.done = len(state.replies) >= n


def finish_case(state: CaseRun, ctx: RunContext) -> tuple[dict[str, Any], list[float]]:
    """The row (and samples) of a case that has ended: its repeats pooled, the metrics derived."""
    row = state.row
    if "status" in row:  # skipped, or the worker failed outright
        return row, []
    if state.final:  # failed or skipped: no result
        row.update(status=state.final["status"], error=state.final.get("error"), repeats=None, timestamp=_now())
        return row, []
    result = repeats.pool([CaseResult.from_message(r) for r in state.replies])
    row.update(status="ok", error=None, repeats=len(state.replies))
    row.update(result.fields)
    env = {**state.env, **ctx.cpu_peaks} if state.env.get("platform") == "cpu" else state.env
    row.update(derive(result, env, state.case.devices, ctx.peak_override or state.case.peak_tflops))
    if result.correct is False:
        row["notes"] = "; ".join(filter(None, [row.get("notes"), "WRONG RESULT: error above tolerance"]))
    row["timestamp"] = _now()
    return row, list(result.samples)


def run_cases(cases: Iterable[Case], writer: results.RowWriter, ctx: RunContext, pool: WorkerPool,
              on_row: Callable[[Case, dict[str, Any]], None] = lambda c, r: None,
              on_repeat: Callable[[Case], None] = lambda c: None) -> list[dict[str, Any]]:
    """Run every case, writing each row as soon as its case ends.

    Repeats are taken in passes over the cases, the order shuffled after the first pass (random
    interleaving, as Google Benchmark's --benchmark_enable_random_interleaving): a case's runs are
    spread over the run instead of back to back, so a slow stretch of a shared host hits every case
    a little instead of all of one case's runs (benchmarks/gate_quality.py measures the effect).
    Cases are grouped by backend and worker so an accelerator's worker is started once per group.
    An interrupt (see ``interruptible``) kills the workers and propagates: the case in flight gets no row.
    """
    cases = list(cases)
    order: dict[str, int] = {}
    for case in cases:
        order.setdefault(case.backend, len(order))
    groups: dict[tuple, list[Case]] = {}
    for case in sorted(cases, key=lambda c: order[c.backend]):
        key = (case.backend, case.devices, worker_variant(case.backend, case.workload, case.params))
        groups.setdefault(key, []).append(case)
    rng = random.Random(ctx.run_id)  # the order is reproducible from the run id
    rows: list[tuple[int, dict[str, Any]]] = []  # (the case's place in the suite, its row)
    position = {id(c): i for i, c in enumerate(cases)}

    def step(state: CaseRun) -> None:
        if not state.done:
            run_repeat(state, pool, ctx)
            on_repeat(state.case)
        if state.done:
            row, samples = finish_case(state, ctx)
            with uninterrupted():
                writer.write(row, samples)
                rows.append((position[id(state.case)], row))
                on_row(state.case, row)

    with interruptible():
        try:
            for group in groups.values():
                states = []
                for case in group:  # the first pass in suite order
                    state = start_case(case, pool, ctx)
                    states.append(state)
                    step(state)
                while pending := [s for s in states if not s.done]:
                    rng.shuffle(pending)
                    for state in pending:
                        step(state)
        except KeyboardInterrupt:  # Interrupted, or a plain Ctrl-C off the main thread's handler
            pool.kill_all()
            raise
    return [row for _, row in sorted(rows, key=lambda pr: pr[0])]  # the CSV has them as they ended
