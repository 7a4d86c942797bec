"""How the host's calibration kernel (xlabench/run/calibrate.py) sees load: its time beside 0, 1, 2 and
4 busy processes, against idle. A probe that never moves under load cannot call a loaded run's
slowdown 'confounded'; one that moves as a long-running worker's time does can.

    python benchmarks/calibration_load.py [--samples 20]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from xlabench.run.calibrate import host_calib_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=20, help="calibrations per load level (median taken)")
    args = ap.parse_args()
    host_calib_s()  # the probe started
    idle = None
    for hogs in (0, 1, 2, 4):
        procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(hogs)]
        time.sleep(0.3)
        try:
            t = statistics.median(host_calib_s() for _ in range(args.samples))
        finally:
            for p in procs:
                p.kill()
        idle = idle or t
        print(f"{hogs} busy processes: {t * 1e3:.3f} ms per matmul (x{t / idle:.2f} of idle)")


if __name__ == "__main__":
    main()
