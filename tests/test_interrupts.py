"""Interrupts and orphans without real workers (fast): SIGINT/SIGTERM become Interrupted at safe points,
the runner kills its workers and writes no row for the case in flight, the CLI maps it to 130/143 and a
resume hint, and the worker's watchdog notices a dead parent."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from xlabench import cli
from xlabench.worker import parent_watch as worker
from xlabench.run import suite_runner as run_session
from xlabench.run import interrupts, scheduler
from xlabench.protocol.replies import Reply, WorkerEnv
from xlabench import suite as suite_lib

SUITE = """
name: intr
workload: attention
impls: [naive]
params: {num_heads: 2, head_dim: 32, dtype: float32, batch: 1}
matrix:
  seq_len: [32, 64, 96]
measure: {warmup: 0, iters: 2}
"""


def _signal_self(signum: int) -> None:
    os.kill(os.getpid(), signum)
    time.sleep(0.2)  # the handler runs at the next bytecode boundary, long before this ends


def test_sigterm_raises_interrupted_143_and_the_handlers_come_back():
    before = {s: signal.getsignal(s) for s in interrupts.INTERRUPT_SIGNALS}
    with pytest.raises(interrupts.Interrupted) as e, interrupts.interruptible():
        _signal_self(signal.SIGTERM)
    assert e.value.exit_code == 143 and isinstance(e.value, KeyboardInterrupt)
    assert {s: signal.getsignal(s) for s in interrupts.INTERRUPT_SIGNALS} == before


def test_a_signal_in_a_critical_block_waits_for_its_end():
    reached = []
    with pytest.raises(interrupts.Interrupted) as e, interrupts.interruptible():
        with interrupts.uninterrupted():
            _signal_self(signal.SIGINT)
            reached.append("end of block")
        reached.append("after the block")  # never: the pending signal is raised as the block ends
    assert reached == ["end of block"] and e.value.exit_code == 130


class FakeWorker:
    """Answers the first case with a skip, then does what ``on_run`` says (e.g. receive a signal)."""

    def __init__(self, on_run):
        self.env = WorkerEnv({"platform": "cpu", "device_count": 1})
        self.on_run = on_run
        self.calls = 0

    def request(self, msg: dict[str, Any], timeout_s: float) -> Reply:
        self.calls += 1
        if self.calls > 1:
            self.on_run()
        return Reply(status="skipped", error="fake")

    def alive(self) -> bool:
        return True


class FakePool:
    def __init__(self, w: FakeWorker):
        self.w = w
        self.killed = False

    def missing(self, backend: str) -> None:
        return None

    def get(self, backend: str, devices: int, variant: str = "") -> FakeWorker:
        return self.w

    def kill_all(self) -> None:
        self.killed = True


class ListWriter:
    def __init__(self, on_write=lambda: None):
        self.rows: list[dict[str, Any]] = []
        self.on_write = on_write

    def write(self, row: dict[str, Any], samples: Any = ()) -> None:
        self.on_write()
        self.rows.append(dict(row))


def _cases(tmp_path: Path) -> list[suite_lib.Case]:
    p = tmp_path / "s.yaml"
    p.write_text(SUITE)
    return suite_lib.load(p).cases("")


@pytest.mark.slow  # starts a process (the host calibration's python -c)
def test_interrupt_in_a_case_kills_the_workers_and_writes_no_row_for_it(tmp_path):
    pool = FakePool(FakeWorker(lambda: _signal_self(signal.SIGINT)))
    writer, seen = ListWriter(), []
    ctx = scheduler.RunContext(run_id="r", platform="cpu", git_sha="x")
    with pytest.raises(interrupts.Interrupted):
        scheduler.run_cases(_cases(tmp_path), writer, ctx, pool, on_row=lambda c, r: seen.append(r["seq_len"]))
    assert [r["seq_len"] for r in writer.rows] == [32] and seen == [32]  # the second case: no row
    assert pool.killed


@pytest.mark.slow  # starts a process (the host calibration's python -c)
def test_interrupt_while_a_row_is_written_keeps_the_row_whole_and_counted(tmp_path):
    writer = ListWriter(on_write=lambda: _signal_self(signal.SIGINT))
    seen: list[int] = []
    pool = FakePool(FakeWorker(lambda: None))
    ctx = scheduler.RunContext(run_id="r", platform="cpu", git_sha="x")
    with pytest.raises(interrupts.Interrupted):
        scheduler.run_cases(_cases(tmp_path), writer, ctx, pool, on_row=lambda c, r: seen.append(r["seq_len"]))
    assert [r["seq_len"] for r in writer.rows] == seen == [32] and pool.killed


def _interrupted(signum: int, done: int | None, total: int | None, csv: Path | None) -> interrupts.Interrupted:
    e = interrupts.Interrupted(signum)
    e.done, e.total, e.csv = done, total, csv
    return e


def test_run_maps_an_interrupt_to_130_and_a_resume_hint_with_the_case_options(tmp_path, monkeypatch):
    suite = tmp_path / "s.yaml"
    suite.write_text(SUITE)
    csv = tmp_path / "my run" / "r.csv"

    def interrupted_run(*a: Any, **kw: Any) -> None:
        raise _interrupted(signal.SIGINT, 2, 5, csv)

    monkeypatch.setattr(run_session, "run_suite", interrupted_run)
    res = CliRunner().invoke(cli.main, ["run", str(suite), "--impl", "naive", "--repeats", "3", "--out", "x"])
    assert res.exit_code == 130, res.output
    assert (f"interrupted: 2 of 5 cases done; resume with: xlabench run {suite} --resume '{csv}' --impl naive "
            "--repeats 3") in res.output
    assert "Aborted" not in res.output


def test_run_interrupted_before_any_case_says_there_is_nothing_to_resume(tmp_path, monkeypatch):
    suite = tmp_path / "s.yaml"
    suite.write_text(SUITE)

    def interrupted_run(*a: Any, **kw: Any) -> None:
        raise _interrupted(signal.SIGTERM, None, None, None)

    monkeypatch.setattr(run_session, "run_suite", interrupted_run)
    res = CliRunner().invoke(cli.main, ["run", str(suite)])
    assert res.exit_code == 143
    assert "interrupted while starting the first worker; no case ran, nothing to resume" in res.output


def test_gate_maps_an_interrupt_to_130_no_verdict_and_leaves_the_baseline_alone(tmp_path, monkeypatch):
    suite = tmp_path / "s.yaml"
    suite.write_text(SUITE)
    csv = tmp_path / "r.csv"

    def interrupted_run(*a: Any, **kw: Any) -> None:
        raise _interrupted(signal.SIGINT, 1, 3, csv)

    monkeypatch.setattr(run_session, "run_suite", interrupted_run)
    baseline = tmp_path / "base.csv"
    res = CliRunner().invoke(cli.main, ["gate", str(suite), "--baseline", str(baseline), "--save-baseline"])
    assert res.exit_code == 130, res.output
    assert (f"gate interrupted (1 of 3 cases of {csv} done): no verdict, the baseline is unchanged; "
            "run the gate again") in res.output
    assert not baseline.exists()


def _watch(parent_gone, fd: int, grace_s: float = 0.2) -> threading.Event:
    dead = threading.Event()
    threading.Thread(target=worker._watch_parent, args=(parent_gone, fd, dead.set, 0.02, grace_s),
                     daemon=True).start()
    return dead


def test_watchdog_fires_when_the_parent_is_gone():
    r, w = os.pipe()
    try:
        assert _watch(lambda: worker._parent_gone(os.getppid() + 1_000_000, direct=True), r).wait(2)
    finally:
        os.close(r)
        os.close(w)


def test_watchdog_fires_after_a_grace_when_the_protocol_pipe_closes_and_not_before():
    r, w = os.pipe()
    try:
        dead = _watch(lambda: worker._parent_gone(os.getppid(), direct=True), r, grace_s=0.3)
        assert not dead.wait(0.3)  # parent alive, pipe open
        os.close(w)
        started = time.monotonic()
        assert dead.wait(2) and time.monotonic() - started >= 0.25
    finally:
        os.close(r)


def test_a_parent_behind_a_wrapper_is_watched_by_its_pid_and_a_zombie_counts_as_dead():
    assert not worker._parent_gone(os.getpid(), direct=False)  # alive, though not our parent
    child = subprocess.Popen(["sleep", "0"])
    try:
        deadline = time.monotonic() + 5
        while worker._pid_alive(child.pid) and time.monotonic() < deadline:
            time.sleep(0.01)  # it exits at once; unreaped, it stays a zombie
        assert worker._parent_gone(child.pid, direct=False)
    finally:
        child.wait()


# ------------------------------------------------------------------ issue 50 item 8: `compile` like `run`

def test_compile_maps_ctrl_c_to_130_and_a_resume_hint_not_aborted(tmp_path, monkeypatch):
    """`compile` says what `run` says (cli.run.interrupted_message), its own command in the resume line."""
    from xlabench.run import compile_runner

    suite = tmp_path / "s.yaml"
    suite.write_text(SUITE)
    csv = tmp_path / "r.compile.csv"

    def interrupted_compile(*a: Any, **kw: Any) -> None:
        raise _interrupted(signal.SIGINT, 2, 5, csv)

    monkeypatch.setattr(compile_runner, "compile_suite", interrupted_compile)
    res = CliRunner().invoke(cli.main, ["compile", str(suite), "--target", "v5e-8", "--slices", "2", "--impl", "naive"])
    assert res.exit_code == 130, res.output
    assert (f"interrupted: 2 of 5 cases done; resume with: xlabench compile {suite} --target v5e-8 "
            f"--slices 2 --resume {csv} --impl naive") in res.output
    assert "Aborted" not in res.output


def test_compile_on_sigterm_says_so_and_exits_143(tmp_path, monkeypatch):
    from xlabench.run import compile_runner

    suite = tmp_path / "s.yaml"
    suite.write_text(SUITE)

    def interrupted_compile(*a: Any, **kw: Any) -> None:
        raise _interrupted(signal.SIGTERM, None, None, None)

    monkeypatch.setattr(compile_runner, "compile_suite", interrupted_compile)
    res = CliRunner().invoke(cli.main, ["compile", str(suite), "--target", "v5e-8"])
    assert res.exit_code == 143, res.output
    assert "interrupted while starting the first worker; no case ran, nothing to resume" in res.output


def test_an_interrupted_compile_tells_how_far_it_got_and_its_meta_records_it(tmp_path, monkeypatch):
    """compile_suite turns SIGINT into Interrupted with done / total / csv (as run_suite does), kills its
    workers, and writes the interruption into the meta (issue 50 item 5)."""
    import json

    from xlabench import results
    from xlabench.run import compile_runner, session

    class Pool:
        def __init__(self, *a: Any, **kw: Any) -> None:
            self.killed = False

        def like(self) -> "Pool":
            return Pool()

        def close(self) -> None:
            pass

        def kill_all(self) -> None:
            self.killed = True

        def peak_rss_bytes(self) -> None:
            return None

    calls: list[str] = []

    def compile_one(case: Any, *a: Any, **kw: Any) -> dict[str, Any]:
        calls.append(case.case_id)
        if len(calls) > 1:
            _signal_self(signal.SIGINT)
        return {"status": "failed", "error": "fake"}

    monkeypatch.setattr(session, "WorkerPool", Pool)
    monkeypatch.setattr(compile_runner, "_target_env", lambda sess, target, spec: (
        {"platform": "tpu", "device_kind": "TPU v5 lite", "device_count": 8, "framework_version": "x"}, {}))
    monkeypatch.setattr(compile_runner, "_compile_one", compile_one)
    p = tmp_path / "s.yaml"
    p.write_text(SUITE)
    opts = run_session.RunOptions(out_dir=str(tmp_path / "out"), jobs=1, no_cache=True)
    with pytest.raises(interrupts.Interrupted) as e:
        compile_runner.compile_suite(suite_lib.load(p), "v5e-8", opts=opts)
    assert (e.value.done, e.value.total) == (1, 3) and e.value.csv is not None and e.value.csv.exists()
    meta = json.loads(results.RunFiles(e.value.csv).meta.read_text())
    assert meta["cases_planned"] == 3 and meta["interrupted"]["signal"] == "SIGINT"
    assert results.run_progress(e.value.csv).text() == "1 of 3 cases (interrupted by SIGINT)"


@pytest.mark.parametrize("cache", [["--no-cache"], ["--cache-dir", "CACHE"]])
def test_compile_and_run_resume_hints_keep_the_compilation_cache_choice(tmp_path, cache):
    """compile's resume hint dropped --no-cache (issue 61 item 13): the resumed compile then read its
    figures from the cache the first part refused."""
    from xlabench.cli.run import resume_command
    from xlabench.run.run_options import RunOptions, resume_words

    cache = [str(tmp_path / w) if w == "CACHE" else w for w in cache]
    opts = RunOptions(no_cache=True) if cache == ["--no-cache"] else RunOptions(cache_dir=cache[1])
    assert resume_words(opts) == cache
    assert resume_words(RunOptions()) == []  # nothing said of a default
    assert resume_command("s.yaml", tmp_path / "r.csv", opts).endswith(" ".join(cache))


def test_a_signal_while_the_workers_close_leaves_the_runs_end_in_its_meta(tmp_path, monkeypatch):
    """run_suite writes the end (finish_meta) before it closes its workers: a Ctrl-C during their close used
    to leave neither ``ended`` nor ``interrupted`` in the meta (issue 61)."""
    import json

    from xlabench.run import session

    class Pool(FakePool):
        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(FakeWorker(lambda: None))
            self.w.env = WorkerEnv({"platform": "cpu", "device_count": 1, "device_kind": "cpu", "framework_version": "x"})
            self.interpreters = run_session.Interpreters()

        def add_jobs(self, *a: Any, **kw: Any) -> None:
            pass

        def close(self) -> None:
            raise KeyboardInterrupt

    monkeypatch.setattr(session, "WorkerPool", Pool)
    monkeypatch.setattr(run_session, "run_cases", lambda todo, *a, **kw: [])
    p = tmp_path / "s.yaml"
    p.write_text(SUITE)
    opts = run_session.RunOptions(out_dir=str(tmp_path / "out"), jobs=1, no_cache=True)
    with pytest.raises(KeyboardInterrupt):
        run_session.run_suite(suite_lib.load(p), opts)
    (meta_path,) = (tmp_path / "out").rglob("*.meta.json")
    assert "ended" in json.loads(meta_path.read_text())
