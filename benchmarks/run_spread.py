"""Spread across runs: the CV of the reported median over N separate `xlabench run` invocations.

Each run is a fresh process (fresh compile), as in CI. Prints every run's median and the CV.

    python benchmarks/run_spread.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from xlabench import results

SUITE = """
name: spread
workload: attention
impls: [naive]
params: {batch: 1, num_heads: 4, head_dim: 64, seq_len: 512, causal: true, dtype: float32, mode: fwd}
measure: {warmup: 3, iters: 30}
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    medians = []
    with tempfile.TemporaryDirectory() as tmp:
        suite = Path(tmp) / "spread.yaml"
        suite.write_text(textwrap.dedent(SUITE))
        for i in range(a.runs):
            out = Path(tmp) / f"r{i}"
            subprocess.run([sys.executable, "-m", "xlabench", "run", str(suite), "--out", str(out)],
                           check=True, capture_output=True)
            csv = next(p for p in out.glob("*/*.csv") if not p.name.endswith(".samples.csv"))
            medians.append(float(results.read_rows(csv)["median_s"].iloc[0]))
    cv = statistics.stdev(medians) / statistics.mean(medians)
    print("medians (ms): " + ", ".join(f"{m * 1e3:.4f}" for m in medians))
    print(f"CV of the median over {a.runs} runs: {cv * 100:.2f}%")


if __name__ == "__main__":
    main()
