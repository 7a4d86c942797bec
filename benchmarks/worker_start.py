"""What one worker costs to start, as the runner starts it: the process, the framework's import and the
probe, then the close (CPU seconds of the worker, from its rusage). A benchmark, not a test.

    python benchmarks/worker_start.py            # JAX, and torch_xla where its environment exists
    python benchmarks/worker_start.py --tries 9

Why it matters: the tests start ~100 JAX workers and ~13 torch_xla workers, a user's run one per backend
and device count. Measured on this project's 2-core host (2026-12-06, median of 5): a JAX worker took
1.48 s of CPU (1.40 s wall) with ml_dtypes 0.7.0, whose extension alone took 0.61 s to import, and 0.74 s
(0.64 s wall) with 0.6.0 (4 ms): pyproject bounds it below 0.7. A torch_xla worker: 4.45 s of CPU.
2026-12-07 (the host slower that day): a torch_xla worker 7.14 s of CPU, 6.23 s once its probe read the
versions of JAX and torchax from their metadata and the cached host peak without importing JAX.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time

from xlabench.run.envs import Interpreters
from xlabench.run.workers import Worker, WorkerSpec


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def start_once(backend: str, python: str) -> tuple[float, float]:
    """(wall seconds, worker CPU seconds) of one start, probe and close."""
    cpu0, t0 = _children_cpu(), time.perf_counter()
    w = Worker(WorkerSpec(backend, 1, python), None)
    try:
        w.request({"op": "probe"}, 600)
    finally:
        w.close()
    return time.perf_counter() - t0, _children_cpu() - cpu0


def import_seconds(python: str, module: str) -> float:
    """Seconds to import ``module`` in ``python`` (python -X importtime's cumulative figure)."""
    r = subprocess.run([python, "-X", "importtime", "-c", f"import numpy; import {module}"], capture_output=True,
                       text=True)
    lines = [ln for ln in r.stderr.splitlines() if ln.rstrip().endswith(f"| {module}")]
    return int(lines[-1].split("|")[1]) / 1e6 if lines else float("nan")


def version(python: str, module: str) -> str:
    r = subprocess.run([python, "-c", f"import {module}; print({module}.__version__)"], capture_output=True, text=True)
    return r.stdout.strip() or "absent"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tries", type=int, default=5)
    args = ap.parse_args()
    interp = Interpreters()
    for backend in ("jax", "torch_xla"):
        missing = interp.missing(backend)
        if missing:
            print(f"{backend}: not measured ({missing})")
            continue
        python = interp.python_for(backend)
        runs = [start_once(backend, python) for _ in range(args.tries)]
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        ml = import_seconds(python, "ml_dtypes")
        print(f"{backend}: start + probe + close, median of {args.tries}: {wall:.2f} s wall, {cpu:.2f} s CPU; "
              f"ml_dtypes {version(python, 'ml_dtypes')} imports in {ml:.3f} s")


if __name__ == "__main__":
    sys.exit(main())
