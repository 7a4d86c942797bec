"""Compile once, in parallel (issue 25): what the compilation cache and ``--jobs`` buy, measured as a user
runs the commands (separate processes, wall time), on this host. A benchmark, not a test.

    python benchmarks/compile_once.py repeat   # the same compile twice (fresh cache), the same CPU run twice
    python benchmarks/compile_once.py jobs     # compile --jobs 1 vs --jobs 2 (no cache), CPU use, peak memory
    python benchmarks/compile_once.py memory   # one job's peak host memory on the largest shipped compile

Goals: a repeated `compile suites/attention.yaml --target v5e-8` in <= 15% of the first; `--jobs 2` in
<= 65% of `--jobs 1` on the 2-core host (or proof that one compile already keeps both cores busy).
"""

from __future__ import annotations

import argparse
import heapq
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ["peak_memory_bytes", "mem_args_bytes", "mem_out_bytes", "mem_temp_bytes", "mem_alias_bytes",
           "hbm_fraction", "xla_flops", "xla_bytes_accessed", "collective_bytes", "flops_ratio", "bound_s"]


def xlabench(*args: str) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the command and its workers, stdout) of one `xlabench` command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "xlabench", *args], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "COLUMNS": "200"})
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode not in (0, 1):
        sys.exit(f"xlabench {' '.join(args)} exited {r.returncode}:\n{r.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, r.stdout


def rows_of(out: Path, pattern: str) -> pd.DataFrame:
    from xlabench import results

    csv = sorted(p for p in out.rglob(pattern) if not p.name.endswith(".samples.csv"))[-1]
    return results.read_rows(csv)


def load() -> str:
    return "load %.2f %.2f %.2f" % os.getloadavg()


def repeat(work: Path) -> None:
    cache = work / "cache"
    print(f"# the same command twice, a fresh cache folder before the first ({os.cpu_count()} cores, {load()})")
    for name, args, pattern in [
        ("compile suites/attention.yaml --target v5e-8",
         ["compile", "suites/attention.yaml", "--target", "v5e-8"], "*.compile.csv"),
        ("run suites/gpt2.yaml --backend jax (cpu profile)", ["run", "suites/gpt2.yaml", "--backend", "jax"], "*.csv"),
    ]:
        got = []
        for i in (1, 2):
            out = work / f"{args[0]}-{i}"
            wall, _, _ = xlabench(*args, "--out", str(out), "--cache-dir", str(cache))
            rows = rows_of(out, pattern)
            done = rows[rows["status"].isin(["compiled", "ok"])]
            got.append((wall, done))
            print(f"{name}, run {i}: {wall:.1f} s wall; {len(done)} rows compiled/ok, "
                  f"compile_s sum {done['compile_s'].sum():.2f} s (median {done['compile_s'].median():.3f} s), "
                  f"compile_cached true in {int((done['compile_cached'] == True).sum())}")  # noqa: E712
        (w1, a), (w2, b) = got
        a, b = a.set_index("case_id").sort_index(), b.set_index("case_id").sort_index()
        cols = [c for c in FIGURES if c in a.columns]
        same = all(a[c].astype(str).tolist() == b[c].astype(str).tolist() for c in cols) if args[0] == "compile" \
            else None
        print(f"  second / first wall: {w2 / w1:.1%}" + ("" if same is None else
              f"; figures ({', '.join(cols)}) bit for bit the same: {same}"))


def lpt_makespan(seconds: list[float], jobs: int) -> float:
    """Longest-first greedy schedule of the cases over ``jobs`` workers (what --jobs does): the wall."""
    loads = [0.0] * jobs
    for s in sorted(seconds, reverse=True):
        heapq.heapreplace(loads, loads[0] + s)
    return max(loads)


def jobs(work: Path, target: str, suite: str) -> None:
    print(f"# xlabench compile {suite} --target {target} --no-cache ({os.cpu_count()} cores, {load()})")
    measured = {}
    for n in (1, 2):
        out = work / f"jobs-{n}"
        wall, cpu, stdout = xlabench("compile", suite, "--target", target, "--no-cache", "--jobs", str(n),
                                     "--out", str(out))
        rows = rows_of(out, "*.compile.csv")
        done = rows[rows["status"].isin(["compiled", "oom"])]
        peak = re.search(r"peak host memory per job: ([0-9., ]+) GiB", stdout)
        measured[n] = (wall, done)
        print(f"--jobs {n}: {wall:.1f} s wall, {cpu:.1f} CPU s ({cpu / wall:.2f} cores busy on average), "
              f"{len(done)} compiled/oom rows, compile_s sum {done['compile_s'].sum():.1f} s; "
              f"peak host memory per job: {peak.group(1) if peak else '?'} GiB")
    (w1, d1), (w2, _) = measured[1], measured[2]
    print(f"--jobs 2 / --jobs 1: {w2 / w1:.1%} (goal <= 65%)")
    per_case = (d1["lower_s"].fillna(0) + d1["compile_s"].fillna(0)).tolist()
    fixed = w1 - sum(per_case)  # start-up, the HBM probe, analysis, writing
    for cores in (96,):
        print(f"projection, not a measurement: a {cores}-core host with --jobs {cores} needs >= "
              f"{fixed + lpt_makespan(per_case, cores):.1f} s (this run's fixed {fixed:.1f} s + the longest case "
              f"{max(per_case):.1f} s: the longest-first schedule of the measured per-case seconds), "
              f"{w1 / (fixed + lpt_makespan(per_case, cores)):.1f}x the --jobs 1 wall; assuming every job "
              "compiles at this host's single-job speed and the host has the memory for them")


def memory(work: Path) -> None:
    args = ["compile", "suites/llama.yaml", "--target", "v4-8", "-k", "global_batch=128", "-k", "sharding=fsdp",
            "--impl", "naive", "--backend", "jax", "--no-cache", "--jobs", "1", "--out", str(work / "memory")]
    wall, _, stdout = xlabench(*args)
    peak = re.search(r"peak host memory per job: ([0-9., ]+) GiB", stdout)
    print(f"xlabench {' '.join(args[:-2])}: {wall:.1f} s, peak host memory of the job: "
          f"{peak.group(1) if peak else '?'} GiB ({load()})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["repeat", "jobs", "memory"])
    ap.add_argument("--target", default="v5e-8")
    ap.add_argument("--suite", default="suites/attention.yaml")
    ap.add_argument("--dir", default=None, help="work folder (default: a temporary one, removed after)")
    a = ap.parse_args()
    work = Path(a.dir) if a.dir else Path(tempfile.mkdtemp(prefix="xlabench-compile-once-"))
    try:
        {"repeat": lambda: repeat(work), "jobs": lambda: jobs(work, a.target, a.suite),
         "memory": lambda: memory(work)}[a.what]()
    finally:
        if not a.dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
