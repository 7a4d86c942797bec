"""History at scale: N runs x M cases written as real run files (the schema's columns, 5 samples per case),
then `xlabench history add`, `history changes` and `history html` timed as a user runs them (separate
processes), and the store's size. A benchmark, not a test (goal: each step under 60 s on the 2-core host).

    python benchmarks/history_scale.py [--runs 1000] [--cases 200] [--dir /tmp/history-scale] [--history URL]
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from xlabench import results
from xlabench.stats.summary import summarize


def write_runs(out: Path, n_runs: int, n_cases: int, seed: int = 0) -> None:
    """Run files of an attention suite: a 5% slowdown of every case from run n_runs * 3 // 4 on."""
    rng = np.random.default_rng(seed)
    cases = []
    for i in range(n_cases):
        params = {"batch": 1 + i % 8, "num_heads": 4, "num_kv_heads": 4, "seq_len": 128 * (1 + i // 8),
                  "kv_seq_len": 128 * (1 + i // 8), "head_dim": 64, "causal": False, "dtype": "float32", "mode": "fwd"}
        cases.append((results.case_id("attention", "jax", "naive", params), params, 1e-3 * (1 + i % 13)))
    out.mkdir(parents=True, exist_ok=True)
    step_at = n_runs * 3 // 4
    for r in range(n_runs):
        run_id = f"20260101-{r:06d}-scal"
        machine = np.exp(rng.normal(0, 0.01)) * (1.05 if r >= step_at else 1.0)
        files = results.RunFiles(out / f"{run_id}.csv")
        with open(files.csv, "w", newline="") as fc, open(files.samples, "w", newline="") as fs:
            rows = csv.DictWriter(fc, fieldnames=results.COLUMN_NAMES)
            rows.writeheader()
            samp = csv.writer(fs)
            samp.writerow(results.SAMPLE_COLUMNS)
            for cid, params, base in cases:
                s = base * machine * rng.lognormal(0, 0.05, 5)
                row = {"schema_version": results.SCHEMA_VERSION, "run_id": run_id, "suite": "scale", "profile": "cpu",
                       "case_id": cid, "workload": "attention", "backend": "jax", "impl": "naive", **params,
                       "platform": "cpu", "device_kind": "cpu", "device_count": 1, "process_count": 1,
                       "framework_version": "jax 0.10.2 / jaxlib 0.10.2", "interpret": False, "hostname": "bench",
                       "git_sha": f"s{r:09d}", "timestamp": "2026-01-01T00:00:00+00:00", "status": "ok",
                       "warmup": 1, **summarize(list(s)), "flops": 1e9, "mfu": float(0.1 * base / s.mean())}
                rows.writerow({k: results._cell(row.get(k)) for k in results.COLUMN_NAMES})
                for i, x in enumerate(s):
                    samp.writerow([run_id, cid, i, repr(float(x))])
        results.write_meta(files, {"run_id": run_id, "suite": "scale", "started": f"2026-01-01T00:{r // 60 % 60:02d}:{r % 60:02d}Z"})


def timed(*args: str) -> float:
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "xlabench", *args], capture_output=True, text=True)
    took = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"xlabench {' '.join(args)} failed ({r.returncode}): {r.stderr}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--dir", default="/tmp/history-scale")
    ap.add_argument("--history", default=None, help="store URL (default: sqlite file in --dir)")
    ap.add_argument("--keep-files", action="store_true", help="reuse run files already written in --dir")
    a = ap.parse_args()
    d = Path(a.dir)
    runs_dir = d / "results" / "scale"
    if not a.keep_files or not runs_dir.exists():
        shutil.rmtree(d, ignore_errors=True)
        t = time.perf_counter()
        write_runs(runs_dir, a.runs, a.cases)
        print(f"wrote {a.runs} runs x {a.cases} cases in {time.perf_counter() - t:.0f} s")
    db = d / "history.sqlite"
    if db.exists():
        db.unlink()
    url = a.history or f"sqlite:///{db}"
    print(f"history add:     {timed('history', 'add', str(runs_dir), '--history', url):6.1f} s")
    print(f"history changes: {timed('history', 'changes', '--history', url, '--json', str(d / 'changes.json')):6.1f} s")
    print(f"history html:    {timed('history', 'html', '--history', url, '-o', str(d / 'site')):6.1f} s")
    if url.startswith("sqlite:///"):
        size = sum(p.stat().st_size for p in d.glob("history.sqlite*"))
        print(f"store size: {size / 1e6:.1f} MB ({a.runs} runs x {a.cases} cases x 5 samples)")
    print(f"site size: {sum(p.stat().st_size for p in (d / 'site').rglob('*') if p.is_file()) / 1e6:.1f} MB")
    print(f"load average: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
