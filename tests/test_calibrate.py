"""The host's calibration kernel measures the host, not the parent process's other threads."""

from __future__ import annotations

import sys
import threading

from xlabench.run.calibrate import host_calib_s


def test_a_thread_holding_the_gil_does_not_slow_the_calibration_kernel() -> None:
    """The CI failure: a run's progress bar redraws from a thread of its own, and the matmul releases the
    GIL, so each timed matmul waited for that thread to hand the GIL back (a 0.2 ms kernel read 4-16 ms,
    and the gate called a real 4x regression 'confounded' by an 80x slower host). Here a thread holds
    the GIL for 50 ms at a time: timed in this process, each run would take about that long."""
    host_calib_s()  # the probe started, outside the measured call
    stop = threading.Event()

    def hog() -> None:
        while not stop.is_set():
            sum(range(10_000))

    old = sys.getswitchinterval()
    sys.setswitchinterval(0.05)
    t = threading.Thread(target=hog, daemon=True)
    t.start()
    try:
        loaded = host_calib_s()
    finally:
        stop.set()
        t.join()
        sys.setswitchinterval(old)
    assert 0 < loaded < 0.02, f"{loaded * 1e3:.1f} ms: the GIL, not the host, set the calibration time"
