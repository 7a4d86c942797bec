"""A run's files as the store records them: read whole and checked by the gate's loader (schema version,
truncation, samples that match their rows), then one RunRecord with a digest of the files' content."""

from __future__ import annotations

import hashlib
import math
import os
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional

from xlabench import results
from xlabench.gate.run_data import load_run
from xlabench.history.gitlog import GitLog
from xlabench.history.store import CaseResult, HistoryError, RunRecord, Store
from xlabench.results.schema import CASE_COLUMN_NAMES, COLUMNS

_IDENTITY = {"workload", "backend", "impl"}
# What a row measured: every column of these groups with a value (the run-level ones live on the run).
_METRIC_NAMES = [c.name for c in COLUMNS if c.group in ("measure", "metric", "compile")]


def _value(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    if hasattr(v, "item"):  # numpy scalar
        return v.item()
    return v


def _digest(paths: Iterable[Path]) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(p.name.encode() + b"\0")
        h.update(p.read_bytes() if p.exists() else b"")
    return h.hexdigest()


def read_run(csv_path: Path, git: Optional[GitLog] = None) -> RunRecord:
    """One results CSV (with its samples and meta file) as a RunRecord; raises HistoryError saying why not."""
    csv_path = Path(csv_path)
    try:
        data = load_run(csv_path)
    except results.ResultsFileError as e:
        raise HistoryError(str(e)) from None
    df = data.rows
    cols = list(df.columns)
    values, empty = df.to_numpy(dtype=object), df.isna().to_numpy()
    rows = [{c: (None if e else v) for c, v, e in zip(cols, vr, er)} for vr, er in zip(values, empty)]
    run_ids = {str(r["run_id"]) for r in rows}
    if len(run_ids) != 1:
        raise HistoryError(f"{csv_path}: rows of {len(run_ids)} runs ({', '.join(sorted(run_ids)[:3])}); "
                           "history add takes one run per file (merge shards first)")
    files = results.RunFiles(csv_path)
    try:
        meta = results.read_meta(files)
    except results.ResultsFileError as e:
        raise HistoryError(str(e)) from None
    first = rows[0]
    samples: dict[str, list[float]] = {}
    for cid, sec in zip(data.samples["case_id"].tolist(), data.samples["seconds"].tolist()):
        samples.setdefault(cid, []).append(sec)
    params_cols = [k for k in CASE_COLUMN_NAMES if k not in _IDENTITY and k in cols]
    metric_cols = [k for k in _METRIC_NAMES if k != "status" and k in cols]
    cases = []
    for r in rows:
        ok = r["status"] == "ok"
        cases.append(CaseResult(
            case_id=str(r["case_id"]), workload=str(r["workload"]), backend=str(r["backend"]), impl=str(r["impl"]),
            params={k: _value(r[k]) for k in params_cols if r[k] is not None}, status=str(r["status"]),
            median_s=_value(r.get("median_s")) if ok else None,
            metrics={k: _value(r[k]) for k in metric_cols if r[k] is not None},
            samples=samples.get(str(r["case_id"]), []) if ok else []))
    git_sha = str(_value(first.get("git_sha")) or meta.get("git_sha") or "")
    stamps = sorted(str(r["timestamp"]) for r in rows if r.get("timestamp"))
    commit = (git or GitLog()).get(git_sha)
    return RunRecord(
        run_id=run_ids.pop(), suite=str(first["suite"]), digest=_digest([files.csv, files.samples]),
        profile=str(_value(first.get("profile")) or ""), git_sha=git_sha,
        commit_time=commit.time if commit else None, commit_message=commit.subject if commit else "",
        started=str(meta.get("started") or (stamps[0] if stamps else "")) or None,
        device_kind=str(_value(first.get("device_kind")) or ""),
        framework_version=str(_value(first.get("framework_version")) or ""),
        platform=str(_value(first.get("platform")) or ""), hostname=str(_value(first.get("hostname")) or ""),
        source=str(csv_path), meta={k: meta[k] for k in ("command", "suite_file", "traces", "shard") if k in meta},
        cases=cases)


def run_files(paths: Iterable[Path], notes: Optional[list[str]] = None) -> list[Path]:
    """The results CSVs of timed runs among paths (a directory: every one under it, in name order). A file
    beside a run that a glob picks up (its samples, meta or log; a `xlabench compile` file) is passed over,
    with a note in ``notes`` where given explicitly."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out += sorted(q for q in p.rglob("*.csv") if results.passed_over(q, compiles=False) is None)
        elif not p.exists():
            raise HistoryError(f"{p}: no such file")
        elif note := results.passed_over(p, compiles=False):
            if notes is not None:
                notes.append(note)
        else:
            out.append(p)
    return out


FILES_PER_READER = 25  # a reader process takes ~2 s to start (its imports), a run file ~0.08 s to read


def readers(files: int, cpus: Optional[int] = None) -> int:
    """Reader processes for this many files: one per core (8 at most) while each has FILES_PER_READER files
    or more; below 2, the files are read here. On 2 cores, 30 runs of 48 cases took 2.3 s read here and 3.5 s
    by 2 readers (~4 s of CPU more in all), 100 runs 10.5 s here and 6.1 s by 2."""
    return min(cpus or os.cpu_count() or 1, 8, files // FILES_PER_READER)


def _read_many(paths: list[Path], git: GitLog, workers: Optional[int] = None) -> Iterator[RunRecord]:
    """read_run of each path, in order; many files are read by reader processes (``readers``; reading and
    checking a run of 200 cases costs ~0.1 s of pandas, the insert a few ms)."""
    workers = readers(len(paths)) if workers is None else workers
    if workers < 2:
        yield from (read_run(p, git) for p in paths)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # forkserver, not fork: a process that has imported JAX (a test worker, `run` then `history add`) runs
    # threads, and a forked child can deadlock on a lock one of them held (Python warns of it)
    ctx = multiprocessing.get_context("forkserver" if "forkserver" in multiprocessing.get_all_start_methods()
                                      else "spawn")
    with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
        yield from pool.map(read_run, paths, [git] * len(paths), chunksize=8)


def add_files(store: Store, paths: Iterable[Path], git: Optional[GitLog] = None) -> tuple[int, int]:
    """Record each run file in the store: (runs added, runs already there). Stops at the first bad file
    (the runs before it stay recorded: each is its own transaction)."""
    git = git or GitLog()
    added = same = 0
    for run in _read_many(list(paths), git):
        if store.add(run):
            added += 1
        else:
            same += 1
    return added, same
