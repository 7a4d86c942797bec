"""The host's speed beside each case: a fixed float32 matmul (numpy, one BLAS thread) that the
runner times just before and just after each repeat of a case, while the worker waits.

Why: two runs taken under different load from other jobs differ by the host's speed, which no
statistic on the two runs' samples can tell from a change of the code (an A/A `gate` on a loaded
host failed with a "confirmed" 1.34x regression). The kernel never changes, so the change of its
time between baseline and candidate is the host's own change of speed, case by case; the gate
calls a regression it explains ``confounded`` (xlabench/gate/pairing.py, HostProbe). It costs no
worker time and is the same for every backend; on an accelerator it tracks the host CPU only (what
dispatch and input feeding run on).

The kernel is timed in a small process of its own (one per run, started on first use), not in the
parent: the matmul releases the GIL, and in the parent the progress bar's redraw thread then held it
for milliseconds, so a 0.2 ms kernel read 4-16 ms and a real regression was called confounded.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import threading
from typing import Optional

CALIB_N = 256  # ~34 MFLOP: about 0.33 ms on one core of an idle 2-core host
# Timed as blocks of CALIB_BLOCK back-to-back matmuls (~16 ms idle), the median of CALIB_REPS blocks,
# reported per matmul. A single matmul is shorter than the scheduler's time slice and never sees the load
# (x1.00 beside 4 busy processes on 2 cores); a block gets the share of the CPU that a long-running worker
# gets. One BLAS thread: the block's time then grows with the load in proportion (x1.1-1.8 beside 2 busy
# processes, x2.7 beside 4; benchmarks/calibration_load.py), where two threads that wait on each other
# grew out of proportion (x9 beside 4) and would call a real regression on a loaded host 'confounded'.
CALIB_BLOCK = 50
CALIB_REPS = 3
_ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

# The probe: reads a repeat count per line, answers the median over that many timed blocks of the
# seconds per matmul. It ignores Ctrl-C (the parent handles it) and ends when the parent closes its stdin
# or dies.
_PROBE = f"""
import signal, statistics, sys, time
import numpy as np
signal.signal(signal.SIGINT, signal.SIG_IGN)
a = np.full(({CALIB_N}, {CALIB_N}), 0.5, np.float32)
a @ a  # BLAS's threads started outside the timed runs
for line in sys.stdin:
    times = []
    for _ in range(int(line)):
        t0 = time.perf_counter()
        for _ in range({CALIB_BLOCK}):
            a @ a
        times.append((time.perf_counter() - t0) / {CALIB_BLOCK})
    print(repr(statistics.median(times)), flush=True)
"""


class _Probe:
    """One probe process, shared by the run's threads (``--jobs``) one measurement at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: Optional[subprocess.Popen] = None

    def measure(self, reps: int) -> Optional[float]:
        with self._lock:
            try:
                if self._proc is None or self._proc.poll() is not None:
                    self._proc = subprocess.Popen([sys.executable, "-c", _PROBE], stdin=subprocess.PIPE,
                                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                                  env={**os.environ, **_ONE_THREAD})
                self._proc.stdin.write(f"{reps}\n")
                self._proc.stdin.flush()
                return float(self._proc.stdout.readline())
            except (OSError, ValueError):  # no probe (it died, or could not start): no figure, never a failed case
                self.close()
                return None

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                proc.stdin.close()
                proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()


_probe = _Probe()
atexit.register(_probe.close)


def host_calib_s(reps: int = CALIB_REPS) -> Optional[float]:
    """Seconds per calibration matmul, the median of ``reps`` timed blocks (the median: one preempted
    block does not move it; a host loaded for the whole bracket does), or None where the probe could not
    run."""
    return _probe.measure(reps)
