"""A/A false alarms of `xlabench gate` on a host loaded by a second benchmark process.

Each trial is what a CI job does on a shared runner: `gate --save-baseline` records a baseline of a
small CPU suite, then `gate` runs the same suite on the same code and judges it. Nothing changed, so
any exit 1 is a false alarm. A second `xlabench run` (the "loader", a heavier suite in a loop) loads
the host while one of the two runs is taken: in odd trials during the baseline, in even trials during
the candidate (what happens when other jobs come and go between a baseline and a check).

Several xlabench checkouts can be compared (``--root``, e.g. the commit before a change and after):
within a trial each checkout runs in turn under the same load pattern.

    python benchmarks/gate_aa_load.py --trials 4                                   # this checkout
    python benchmarks/gate_aa_load.py --trials 4 --root before=/tmp/old --root after=.

Prints a markdown table (per checkout: exit 0 / 1 / 3 counts and the false-alarm rate, exit 1 / N)
and writes every trial's exit code and headline to results/gate_aa_load/<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SUITE = """\
name: aa
description: six small CPU attention cases for the A/A gate benchmark
workload: attention
backends: [jax]
impls: [naive, xla_sdpa]
params: {batch: 2, num_heads: 4, head_dim: 64, dtype: float32, causal: false, mode: fwd}
matrix:
  seq_len: [128, 256, 512]
measure: {warmup: 2, iters: 10, min_time_s: 0.0, timeout_s: 300}
"""

LOAD_SUITE = """\
name: load
description: the second benchmark process that loads the host
workload: attention
backends: [jax]
impls: [naive, xla_sdpa]
params: {batch: 4, num_heads: 8, head_dim: 64, dtype: float32, causal: true, mode: fwd_bwd}
matrix:
  seq_len: [512, 1024]
measure: {warmup: 1, iters: 20, min_time_s: 0.0, timeout_s: 300}
"""


def _cli(root: Path, *args: str, log: Path) -> int:
    env = dict(os.environ, PYTHONPATH=str(root))
    with open(log, "a") as f:
        f.write(f"\n$ xlabench {' '.join(args)}\n")
        f.flush()
        return subprocess.run([sys.executable, "-m", "xlabench", *args], cwd=root, env=env, stdout=f,
                              stderr=subprocess.STDOUT).returncode


class Loader:
    """`xlabench run` of LOAD_SUITE in a loop, in its own process group (stopped by that group's id)."""

    def __init__(self, out: Path) -> None:
        suite = out / "load.yaml"
        suite.write_text(LOAD_SUITE)
        loop = (f"while true; do {sys.executable} -m xlabench run {suite} --out {out / 'load-results'} "
                ">/dev/null 2>&1; done")
        self.proc = subprocess.Popen(["bash", "-c", loop], cwd=ROOT, start_new_session=True,
                                     env=dict(os.environ, PYTHONPATH=str(ROOT)))

    def stop(self) -> None:
        os.killpg(self.proc.pid, signal.SIGTERM)  # the group this loader started, by its id
        self.proc.wait()


def _run(root: Path, suite: Path, base: Path, out: Path, log: Path, loaded: bool) -> int:
    loader = Loader(out) if loaded else None
    try:
        if loaded:
            time.sleep(5)  # the loader's worker is up and timing
        return _cli(root, "gate", str(suite), "--baseline", str(base), "--out", str(out / "results"),
                    "--json", str(out / "verdict.json"), *(() if base.exists() else ("--save-baseline",)), log=log)
    finally:
        if loader is not None:
            loader.stop()


def trial(i: int, name: str, root: Path, out: Path) -> dict:
    d = out / f"{name}-{i}"
    d.mkdir(parents=True)
    suite = d / "aa.yaml"
    suite.write_text(SUITE)
    base = d / "baseline" / "aa.csv"
    log = d / "log.txt"
    load_base = i % 2 == 1
    t0 = time.time()
    saved = _run(root, suite, base, d, log, loaded=load_base)
    code = _run(root, suite, base, d, log, loaded=not load_base) if saved == 0 else None
    verdict = json.loads((d / "verdict.json").read_text()) if (d / "verdict.json").exists() else {}
    headline = log.read_text().strip().splitlines()[-1] if log.exists() else ""
    return {"trial": i, "root": name, "loaded": "baseline" if load_base else "candidate", "save_exit": saved,
            "exit": code, "seconds": round(time.time() - t0, 1), "headline": headline,
            "counts": verdict.get("counts"), "suite": verdict.get("suite")}


def table(rows: list[dict], names: list[str]) -> str:
    lines = ["| checkout | trials | exit 0 (pass) | exit 1 (false alarm) | exit 3 (could not judge) | "
             "false-alarm rate |", "|---|---|---|---|---|---|"]
    for name in names:
        codes = [r["exit"] for r in rows if r["root"] == name]
        n = len(codes)
        lines.append(f"| {name} | {n} | {codes.count(0)} | {codes.count(1)} | {codes.count(3)} | "
                     f"{codes.count(1)}/{n} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=4)
    ap.add_argument("--root", action="append", default=[], metavar="NAME=DIR",
                    help="an xlabench checkout to run (repeatable; default: this one)")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "gate_aa_load")
    a = ap.parse_args()
    roots = [(r.split("=", 1)[0], Path(r.split("=", 1)[1]).resolve()) for r in a.root] or [("this", ROOT)]
    out = a.out / time.strftime("%Y%m%d-%H%M%S")
    rows = []
    for i in range(a.trials):
        for name, root in roots:
            rows.append(trial(i, name, root, out))
            print(json.dumps({k: rows[-1][k] for k in ("trial", "root", "loaded", "exit", "seconds", "headline")}),
                  flush=True)
    (out / "trials.json").write_text(json.dumps(rows, indent=2))
    print(table(rows, [n for n, _ in roots]))
    print(f"\n(trials in {out / 'trials.json'})")


if __name__ == "__main__":
    main()
