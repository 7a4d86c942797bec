"""A worker never outlives its parent (--parent-pid): on Linux the kernel kills it when the parent dies (PR_SET_PDEATHSIG), and everywhere a watchdog thread exits when the parent pid changes or the protocol pipe closes. Otherwise a parent killed while its worker hangs or compiles (OOM killer, kill -9, a lost SSH session) leaves an orphan that keeps the accelerator open for the next run."""

from __future__ import annotations

import ctypes
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable

from xlabench.units import to_ms



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
            if poller.poll(to_ms(interval_s)):
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
