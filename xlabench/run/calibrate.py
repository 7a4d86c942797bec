"""The host's speed beside each case: a fixed float32 matmul (numpy, the host's BLAS threads) that the
runner times just before and just after each repeat of a case, while the worker waits.

Why: two runs taken under different load from other jobs differ by the host's speed, which no
statistic on the two runs' samples can tell from a change of the code (an A/A `gate` on a loaded
host failed with a "confirmed" 1.34x regression). The kernel never changes, so the change of its
time between baseline and candidate is the host's own change of speed, case by case; the gate
calls a regression it explains ``confounded`` (xlabench/gate/compare.py, HostProbe). It runs in the
parent, so it costs no worker time and is the same for every backend; on an accelerator it tracks
the host CPU only (what dispatch and input feeding run on).
"""

from __future__ import annotations

import functools
import statistics
import time

import numpy as np

CALIB_N = 256  # ~34 MFLOP: about 1 ms on an idle 2-core host, so five of them add ~10 ms per repeat
CALIB_REPS = 5


@functools.lru_cache(maxsize=1)
def _matrix() -> np.ndarray:
    return np.full((CALIB_N, CALIB_N), 0.5, np.float32)


def host_calib_s(reps: int = CALIB_REPS) -> float:
    """Median seconds of ``reps`` runs of the calibration matmul (the median: one preempted run does
    not move it; a host loaded for the whole bracket does)."""
    a = _matrix()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        a @ a
        times.append(time.perf_counter() - t0)
    return statistics.median(times)
