"""The history store on SQLite and on a real PostgreSQL server: idempotent adds, refused conflicts, schema
migrations, foreign or newer stores refused, concurrent writers losing nothing, kill -9 mid-add."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import _history_data as hd
from xlabench.history import ingest, store as st
from xlabench.history.store import HistoryError

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> list[Path]:
    """Six small real run files (4 cases x 5 samples)."""
    return hd.write_series(tmp_path_factory.mktemp("runs"), [1.0] * 6, n_cases=4)


def _counts(url: str) -> dict[str, int]:
    with st.open_store(url) as s:
        return {t: s.query(f"SELECT COUNT(*) FROM {t}")[0][0] for t in ("runs", "cases", "results")}


def test_add_records_each_run_once(history_url, runs):
    with st.open_store(history_url) as s:
        assert ingest.add_files(s, runs[:3]) == (3, 0)
        assert ingest.add_files(s, runs[:4]) == (1, 3)  # the same run again: nothing new
        got = {r["run_id"]: r for r in s.runs()}
        assert len(got) == 4
        first = got[hd.read_json(runs[0].with_suffix(".meta.json"))["run_id"]]
        assert first["suite"] == "attention" and first["device_kind"] == "cpu"
        assert first["framework_version"].startswith("jax") and first["git_sha"] == "c000000000"
        rows = s.query("SELECT median_s, samples, metrics FROM results WHERE run_id = ?", (first["run_id"],))
        assert len(rows) == 4
        median, samples, metrics = rows[0]
        assert len(json.loads(samples)) == 5 and json.loads(metrics)["median_s"] == median
        params = next(iter(s.cases().values()))["params"]
        assert {"seq_len", "batch", "dtype"} <= set(params)
    assert _counts(history_url) == {"runs": 4, "cases": 4, "results": 16}


def test_same_run_id_other_content_is_refused(history_url, runs, tmp_path):
    with st.open_store(history_url) as s:
        ingest.add_files(s, runs[:1])
    other = hd.write_series(tmp_path, [1.5], n_cases=4)[0]  # run 0's id, other samples
    assert other.name == runs[0].name
    with st.open_store(history_url) as s, pytest.raises(HistoryError, match="already in .* different content"):
        ingest.add_files(s, [other])
    assert _counts(history_url)["runs"] == 1


def test_a_store_of_schema_version_1_is_migrated(history_url, runs):
    with _bare(history_url) as s:
        s.migrate(target=1)
        assert s.version() == 1
    with st.open_store(history_url) as s:
        assert s.version() == st.SCHEMA_VERSION == 2
        ingest.add_files(s, runs[:1])
        assert s.runs()[0]["commit_message"] == ""  # the column migration 2 added


def _bare(url: str) -> st.Store:
    """A connection with no migration applied."""
    path = st.sqlite_path(url)
    if path is not None:
        return st._open_sqlite(path, url, create=True)
    return st._open_postgres(url)


def test_a_newer_store_is_refused(history_url):
    with st.open_store(history_url) as s:
        s.execute("UPDATE xlabench_meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(HistoryError, match="schema version 99 is newer than this xlabench's"):
        st.open_store(history_url)


def test_a_foreign_database_is_refused(history_url):
    with _bare(history_url) as s:
        s.execute("CREATE TABLE invoices (id INTEGER)")
    with pytest.raises(HistoryError, match="not an xlabench history store .*invoices"):
        st.open_store(history_url)


def test_a_file_that_is_no_database_is_refused(tmp_path):
    bad = tmp_path / "h.sqlite"
    bad.write_bytes(b"this is a results CSV, not a database\n" * 100)
    with pytest.raises(HistoryError, match="not an xlabench history store"):
        st.open_store(f"sqlite:///{bad}")


ADDER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from xlabench.history import ingest, store
    with store.open_store(sys.argv[1]) as s:
        for p in sys.argv[2:]:
            s.add(ingest.read_run(Path(p)))
            print("added", p, flush=True)
""")


def _python(*args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


@pytest.mark.slow  # starts a process
def test_two_writers_at_once_lose_nothing(history_url, tmp_path):
    paths = hd.write_series(tmp_path / "runs", [1.0] * 16, n_cases=3)
    st.open_store(history_url).close()  # created before the race (creation races are tested below)
    # Both writers add every run, in opposite orders: each run is contended.
    procs = [_python(ADDER, history_url, *map(str, paths)), _python(ADDER, history_url, *map(str, reversed(paths)))]
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
    assert _counts(history_url) == {"runs": 16, "cases": 3, "results": 48}


def test_opening_a_store_that_another_writer_is_creating_waits_for_it(tmp_path, monkeypatch):
    # SQLite answers "database is locked" at once, without its busy timeout, to a connection that holds a
    # read lock and asks for the write lock another holds: PRAGMA journal_mode = WAL on a file that another
    # process is creating (CI saw it in the two-writers race below). The other writer here holds the write
    # lock and releases it when the opener first backs off, so the opener must retry, not fail.
    url = f"sqlite:///{tmp_path / 'history.sqlite'}"
    other = sqlite3.connect(str(tmp_path / "history.sqlite"), isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    waits: list[float] = []

    def back_off(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 1:
            other.execute("COMMIT")

    monkeypatch.setattr(st, "_sleep", back_off)
    with st.open_store(url) as s:
        assert s.version() == st.SCHEMA_VERSION
    other.close()
    assert len(waits) >= 1


def test_a_store_locked_past_the_busy_timeout_is_a_clear_error(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'history.sqlite'}"
    other = sqlite3.connect(str(tmp_path / "history.sqlite"), isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    clock = [0.0]
    monkeypatch.setattr(st, "_monotonic", lambda: clock[0])
    monkeypatch.setattr(st, "_sleep", lambda s: clock.__setitem__(0, clock[0] + s))
    with pytest.raises(HistoryError, match="database is locked"):
        st.open_store(url)
    assert clock[0] >= st.BUSY_TIMEOUT_S
    other.execute("ROLLBACK")
    other.close()


@pytest.mark.slow  # starts a process
def test_two_writers_creating_the_store_at_once(history_url, tmp_path):
    paths = hd.write_series(tmp_path / "runs", [1.0] * 4, n_cases=2)
    procs = [_python(ADDER, history_url, *map(str, paths[:2])), _python(ADDER, history_url, *map(str, paths[2:]))]
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
    assert _counts(history_url) == {"runs": 4, "cases": 2, "results": 8}


HALF_WRITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from xlabench.history import ingest, store
    s = store.open_store(sys.argv[1])
    run = ingest.read_run(Path(sys.argv[2]))
    run.cases = run.cases[:2]  # the run row and part of its results, inside the transaction
    s._begin()
    s._insert(run)
    print("inside", flush=True)
    time.sleep(600)
""")


@pytest.mark.slow  # starts a process
def test_kill_9_mid_add_leaves_no_trace(history_url, runs):
    with st.open_store(history_url) as s:
        ingest.add_files(s, runs[:1])
    p = _python(HALF_WRITER, history_url, str(runs[1]))
    try:
        assert p.stdout.readline().strip() == "inside"
    finally:
        os.kill(p.pid, signal.SIGKILL)
        p.communicate(timeout=60)
    assert _counts(history_url) == {"runs": 1, "cases": 4, "results": 4}
    with st.open_store(history_url) as s:  # the store takes the run afterwards, whole
        assert ingest.add_files(s, runs[1:2]) == (1, 0)
        if s.dialect == "sqlite":
            assert s.query("PRAGMA integrity_check") == [("ok",)]
    assert _counts(history_url) == {"runs": 2, "cases": 4, "results": 8}


@pytest.mark.slow  # starts a process
def test_kill_9_of_a_busy_writer_leaves_whole_runs(history_url, tmp_path):
    paths = hd.write_series(tmp_path / "runs", [1.0] * 12, n_cases=4)
    st.open_store(history_url).close()
    p = _python(ADDER, history_url, *map(str, paths))
    try:
        for _ in range(3):  # killed while it is adding its fourth run (or later)
            assert p.stdout.readline().startswith("added")
    finally:
        os.kill(p.pid, signal.SIGKILL)
        p.communicate(timeout=60)
    c = _counts(history_url)
    assert c["runs"] >= 3 and c["results"] == 4 * c["runs"]
    path = st.sqlite_path(history_url)
    if path is not None:
        assert sqlite3.connect(path).execute("PRAGMA integrity_check").fetchone() == ("ok",)
