"""Wall seconds of the read-only commands, the whole CLI process from a warm bytecode cache (issue 61, item 6:
at most 3 s each on the 2-core host). A benchmark, not a test.

    python benchmarks/readonly_speed.py              # best of 5 of each command
    python benchmarks/readonly_speed.py --tries 3 --tree /tmp/old-checkout   # another checkout's code

The commands: ``xlabench compare`` of two committed 144-row TPU attention runs (68 cases judged, 52510
samples, 9999 bootstrap resamples of each side twice: the cases' intervals and the suite-wide one) and
``xlabench report docs/data/tpu-v5e/ --no-charts``. A first run of each (not counted) writes the bytecode
cache: PYTHONDONTWRITEBYTECODE is dropped from the commands' environment. Other work on the host slows
every figure: the best of a few tries is the one to read.

Measured 2026-12-08 on the 2-core host (best of 3, load ~0.9): before (d5faffe) compare 4.10 s, report
7.68 s; after (branch fast-readonly) compare 2.80 s, report 5.06 s; then (e73330f: the report's frames one
block per dtype, its groups by position) compare 3.03 s, report 3.96 s (load ~1.0). What is left of the
report, in a profile: the best configurations' bootstrap intervals (1.3 s on 2 threads; the draws are fixed),
loading the 47 run files (1.4 s, per-column pandas typing) and the imports (pandas, pydantic, scipy.stats).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "docs" / "data" / "tpu-v5e"
BASE = DATA / "2026-12-07-d" / "attention-user" / "20261207-083336-f698.csv"
CAND = DATA / "2026-12-07-evening" / "attention-user" / "20261207-212337-fc1d.csv"


def commands(out: Path) -> dict[str, list[str]]:
    return {
        "compare (2 x 144 attention rows)": ["compare", str(BASE), str(CAND)],
        "report docs/data/tpu-v5e/ --no-charts": ["report", str(DATA), "--no-charts", "--out", str(out / "report.md")],
    }


def wall(args: list[str], tree: Path) -> float:
    """Seconds of one ``python -m xlabench ARGS`` with ``tree`` first on the path (its exit status ignored:
    compare exits 1 on a regression)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(tree)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "xlabench", *args], cwd=tree, env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tries", type=int, default=5)
    ap.add_argument("--tree", type=Path, default=ROOT, help="checkout whose xlabench runs (default: this one)")
    args = ap.parse_args()
    print(f"{os.cpu_count()} CPU(s), load average {os.getloadavg()[0]:.2f}; code of {args.tree}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, cmd in commands(Path(tmp)).items():
            wall(cmd, args.tree)  # the bytecode cache
            times = sorted(wall(cmd, args.tree) for _ in range(args.tries))
            print(f"{name}: best {times[0]:.2f} s, median {times[len(times) // 2]:.2f} s of {args.tries}")


if __name__ == "__main__":
    sys.exit(main())
