"""Worker process: imports one framework, answers probe/run requests from the parent over a pipe.

Protocol: one JSON object per line. The parent writes requests to stdin; replies go to the original
stdout, while everything else anyone prints (Python or C++) is sent to stderr, i.e. the run's log.
The parent never imports a framework; a crash or hang here costs one case, not the run.

A worker never outlives its parent (``--parent-pid``): on Linux the kernel kills it when the parent
dies (PR_SET_PDEATHSIG), and everywhere a watchdog thread exits when the parent pid changes or the
protocol pipe closes. Otherwise a parent killed while its worker hangs or compiles (OOM killer, kill -9,
a lost SSH session) leaves an orphan that keeps the accelerator open for the next run.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib
import json
import os
import select
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from xlabench.harness import TimingPlan
from xlabench.worker_api import CaseSkipped

FAULT_ENV = "XLABENCH_INJECT_FAULT"
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
WATCH_INTERVAL_S = 0.5
PIPE_CLOSED_GRACE_S = 10.0  # the parent closed our stdin: time for the read loop to end on its own


def _exit_group() -> None:
    """Die now, with anything this worker started: it leads its own process group (start_new_session)."""
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpid(), signal.SIGKILL)
    os._exit(1)


def _pid_alive(pid: int) -> bool:
    """``pid`` exists and is not a zombie (a dead process stays one until its own parent reaps it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not os.path.isdir("/proc"):  # macOS: os.kill's answer is all there is
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def _parent_gone(parent_pid: int, direct: bool) -> bool:
    """Our direct parent: re-parented means it died. Through a wrapper that did not exec (a
    --python-torch-xla script): the runner's pid is gone or a zombie."""
    return os.getppid() != parent_pid if direct else not _pid_alive(parent_pid)


def _watch_parent(parent_gone: Callable[[], bool], pipe_fd: int, on_dead: Callable[[], None],
                  interval_s: float = WATCH_INTERVAL_S, grace_s: float = PIPE_CLOSED_GRACE_S) -> None:
    """Call ``on_dead`` once the parent is gone, or once it closed the protocol pipe and we are still
    here ``grace_s`` later (an idle worker ends its read loop at once on EOF; one stuck in a case does
    not). Runs in a thread, so it works while the main thread is busy in a compile, as long as that
    releases the GIL (on Linux PDEATHSIG needs no GIL)."""
    poller = select.poll()
    poller.register(pipe_fd, 0)  # no events asked: only POLLHUP / POLLERR / POLLNVAL, i.e. the pipe closed
    closed_at: float | None = None
    while not parent_gone():
        if closed_at is None:
            if poller.poll(interval_s * 1000):
                closed_at = time.monotonic()
        elif time.monotonic() - closed_at >= grace_s:
            break
        else:
            time.sleep(interval_s)
    on_dead()


def die_with_parent(parent_pid: int) -> None:
    """Make sure this worker does not outlive ``parent_pid`` (see the module docstring)."""
    direct = os.getppid() == parent_pid  # else a wrapper script sits between us, or the parent already died
    if sys.platform.startswith("linux"):
        try:  # SIGKILL from the kernel when our direct parent dies, even if we are stuck in C code
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if _parent_gone(parent_pid, direct):  # it died before prctl took effect: no signal will come
        _exit_group()
    threading.Thread(target=_watch_parent, args=(lambda: _parent_gone(parent_pid, direct), sys.stdin.fileno(),
                                                 _exit_group), name="xlabench-parent-watchdog", daemon=True).start()


def _inject_fault(case: dict[str, Any]) -> None:
    """Test hook: XLABENCH_INJECT_FAULT='[{"match": {"impl": "flash"}, "fault": "exit"}, ...]' makes
    matching cases raise, exit hard, die by SIGSEGV or hang, so the runner's recovery is tested for real."""
    raw = os.environ.get(FAULT_ENV)
    if not raw:
        return
    specs = json.loads(raw)
    fields = {"impl": case["impl"], "backend": case["backend"], **case["params"]}
    for spec in specs if isinstance(specs, list) else [specs]:
        if all(fields.get(k) == v for k, v in spec.get("match", {}).items()):
            _fault(spec["fault"])


def _fault(fault: str) -> None:
    if fault == "raise":
        raise RuntimeError("injected fault: raise")
    if fault == "exit":
        os._exit(17)
    if fault == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    if fault == "hang":
        while True:
            time.sleep(1)


def _run(backend: Any, msg: dict[str, Any]) -> dict[str, Any]:
    case = msg["case"]
    m = case["measure"]
    plan = TimingPlan(warmup=m["warmup"], iters=m["iters"], min_time_s=m["min_time_s"],
                      max_iters=m["max_iters"])
    try:
        _inject_fault(case)
        runner = backend.runner_for(case["workload"])
        result = runner(case["params"], case["impl"], plan, bool(case["interpret"]), msg["platform"])
        return {"status": "ok", **result.to_message()}
    except CaseSkipped as e:
        return {"status": "skipped", "error": str(e)}
    except Exception as e:  # any failure of one case becomes a failed row, the worker lives on
        traceback.print_exc(file=sys.stderr)
        text = f"{type(e).__name__}: {e}".strip()
        return {"status": "failed", "error": text[:2000]}


def _compile(backend: Any, msg: dict[str, Any]) -> dict[str, Any]:
    """``xlabench compile``: one case compiled for the message's target; status compiled / oom / lowered."""
    case = msg["case"]
    if not hasattr(backend, "compiler_for"):
        return {"status": "skipped", "error": f"the {case['backend']} backend cannot compile for a target "
                                              "without its devices (see docs/compile.md)"}
    try:
        _inject_fault(case)
        from xlabench.backends.jax.aot import TargetSpec

        return backend.compiler_for(case["workload"])(case["params"], case["impl"], TargetSpec.from_message(msg["target"]))
    except CaseSkipped as e:
        return {"status": "skipped", "error": str(e)}
    except Exception as e:  # one case's failure is a failed row; the worker lives on
        traceback.print_exc(file=sys.stderr)
        return {"status": "failed", "error": f"{type(e).__name__}: {e}".strip()[:2000]}


def _target_env(msg: dict[str, Any]) -> dict[str, Any]:
    """The target's devices as the row's environment (and the check that this host can compile for it)."""
    from xlabench.backends.jax.aot import TargetSpec
    from xlabench.backends.jax.compile_case import target_env

    return target_env(TargetSpec.from_message(msg["target"]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m xlabench.worker")
    ap.add_argument("--backend", required=True)
    ap.add_argument("--parent-pid", type=int, default=None,
                    help="Die when this process (the runner that started the worker) dies.")
    args = ap.parse_args(argv)
    if args.parent_pid is not None:  # first, before the framework import (seconds) and any compile
        die_with_parent(args.parent_pid)

    proto = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)  # stray prints (Python or C) go to the log, never into the protocol
    sys.stdout = sys.stderr

    def reply(obj: dict[str, Any]) -> None:
        proto.write(json.dumps(obj, default=float) + "\n")
        proto.flush()

    try:
        backend = importlib.import_module(f"xlabench.backends.{args.backend}")
    except Exception as e:
        traceback.print_exc()
        reply({"fatal": f"cannot import backend {args.backend!r}: {type(e).__name__}: {e}"})
        return 3
    for line in sys.stdin:
        msg = json.loads(line)
        op = msg.get("op")
        if op == "probe":
            try:
                reply({"env": backend.probe()})
            except Exception as e:
                traceback.print_exc()
                reply({"fatal": f"probe failed: {type(e).__name__}: {e}"})
        elif op == "target":
            try:
                reply({"env": _target_env(msg)})
            except Exception as e:
                traceback.print_exc()
                reply({"fatal": f"{type(e).__name__}: {e}".strip()[:1000]})
        elif op == "compile":
            print(f"--- compile {msg['case']['case_id']} {msg['case']['impl']} {msg['case']['params']}",
                  file=sys.stderr, flush=True)
            reply(_compile(backend, msg))
        elif op == "run":
            print(f"--- case {msg['case']['case_id']} {msg['case']['impl']} {msg['case']['params']}",
                  file=sys.stderr, flush=True)
            reply(_run(backend, msg))
        else:
            reply({"fatal": f"unknown op {op!r}"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
