"""Precision and recall of `xlabench history changes` on generated series: 30 runs of the shipped cpu suite's
48 real cases (tests/fixtures/gate_attention_cpu.csv: each case's own sample noise, redrawn, and a machine
speed from run to run), one slowdown step of 1-20% at a random run (5..25), and noise-only series.

A found change is a true positive when it lies within +-1 run of the step; precision = true / found,
recall = steps found / steps. Per case (a case's series alone, alpha 0.01) and suite-wide (the weighted
geometric mean of the 48 cases). A benchmark, not a test:

    python benchmarks/history_quality.py [--series 200] [--run-sigma 0.01] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import _history_data as hd  # noqa: E402  (the tests' generator: one noise model for tests and figures)

from xlabench.history import changes as cp  # noqa: E402

BINS = [(0.01, 0.02), (0.02, 0.05), (0.05, 0.10), (0.10, 0.20)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--series", type=int, default=200)
    ap.add_argument("--run-sigma", type=float, default=hd.RUN_SIGMA)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    stats: dict[str, dict[tuple[float, float], list[int]]] = {k: {b: [0, 0] for b in BINS} for k in ("case", "suite")}
    found = {"case": [0, 0], "suite": [0, 0]}  # [true, all]
    false_alarms = {"case": 0, "suite": 0}
    for i in range(a.series):
        size = float(np.exp(rng.uniform(np.log(0.01), np.log(0.20))))
        at = int(rng.integers(5, 26))
        factors = [1.0] * at + [1.0 + size] * (30 - at)
        g = hd.group(factors, seed=a.seed * 100000 + i, run_sigma=a.run_sigma)
        case = str(rng.choice(sorted(g.samples)))
        b = next(b for b in BINS if b[0] <= size <= b[1])
        for kind, (_, y) in (("case", g.case_series(case)), ("suite", g.geomean_series())):
            splits = cp.segment(y)
            hit = [s for s in splits if abs(s.index - at) <= 1]
            stats[kind][b][0] += bool(hit)
            stats[kind][b][1] += 1
            found[kind][0] += len(hit)
            found[kind][1] += len(splits)
        g0 = hd.group([1.0] * 30, seed=a.seed * 100000 + 50000 + i, run_sigma=a.run_sigma)
        case0 = str(rng.choice(sorted(g0.samples)))
        false_alarms["case"] += bool(cp.segment(g0.case_series(case0)[1]))
        false_alarms["suite"] += bool(cp.segment(g0.geomean_series()[1]))
    print(f"{a.series} step series + {a.series} noise-only series, 30 runs, run-to-run machine sigma "
          f"{a.run_sigma:.1%}, alpha {cp.ALPHA}")
    print("| series | " + " | ".join(f"recall, step {lo:.0%}-{hi:.0%}" for lo, hi in BINS)
          + " | precision | false alarms (noise only) |")
    print("|---" * (len(BINS) + 3) + "|")
    for kind in ("case", "suite"):
        cells = [f"{s[0]}/{s[1]} = {s[0] / max(s[1], 1):.0%}" for s in (stats[kind][b] for b in BINS)]
        t, n = found[kind]
        print(f"| {'one case' if kind == 'case' else 'suite geomean (48 cases)'} | " + " | ".join(cells)
              + f" | {t}/{n} = {t / max(n, 1):.0%} | {false_alarms[kind]}/{a.series} = "
              f"{false_alarms[kind] / a.series:.1%} |")


if __name__ == "__main__":
    main()
