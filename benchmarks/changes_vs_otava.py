"""xlabench's change points side by side with Apache Otava's on the same generated series.

Families (each series 60 runs, a seeded generator; steps of 2-20 %, log-uniform, either sign):
  step        one step at a random run 5..55
  reg-fix     a regression of 5-15 runs, then its fix
  multi       2-4 changes, at least 8 runs apart
  outliers    one step, plus 2-3 runs 20-50 % slow (a bad run; not a change)
  banding     one step; noise in two bands (a third of the runs 2-4 sigma up, at random)
  noise-only  no change (false alarms per series)
Run-to-run noise: normal, its sigma drawn from 0.5-3 % per series, or fixed with --sigma.

Both tools read the same series: xlabench the log of the values (changes.segment, alpha 0.01, family auto),
Otava the values (otava.analysis.compute_change_points at its defaults: window 50, max p-value 0.001,
no minimum magnitude) in its own environment (`make otava-env`: .venv-otava, it pins numpy 2.2). A found
change is true when within +-1 run of a true change (each true change matched once); precision = true
found / found, recall = true changes matched / true changes, per family and per step size.

    make otava-env && python benchmarks/changes_vs_otava.py [--per-family 100] [--sigma 0.01] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from xlabench.history import changes as cp

ROOT = Path(__file__).resolve().parent.parent
OTAVA_PYTHON = ROOT / ".venv-otava" / "bin" / "python"
N = 60
FAMILIES = ("step", "reg-fix", "multi", "outliers", "banding", "noise-only")
BINS = ((0.02, 0.05), (0.05, 0.10), (0.10, 0.201))
OTAVA_SCRIPT = """
import json, sys
from otava.analysis import compute_change_points
out = []
for s in json.load(open(sys.argv[1])):
    cps, _ = compute_change_points(s, window_len=50, max_pvalue=0.001, min_magnitude=0.0)
    out.append([int(c.index) for c in cps])
json.dump(out, open(sys.argv[2], "w"))
"""


def _size(rng: np.random.Generator) -> float:
    return float(np.exp(rng.uniform(np.log(0.02), np.log(0.20))))


def _sign(rng: np.random.Generator) -> float:
    return 1.0 if rng.random() < 0.5 else -1.0


def generate(family: str, rng: np.random.Generator, sigma: float) -> tuple[np.ndarray, list[tuple[int, float]]]:
    """(log values of N runs, [(run of a true change, its size)])."""
    level = np.zeros(N)
    truth: list[tuple[int, float]] = []

    def step(at: int, size: float) -> None:
        level[at:] += np.log1p(size) * _sign(rng)
        truth.append((at, size))

    if family in ("step", "outliers", "banding"):
        step(int(rng.integers(5, N - 5)), _size(rng))
    elif family == "reg-fix":
        at, length, size = int(rng.integers(5, N - 20)), int(rng.integers(5, 16)), _size(rng)
        level[at:at + length] += np.log1p(size)
        truth += [(at, size), (at + length, size)]
    elif family == "multi":
        while True:
            ats = np.sort(rng.choice(np.arange(5, N - 4), int(rng.integers(2, 5)), replace=False))
            if np.all(np.diff(ats) >= 8):
                break
        for at in ats:
            step(int(at), _size(rng))
    noise = rng.normal(0, sigma, N)
    if family == "banding":
        noise += (rng.random(N) < 1 / 3) * sigma * rng.uniform(2, 4)
    y = level + noise
    if family == "outliers":
        bad = rng.choice(N, int(rng.integers(2, 4)), replace=False)
        y[bad] += np.log1p(rng.uniform(0.2, 0.5, len(bad)))
    return y, truth


def otava(values: list[list[float]]) -> list[list[int]]:
    if not OTAVA_PYTHON.exists():
        sys.exit(f"error: {OTAVA_PYTHON} not found: run `make otava-env` first")
    with tempfile.TemporaryDirectory() as d:
        src, dst = Path(d) / "in.json", Path(d) / "out.json"
        src.write_text(json.dumps(values))
        subprocess.run([str(OTAVA_PYTHON), "-c", OTAVA_SCRIPT, str(src), str(dst)], check=True)
        return json.loads(dst.read_text())


def score(found: list[int], truth: list[tuple[int, float]]) -> tuple[int, list[bool]]:
    """(true found, per true change: matched)."""
    left = sorted(found)
    matched = []
    for at, _ in truth:
        near = [f for f in left if abs(f - at) <= 1]
        if near:
            left.remove(min(near, key=lambda f: abs(f - at)))
        matched.append(bool(near))
    return len(found) - len(left), matched


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-family", type=int, default=100, help="series per family [default: 100]")
    ap.add_argument("--sigma", type=float, default=None, help="run-to-run noise (default: 0.5-3%% per series)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.per_family < 1 or (a.sigma is not None and not 0 < a.sigma < 1):
        ap.error("--per-family must be >= 1 and --sigma between 0 and 1")
    rng = np.random.default_rng(a.seed)
    series, truths, fams = [], [], []
    for fam in FAMILIES:
        for _ in range(a.per_family):
            sigma = a.sigma if a.sigma is not None else float(rng.uniform(0.005, 0.03))
            y, truth = generate(fam, rng, sigma)
            series.append(y)
            truths.append(truth)
            fams.append(fam)
    t0 = time.perf_counter()
    ours = [[s.index for s in cp.segment(y)] for y in series]
    t_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    theirs = otava([np.exp(y).tolist() for y in series])
    t_otava = time.perf_counter() - t0
    noise = "0.5-3%" if a.sigma is None else f"{a.sigma:.1%}"
    print(f"{len(series)} series of {N} runs ({a.per_family} per family), noise {noise}, seed {a.seed}; "
          f"xlabench {t_ours:.1f} s, Otava {t_otava:.1f} s (its own process)")
    print("| family | tool | recall | " + " | ".join(f"step {lo:.0%}-{min(hi, 0.2):.0%}" for lo, hi in BINS)
          + " | precision | series with a false alarm |")
    print("|---" * (len(BINS) + 5) + "|")
    for fam in FAMILIES:
        for tool, found in (("xlabench", ours), ("Otava", theirs)):
            rows = [i for i, f in enumerate(fams) if f == fam]
            true = total = 0
            bins = {b: [0, 0] for b in BINS}
            false_series = 0
            for i in rows:
                t, matched = score(found[i], truths[i])
                true += t
                total += len(found[i])
                false_series += len(found[i]) > t
                for (_, size), m in zip(truths[i], matched):
                    b = next(b for b in BINS if b[0] <= size < b[1])
                    bins[b][0] += m
                    bins[b][1] += 1
            hit, all_ = sum(v[0] for v in bins.values()), sum(v[1] for v in bins.values())
            cells = [f"{v[0]}/{v[1]} = {v[0] / v[1]:.0%}" if v[1] else "-" for v in bins.values()]
            rec = f"{hit}/{all_} = {hit / all_:.0%}" if all_ else "-"
            prec = f"{true}/{total} = {true / total:.0%}" if total else "-"
            print(f"| {fam} | {tool} | {rec} | " + " | ".join(cells)
                  + f" | {prec} | {false_series}/{len(rows)} = {false_series / len(rows):.1%} |")


if __name__ == "__main__":
    main()
