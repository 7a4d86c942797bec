"""SIGINT and SIGTERM during a run: the case in flight is dropped (no row; it reruns on --resume), rows and baselines are written whole, and the caller gets Interrupted with how far the run got."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any



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
