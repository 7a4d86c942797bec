"""Worker processes: one python -m xlabench.worker per (backend, device count, variant), reused across cases, killed with its process group; a crash, a hang past the timeout or an OOM kill is a WorkerError naming the cause; ``ask`` maps a request's reply or failure to a row's status, for `run` and `compile` alike."""

from __future__ import annotations

import json
import os
import re
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Union

from xlabench.run import envs
from xlabench.run.distributed import DistributedConfig
from xlabench.protocol.status import FAILED
from xlabench.protocol.worker_env import COMPILE_CACHE_VAR, FIGURE_CACHE_VAR, IMPL_PATH_VAR
from xlabench.protocol.replies import Reply, WorkerEnv
from xlabench.protocol.worker_messages import ProtocolError
from xlabench.run.envs import Interpreters, worker_environ
from xlabench.units import MIB


class WorkerError(Exception):
    """The worker died, hung or answered nonsense; the message says which and is row-ready."""

@dataclass
class WorkerSpec:
    backend: str
    devices: int  # local (virtual CPU) devices of this worker
    python: str = sys.executable
    dist: Optional[DistributedConfig] = None
    variant: str = ""  # process-global framework mode (torch_xla SPMD): one worker per variant
    search_path: tuple[str, ...] = ()  # where user impls are imported from (IMPL_PATH_VAR), besides the cwd
    compile_cache: Optional[str] = None  # the persistent compilation cache folder (xlabench/run/compile_cache_dir.py)
    hlo_dump: Optional[str] = None  # where a torch_tpu worker dumps its programs' HLO text (a run keeping traces)

    @property
    def key(self) -> tuple[str, int, str, str]:
        return (self.backend, self.devices, self.python, self.variant)

    def environ(self) -> dict[str, str]:
        env = worker_environ(self.backend, self.devices, dict(os.environ), self.variant, self.hlo_dump)
        if self.dist is not None:
            env.update(self.dist.worker_env())
        env["PYTHONUNBUFFERED"] = "1"
        env.pop(COMPILE_CACHE_VAR, None)
        env.pop(FIGURE_CACHE_VAR, None)
        if self.compile_cache:
            env[FIGURE_CACHE_VAR if self.variant == envs.COMPILE_VARIANT else COMPILE_CACHE_VAR] = self.compile_cache
        env[IMPL_PATH_VAR] = os.pathsep.join(dict.fromkeys([os.getcwd(), *self.search_path]))
        # The worker must import this very xlabench, whichever Python runs it.
        root = str(envs.ROOT)
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
        self.env = WorkerEnv()  # its probe's (WorkerPool.get)

    def request(self, msg: dict[str, Any], timeout_s: float) -> Reply:
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
                chunk = os.read(fd, MIB)
                if not chunk:
                    self.proc.wait(timeout=30)
                    raise WorkerError(self._death_message())
                self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            reply = Reply.from_message(json.loads(line))
        except (json.JSONDecodeError, ProtocolError):
            self.kill()
            raise WorkerError(f"worker sent an unreadable reply: {line[:200]!r}") from None
        if reply.fatal is not None:
            self.kill()
            raise WorkerError(reply.fatal)
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
                 dist: Optional[DistributedConfig] = None, local_devices: Optional[int] = None,
                 search_path: tuple[str, ...] = (), compile_cache: Optional[str] = None,
                 hlo_dump: Optional[str] = None):
        self.log_path = log_path
        self.compile_cache = compile_cache
        self.hlo_dump = hlo_dump
        self.search_path = search_path
        self.interpreters = interpreters
        self.dist = dist
        self.local_devices = local_devices
        self._workers: dict[tuple, Worker] = {}
        self._start_failures: dict[tuple, str] = {}

    def like(self) -> "WorkerPool":
        """A new, empty pool with this one's settings (``--jobs``: one pool per job)."""
        return WorkerPool(self.log_path, self.interpreters, self.dist, self.local_devices, self.search_path,
                          self.compile_cache, self.hlo_dump)

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
        spec = WorkerSpec(backend, devices, self.interpreters.python_for(backend), self.dist, variant,
                          self.search_path, self.compile_cache, self.hlo_dump)
        if spec.key in self._start_failures:  # a worker that cannot start will not start next case either
            raise WorkerError(self._start_failures[spec.key])
        w = self._workers.get(spec.key)
        if w is not None and w.alive():
            return w
        if w is not None:
            w.close()
        for other in [o for o in self._workers.values() if o.alive() and o.env.platform != "cpu"]:
            self.discard(other)
        w = Worker(spec, self.log_path)
        self._workers[spec.key] = w
        try:
            # a compile worker's rows take the target's peaks: it does not measure the host CPU's
            probe_msg = {"op": "probe", "measure_peaks": variant != envs.COMPILE_VARIANT}
            w.env = _env(w.request(probe_msg, self.PROBE_TIMEOUT_S))
        except WorkerError as e:
            self._workers.pop(spec.key, None)
            w.close()
            self._start_failures[spec.key] = f"{backend} worker did not start: {e}"
            raise WorkerError(self._start_failures[spec.key]) from None
        return w

    def peak_rss_bytes(self) -> Optional[int]:
        """The largest peak resident memory of this pool's live workers (Linux), or None."""
        from xlabench.run.parallel import peak_rss_bytes

        peaks = [p for w in self._workers.values() if w.alive() and (p := peak_rss_bytes(w.proc.pid)) is not None]
        return max(peaks, default=None)

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


def _env(reply: Reply) -> WorkerEnv:
    """A probe's env; WorkerError when the reply holds none (a worker of another xlabench)."""
    try:
        return WorkerEnv.from_message(reply.env)
    except ProtocolError as e:
        raise WorkerError(f"worker reply: {e}") from None


def probe(backend: str = "jax", devices: int = 1, interpreters: Interpreters = Interpreters()) -> WorkerEnv:
    """The environment a worker sees (platform, devices, versions, CPU peak), without importing it here."""
    reason = interpreters.missing(backend)
    if reason:
        raise WorkerError(reason)
    w = Worker(WorkerSpec(backend, devices, interpreters.python_for(backend)), None)
    try:
        return _env(w.request({"op": "probe"}, WorkerPool.PROBE_TIMEOUT_S))
    except KeyboardInterrupt:
        w.kill()
        raise
    finally:
        w.close()


Ended = tuple[str, Optional[str]]  # (status, error) of a case that ended without a result


def ask(pool: "WorkerPool", key: tuple[str, int, str], request: Callable[[Worker], dict[str, Any]], timeout_s: float,
        decode: Callable[[dict[str, Any]], Any], attempt: str = "") -> Union[Any, Ended]:
    """One request to the worker of ``key`` (backend, devices, variant), the message made by ``request`` from
    that worker (which may refuse it: WorkerError): the decoded ``result`` of a reply that has one, else
    (status, error) for the row: the worker's own skipped or failed reply, a worker that crashed or hung
    (discarded: the next get starts another), or a reply of another xlabench version. ``attempt`` (which
    repeat) starts a failure's error. Never raises for the case's own failures."""
    worker: Optional[Worker] = None
    try:
        worker = pool.get(*key)
        reply = worker.request(request(worker), timeout_s)
        if reply.result is None:  # skipped or failed
            status = reply.status or FAILED
            return status, f"{attempt}{reply.error}" if status == FAILED else reply.error
        return decode(reply.result)
    except ProtocolError as e:  # a worker of another xlabench version: the case fails, saying what differs
        return FAILED, f"{attempt}worker reply: {e}"
    except WorkerError as e:
        if worker is not None and not worker.alive():
            pool.discard(worker)
        return FAILED, f"{attempt}{e}"


def ended(outcome: Any) -> Optional[Ended]:
    """The (status, error) an ``ask`` returned, or None when it returned a result."""
    return outcome if isinstance(outcome, tuple) else None
