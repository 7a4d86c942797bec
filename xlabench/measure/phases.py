"""Where a case's time went, phase by phase (inputs, tuning, compile, the timed passes, the reference):
one line in the run's log (the worker's stderr, ``<run>.log`` beside the CSV), so that a long profile on a
chip can be budgeted from the run before it; and ``rounded()`` in the case's CaseResult (``phase_s``), which the
run's meta sums per phase."""

from __future__ import annotations

import contextlib
import sys
import time
from typing import Callable, Iterator, TextIO


class Phases:
    def __init__(self, clock: Callable[[], float] = time.perf_counter):
        self.clock = clock
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t0 = self.clock()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + self.clock() - t0

    def rounded(self) -> dict[str, float]:
        """The seconds per phase, to the millisecond (what the case's CaseResult carries)."""
        return {name: round(s, 3) for name, s in self.seconds.items()}

    def text(self) -> str:
        return ", ".join(f"{name} {s:.2f} s" for name, s in self.seconds.items())

    def log(self, what: str, out: TextIO | None = None) -> None:
        print(f"{what}: {self.text()} (total {sum(self.seconds.values()):.2f} s)", file=out or sys.stderr, flush=True)
