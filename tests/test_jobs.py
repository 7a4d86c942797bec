"""``--jobs N`` (issue 25): N cases at once, each job in a worker of its own. The executor's contract on
its own (completion order, per-job finish, abort on an early stop, errors raised), the default from the
host's cores and memory, and `xlabench compile --jobs 2` end to end: the same rows as one job, a crash in
one job costing one row, --resume, and exit 2 for a bad --jobs."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from conftest import require_libtpu, run_cli
from xlabench import results
from xlabench.run import parallel


def test_in_parallel_yields_every_item_as_it_finishes_and_finishes_each_job():
    """The first item blocks until the consumer has the other three: they can only have come first, from the
    other job, whatever the host's load (no sleeps)."""
    finished, started = [], []
    lock = threading.Lock()
    release = threading.Event()

    def work(job: int, item: str) -> tuple[int, bool]:
        return job, release.wait(60) if item == "long" else True

    def on_start(job: int, item: str) -> None:
        with lock:
            started.append(item)

    gen = parallel.in_parallel(["long", "a", "b", "c"], 2, work, on_start, finished.append)
    first = [next(gen) for _ in range(3)]
    assert sorted(item for item, _ in first) == ["a", "b", "c"]  # yielded while "long" was still running
    assert len({job for _, (job, _) in first}) == 1  # one job took them all: the other held "long"
    release.set()
    (last,) = list(gen)
    assert last[0] == "long" and last[1] == (1 - first[0][1][0], True)  # released, not timed out
    assert sorted(finished) == [0, 1] and sorted(started) == ["a", "b", "c", "long"]


def test_in_parallel_one_job_runs_in_order_in_this_thread():
    here = threading.get_ident()
    got = list(parallel.in_parallel([3, 1, 2], 1, lambda job, i: (job, i, threading.get_ident())))
    assert got == [(3, (0, 3, here)), (1, (0, 1, here)), (2, (0, 2, here))]


def test_in_parallel_raises_what_escapes_work_and_aborts_an_early_stop():
    def work(job: int, item: int) -> int:
        if item == 2:
            raise ValueError("boom")
        time.sleep(0.05)
        return item

    with pytest.raises(ValueError, match="boom"):
        list(parallel.in_parallel(list(range(6)), 2, work))
    aborted = []
    gen = parallel.in_parallel(list(range(20)), 2, lambda job, i: time.sleep(0.02) or i, abort=lambda: aborted.append(1))
    next(gen)
    gen.close()  # the consumer stops (an interrupt): no new items, abort() once, the threads joined
    assert aborted == [1] and not [t for t in threading.enumerate() if t.name.startswith("xlabench-job-")]


def test_default_jobs_from_cores_and_memory(tmp_path: Path):
    gib = 1 << 30
    assert parallel.default_jobs(cores=96, available=400 * gib, per_job=3 * gib) == 96
    assert parallel.default_jobs(cores=96, available=24 * gib, per_job=3 * gib) == 8  # memory-bound
    assert parallel.default_jobs(cores=2, available=1 * gib, per_job=3 * gib) == 1  # never 0
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemAvailable:   12582912 kB\n")
    assert parallel.available_bytes(meminfo) == 12 * gib
    assert parallel.available_bytes(tmp_path / "absent") is None
    assert 1 <= parallel.default_jobs() <= parallel.host_cores()


@pytest.mark.slow  # starts a process
@pytest.mark.parametrize("value", ["0", "-1", "two"])
@pytest.mark.parametrize("command", ["compile", "run"])
def test_bad_jobs_is_exit_2_naming_the_option(write_suite, command: str, value: str):
    args = [command, str(write_suite()), "--jobs", value] + (["--target", "v5e-8"] if command == "compile" else [])
    r = run_cli(*args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--jobs" in r.stderr and "Traceback" not in r.stderr


JOBS_SUITE = """
name: jobstiny
workload: attention
backends: [jax]
impls: [naive, flash]
params: {num_heads: 2, head_dim: 128, dtype: bfloat16, batch: 1, mode: fwd}
matrix:
  seq_len: [128, 256]
"""
FIGURES = ["peak_memory_bytes", "mem_temp_bytes", "xla_flops", "xla_bytes_accessed", "hbm_fraction", "bound_s"]


def _compile(suite: Path, out: Path, *args: str, env: dict | None = None):
    r = run_cli("compile", str(suite), "--target", "v5e-8", "--out", str(out), "--no-cache", *args, env=env)
    csv = sorted(out.rglob("*.compile.csv"))[-1]
    return r, csv, results.read_rows(csv).set_index("case_id").sort_index()


@pytest.mark.slow  # starts a process
def test_compile_jobs_2_gives_the_rows_of_one_job(write_suite, tmp_path: Path):
    require_libtpu()
    suite = write_suite(JOBS_SUITE)
    r1, _, one = _compile(suite, tmp_path / "j1", "--jobs", "1")
    r2, csv2, two = _compile(suite, tmp_path / "j2", "--jobs", "2")
    assert r1.returncode == 0 and r2.returncode == 0, r2.stdout[-2000:] + r2.stderr[-2000:]
    assert list(one.index) == list(two.index) and (two["status"] == "compiled").all()
    for col in FIGURES:
        assert one[col].tolist() == two[col].tolist(), col
    assert "4 case(s), 2 jobs" in r2.stdout and "(2 jobs); peak host memory per job:" in r2.stdout
    assert json.loads(csv2.with_name(csv2.name.replace(".compile.csv", ".compile.meta.json")).read_text())["jobs"] == 2


@pytest.mark.slow  # starts a process
def test_compile_jobs_crash_costs_one_row_and_resume_finishes(write_suite, tmp_path: Path):
    require_libtpu()
    suite = write_suite(JOBS_SUITE)
    fault = json.dumps([{"match": {"impl": "flash", "seq_len": 256}, "fault": "exit"}])
    r, csv, rows = _compile(suite, tmp_path / "r", "--jobs", "2", env={"XLABENCH_INJECT_FAULT": fault})
    assert r.returncode == 1
    assert sorted(rows["status"].tolist()) == ["compiled"] * 3 + ["failed"]
    assert "worker crashed (exit code 17)" in rows[rows["status"] == "failed"]["error"].iloc[0]
    # Resume with two jobs: the cases that have a row are not compiled again.
    header, *lines = csv.read_text().splitlines(keepends=True)
    csv.write_text("".join([header, *[ln for ln in lines if ",compiled," in ln][:2]]))  # two compiled rows kept
    r2, _, resumed = _compile(suite, tmp_path / "r", "--jobs", "2", "--resume", str(csv))
    assert r2.returncode == 0, r2.stdout[-2000:] + r2.stderr[-2000:]
    assert "2 case(s), 2 already done, 2 jobs" in r2.stdout
    assert len(resumed) == 4 and (resumed["status"] == "compiled").all()


def test_timed_runs_on_an_accelerator_refuse_more_than_one_job():
    from xlabench.run.suite_runner import jobs_refused

    assert jobs_refused(1, "tpu") is None and jobs_refused(4, "cpu") is None
    for platform in ("tpu", "gpu"):
        assert "--jobs 2" in jobs_refused(2, platform) and "one case at a time" in jobs_refused(2, platform)


@pytest.mark.slow  # starts a process
def test_run_jobs_2_on_cpu_rows_say_they_shared_the_host(write_suite, tmp_path: Path):
    suite = write_suite()  # conftest's tiny suite: 2 impls x 2 shapes
    fault = json.dumps([{"match": {"impl": "xla_sdpa", "seq_len": 128}, "fault": "segv"}])
    r = run_cli("run", str(suite), "--jobs", "2", "--out", str(tmp_path), env={"XLABENCH_INJECT_FAULT": fault})
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]  # a failed case
    assert "4 case(s), 2 jobs at once" in r.stdout
    csv = next(p for p in tmp_path.rglob("*.csv") if not p.name.endswith(".samples.csv"))
    rows = results.read_rows(csv)
    assert sorted(rows["status"]) == ["failed", "ok", "ok", "ok"]
    assert "SIGSEGV" in rows[rows["status"] == "failed"]["error"].iloc[0]
    ok = rows[rows["status"] == "ok"]
    assert ok["notes"].str.contains("timed with 2 jobs at once").all() and (ok["correct"] == True).all()  # noqa: E712
    meta = json.loads(csv.with_name(csv.stem + ".meta.json").read_text())
    assert meta["jobs"] == 2
    # the three ok rows' phases, summed per phase (the JAX attention case names them; the worker adds other)
    assert {"inputs", "tune", "compile", "timing", "reference", "check"} <= set(meta["phase_s"])
    assert all(s >= 0 for s in meta["phase_s"].values())
