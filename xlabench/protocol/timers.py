"""The timer names, in one place: the suite's ``measure.timer``, ``--timer`` and the backends read them.

``wallclock``: perf_counter around each call + sync. ``trace``: also the device seconds of each
iteration from a profiler trace, in a separate pass (backends that cannot trace time wallclock and say so).
"""

from __future__ import annotations

from typing import Literal, get_args

Timer = Literal["wallclock", "trace"]
TIMERS: tuple[str, ...] = get_args(Timer)
